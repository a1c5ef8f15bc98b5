"""The API documentation at ``/docs`` (Swagger UI, interactive) and ``/redoc`` (ReDoc,
for reading), from assets this service serves itself (``api/static/swagger``,
``api/static/redoc``): FastAPI's default pages load them from a CDN, so they were blank
without internet."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Where the vendored Swagger UI files are, and the URL they are served at.
SWAGGER_DIR = Path(__file__).resolve().parent.parent / "static" / "swagger"
SWAGGER_URL = "/static/swagger"
REDOC_DIR = Path(__file__).resolve().parent.parent / "static" / "redoc"
REDOC_URL = "/static/redoc"

#: The ReDoc page's Content-Security-Policy: its script, the OpenAPI document and
#: the favicon from this service; ReDoc sets inline styles, uses ``data:`` images and
#: runs its search index in a ``blob:`` web worker.
REDOC_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
    "worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)

router = APIRouter()


_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def docs_csp(html: str) -> str:
    """The Content-Security-Policy of the docs page: scripts, styles and the OpenAPI
    document from this service only, plus the page's inline script(s) by their SHA-256
    (no other inline script runs); Swagger UI sets inline styles and uses ``data:``
    images."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    )
    return (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'none'"
    )


@router.get("/docs", include_in_schema=False)
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI for this API's OpenAPI document, every asset local (with its own
    Content-Security-Policy, :func:`docs_csp`)."""
    root = request.scope.get("root_path", "")
    page = get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} API",
        swagger_js_url=f"{root}{SWAGGER_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{SWAGGER_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{SWAGGER_URL}/favicon-32x32.png",
    )
    page.headers["Content-Security-Policy"] = docs_csp(bytes(page.body).decode())
    return page


@router.get("/redoc", include_in_schema=False)
def redoc(request: Request) -> HTMLResponse:
    """ReDoc for this API's OpenAPI document, every asset local and no web fonts
    (:data:`REDOC_CSP`)."""
    root = request.scope.get("root_path", "")
    title = html.escape(f"{request.app.title} API")
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="shortcut icon" href="{root}{SWAGGER_URL}/favicon-32x32.png">
<style>body {{ margin: 0; padding: 0; }}</style>
</head>
<body>
<redoc spec-url="{root}{request.app.openapi_url}"></redoc>
<script src="{root}{REDOC_URL}/redoc.standalone.js"></script>
</body>
</html>
"""
    return HTMLResponse(page, headers={"Content-Security-Policy": REDOC_CSP})


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets (the app is created with
    ``docs_url=None`` and ``redoc_url=None``)."""
    app.mount(SWAGGER_URL, StaticFiles(directory=SWAGGER_DIR), name="swagger")
    app.mount(REDOC_URL, StaticFiles(directory=REDOC_DIR), name="redoc")
    app.include_router(router)
