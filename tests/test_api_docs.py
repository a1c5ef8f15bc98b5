"""``/docs`` works offline: Swagger UI's page and every asset it loads come from this
service (api/routes/docs.py), not from a CDN."""

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


def test_redoc_is_off_and_docs_are_not_in_the_schema(client: TestClient) -> None:
    assert client.get("/redoc").status_code == 404
    paths = client.get("/openapi.json").json()["paths"]
    assert "/docs" not in paths and not any(p.startswith("/static") for p in paths)
