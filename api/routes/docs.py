"""The interactive API documentation at ``/docs``, from assets this service serves
itself (``api/static/swagger``): FastAPI's default page loads Swagger UI from a CDN,
so it was blank without internet. ReDoc (also CDN-only) is off."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Where the vendored Swagger UI files are, and the URL they are served at.
SWAGGER_DIR = Path(__file__).resolve().parent.parent / "static" / "swagger"
SWAGGER_URL = "/static/swagger"

router = APIRouter()


@router.get("/docs", include_in_schema=False)
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI for this API's OpenAPI document, every asset local."""
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} API",
        swagger_js_url=f"{root}{SWAGGER_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{SWAGGER_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{SWAGGER_URL}/favicon-32x32.png",
    )


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets (the app is created with ``docs_url=None``)."""
    app.mount(SWAGGER_URL, StaticFiles(directory=SWAGGER_DIR), name="swagger")
    app.include_router(router)
