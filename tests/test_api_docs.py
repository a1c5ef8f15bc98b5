"""``/docs`` and ``/redoc`` work offline: Swagger UI's and ReDoc's pages and every asset
they load come from this service (api/routes/docs.py), not from a CDN."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


def test_docs_page_loads_only_local_assets(client: TestClient) -> None:
    r = client.get("/docs")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    html = r.text
    assert "cdn.jsdelivr.net" not in html and "unpkg.com" not in html
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html) + re.findall(
        r"""url: ['"]([^'"]+)['"]""", html
    )
    assert "/static/swagger/swagger-ui-bundle.js" in urls
    assert "/static/swagger/swagger-ui.css" in urls
    assert "/openapi.json" in urls
    for url in urls:
        assert url.startswith("/"), url  # nothing from another host
        got = client.get(url)
        assert got.status_code == 200, url
        assert got.content, url
    js = client.get("/static/swagger/swagger-ui-bundle.js")
    assert "javascript" in js.headers["content-type"]
    assert "SwaggerUIBundle" in js.text
    assert client.get("/openapi.json").json()["info"]["title"] == "fleetplan"


def test_redoc_page_loads_only_local_assets(client: TestClient) -> None:
    r = client.get("/redoc")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert "cdn.redoc.ly" not in r.text and "fonts.googleapis.com" not in r.text
    urls = re.findall(r"""(?:src|href|spec-url)=["']([^"']+)["']""", r.text)
    assert "/static/redoc/redoc.standalone.js" in urls and "/openapi.json" in urls
    for url in urls:
        assert url.startswith("/"), url
        assert client.get(url).status_code == 200, url
    csp = r.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "worker-src 'self' blob:" in csp


def test_docs_are_not_in_the_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/docs" not in paths and "/redoc" not in paths
    assert not any(p.startswith("/static") for p in paths)
