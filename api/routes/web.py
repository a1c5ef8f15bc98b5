"""The web page at ``/`` and the few JSON endpoints it needs beyond the REST API.

The page is plain HTML, CSS and JavaScript modules checked in under
``api/static/app`` and served from here (``/static/app``): no build step, nothing
from another host, so it works offline. It calls the same JSON endpoints as any
client (``/plans``, ``/comparisons``, ``/catalog``, ``/calibrations``) plus:

- ``GET /examples``: the shipped example requests (``examples/*.yaml``), name, kind
  (``plan`` or ``comparison``), title and description;
- ``GET /examples/{name}``: one of them as parsed JSON (``document``);
- ``GET /web/config``: the colour of every catalog GPU type (the reports' colours),
  whether writes need an API key, the report formats and deployment targets;
- ``POST /plans/validate``: a plan request checked (schema, then catalog ids) without
  planning it: 200 with the warnings it would carry, or the 422 ``POST /plans`` gives.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from api import __version__
from api.deps import SessionDep, SettingsDep
from api.jsonbody import JsonBodyRoute
from api.schemas import PlanRequest, error_responses
from api.services import web
from api.services.catalog import merged_catalog

#: The page's files and the URL they are served at.
APP_DIR = Path(__file__).resolve().parent.parent / "static" / "app"
APP_URL = "/static/app"

#: The page's Content-Security-Policy: its scripts, styles and data from this service
#: only; no inline script, no frames, no form posts elsewhere. Charts are inline SVG.
APP_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'"
)

REPORT_FORMATS = ("html", "md", "csv", "json", "xlsx")
DEPLOYMENT_TARGETS = ("dynamo", "llm-d", "compose")

router = APIRouter(tags=["web"], route_class=JsonBodyRoute)


class ExampleSummary(BaseModel):
    name: str = Field(description="The file name without `.yaml`: `GET /examples/{name}`.")
    kind: str = Field(description="`plan` (a plan request) or `comparison` (a what-if).")
    title: str = Field(description="The document's `name`, else the file name.")
    description: str = Field(description="The comment at the top of the file.")


class ExampleDocument(ExampleSummary):
    document: dict[str, Any] = Field(description="The example, parsed (safe YAML) to JSON.")


class WebConfig(BaseModel):
    version: str
    api_key_required: bool = Field(description="Writes need the `X-API-Key` header.")
    gpu_colors: dict[str, str] = Field(description="Colour of every catalog GPU type.")
    report_formats: list[str]
    deployment_targets: list[str]


class Validation(BaseModel):
    valid: bool = Field(description="Always true: an invalid request is a 422.")
    warnings: list[str] = Field(description="What the plan would warn about.")


@lru_cache(maxsize=1)
def _index_html() -> str:
    return (APP_DIR / "index.html").read_text(encoding="utf-8")


@router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
def index() -> HTMLResponse:
    """The web page (every asset from ``/static/app``; see :data:`APP_CSP`)."""
    return HTMLResponse(_index_html(), headers={"Content-Security-Policy": APP_CSP})


@router.get("/examples", response_model=list[ExampleSummary], summary="List shipped examples")
def list_examples() -> list[ExampleSummary]:
    """The example requests shipped in ``examples/``: plan requests and what-if
    comparison documents, by name."""
    return [ExampleSummary(**vars(e)) for e in web.list_examples()]


@router.get(
    "/examples/{name}",
    response_model=ExampleDocument,
    responses=error_responses(404),
    summary="One shipped example, as JSON",
)
def get_example(name: str) -> ExampleDocument:
    """The example parsed to JSON (404 for a name ``GET /examples`` does not list)."""
    return ExampleDocument(**web.load_example(name))


@router.get("/web/config", response_model=WebConfig, summary="What the web page needs to know")
def web_config(request: Request, session: SessionDep, settings: SettingsDep) -> WebConfig:
    """GPU colours (as in the reports), whether writes need an API key, report
    formats and deployment targets."""
    catalog = merged_catalog(session, request.app.state.catalog)
    return WebConfig(
        version=__version__,
        api_key_required=settings.api_key is not None,
        gpu_colors=web.gpu_palette(sorted(catalog.gpus)),
        report_formats=list(REPORT_FORMATS),
        deployment_targets=list(DEPLOYMENT_TARGETS),
    )


@router.post(
    "/plans/validate",
    response_model=Validation,
    responses=error_responses(413, 415, 422),
    summary="Check a plan request without planning it",
    tags=["plans"],
)
def validate_plan(body: PlanRequest, request: Request, session: SessionDep) -> Validation:
    """The request's schema and catalog ids, as ``POST /plans`` checks them (the same
    422 naming the field), without planning or storing anything."""
    warnings = web.validate_plan_request(session, body, request.app.state.catalog)
    return Validation(valid=True, warnings=warnings)


def install_web(app: FastAPI) -> None:
    """Serve the page at ``/``, its assets and its endpoints."""
    app.mount(APP_URL, StaticFiles(directory=APP_DIR), name="app")
    app.include_router(router)
