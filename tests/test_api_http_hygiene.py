"""Headers on every answer, OPTIONS with Allow, and no internals in a 500 (issue 14,
findings 7 and 9)."""

from __future__ import annotations

import re

import pytest
from api_support import api_client, assert_error, small
from sqlalchemy.exc import OperationalError

from api.headers import DEFAULT_CSP
from api.services import plans as plan_service

SECURITY = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def assert_secure(response) -> None:
    for name, value in SECURITY.items():
        assert response.headers.get(name) == value, (response.request.url, name)
    csp = response.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp, csp


@pytest.fixture
def client(migrated_sqlite_url):
    with api_client(migrated_sqlite_url, max_body_bytes=20_000) as c:
        yield c


def test_every_kind_of_answer_has_the_security_headers(client):
    answers = [
        client.get("/health"),
        client.get("/plans"),
        client.get("/plans/not-a-uuid"),
        client.get("/no/such/path"),
        client.post("/plans", json={"model": 1}),
        client.post("/plans", content=b"x" * 30_000, headers={"content-type": "application/json"}),
        client.post("/plans", content=b"model", headers={"content-type": "text/plain"}),
        client.put("/plans"),
        client.options("/plans"),
        client.get("/openapi.json"),
        client.get("/docs"),
        client.get("/static/swagger/swagger-ui.css"),
    ]
    assert {r.status_code for r in answers} >= {200, 204, 404, 405, 413, 415, 422}
    for response in answers:
        assert_secure(response)
    assert client.get("/plans").headers["content-security-policy"] == DEFAULT_CSP


def test_a_500_has_the_headers_a_reference_and_no_sql(client, monkeypatch):
    def broken(*args, **kwargs):
        raise OperationalError("SELECT secret FROM plans WHERE id = %(id)s", {"id": "x"}, None)

    monkeypatch.setattr(plan_service, "list_plans", broken)
    response = client.get("/plans")
    body = assert_error(response, 500, "internal_error")
    assert_secure(response)
    assert "SELECT" not in response.text and "secret" not in response.text
    assert re.search(r"reference [0-9a-f]{12}", body["detail"]), body


def test_docs_allow_only_their_own_inline_script(client):
    page = client.get("/docs")
    csp = page.headers["content-security-policy"]
    assert re.search(r"script-src 'self' 'sha256-[A-Za-z0-9+/=]+'", csp), csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert "connect-src 'self'" in csp


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/plans", {"GET", "POST"}),
        ("/plans/0b7f1c3e-1f0e-4a7a-9a43-3c1d2b8c9d10", {"GET", "DELETE"}),
        ("/catalog/gpus/l40s", {"GET", "PUT", "DELETE"}),
        ("/health", {"GET"}),
        ("/static/swagger/swagger-ui.css", {"GET", "HEAD"}),
    ],
)
def test_options_answers_with_allow(client, path, methods):
    response = client.options(path)
    assert response.status_code == 204, response.text
    allow = {m.strip() for m in response.headers["allow"].split(",")}
    assert allow - {"HEAD"} == (methods | {"OPTIONS"}) - {"HEAD"}, allow
    assert_secure(response)


def test_options_on_an_unknown_path_is_404(client):
    assert client.options("/no/such/path").status_code == 404


def test_a_405_names_every_allowed_method(client):
    response = client.patch("/plans")
    assert_error(response, 405)
    allow = {m.strip() for m in response.headers["allow"].split(",")}
    assert {"GET", "POST", "OPTIONS"} <= allow, allow


def test_plans_still_work_behind_the_middleware(client):
    created = client.post("/plans", json=small())
    assert created.status_code == 201, created.text
    assert_secure(created)
