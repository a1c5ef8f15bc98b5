"""Health and the read-only catalog endpoints."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from catalog.loader import load_catalog

KINDS = ["gpus", "models", "workloads", "links"]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def assert_error_body(body: dict, code: str) -> None:
    assert set(body) == {"error", "detail", "issues"}
    assert body["error"] == code
    assert isinstance(body["detail"], str) and body["detail"]
    for issue in body["issues"]:
        assert set(issue) == {"field", "message"}


def test_health_ok(client, catalog):
    response = client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == "ok"
    assert body["catalog_hash"] == catalog.content_hash
    assert body["version"]


@pytest.mark.postgres
def test_health_ok_on_postgres(postgres_url):
    with TestClient(create_app(Settings(database_url=postgres_url))) as client:
        response = client.get("/health")
    assert response.status_code == 200
    assert response.json()["database"] == "ok"


def test_health_503_when_database_unreachable(tmp_path):
    missing = tmp_path / "no-such-dir" / "fleetplan.db"
    with TestClient(create_app(Settings(database_url=f"sqlite:///{missing}"))) as client:
        response = client.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["database"] == "unreachable"


def test_catalog_summary(client, catalog):
    body = client.get("/catalog").json()
    assert body["catalog_hash"] == catalog.content_hash
    assert body["counts"] == {kind: len(getattr(catalog, kind)) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_list_each_kind(client, catalog, kind):
    response = client.get(f"/catalog/{kind}")
    assert response.status_code == 200
    entries = getattr(catalog, kind)
    expected = [
        {**entries[i].model_dump(mode="json"), "source": "shipped"} for i in sorted(entries)
    ]
    assert response.json() == expected
    assert all("id" in item for item in response.json())


@pytest.mark.parametrize("kind", KINDS)
def test_get_each_entry(client, catalog, kind):
    for entry_id, entry in getattr(catalog, kind).items():
        response = client.get(f"/catalog/{kind}/{entry_id}")
        assert response.status_code == 200, entry_id
        assert response.json() == {**entry.model_dump(mode="json"), "source": "shipped"}


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_id_is_404_with_error_body(client, kind):
    response = client.get(f"/catalog/{kind}/no-such-entry")
    assert response.status_code == 404
    body = response.json()
    assert_error_body(body, "not_found")
    assert "no-such-entry" in body["detail"]
    assert body["issues"] == [{"field": "id", "message": body["detail"]}]


@pytest.mark.parametrize("path", ["/catalog/tpus", "/catalog/tpus/v5e"])
def test_unknown_kind_is_404_naming_the_kinds(client, path):
    response = client.get(path)
    assert response.status_code == 404
    body = response.json()
    assert_error_body(body, "not_found")
    assert body["issues"][0]["field"] == "kind"
    assert all(kind in body["detail"] for kind in KINDS)


def test_unknown_path_uses_the_error_body(client):
    response = client.get("/no/such/path")
    assert response.status_code == 404
    assert_error_body(response.json(), "not_found")


def test_shipped_entries_are_read_only(client):
    response = client.delete("/catalog/gpus/l40s")
    assert response.status_code == 409
    assert_error_body(response.json(), "conflict")
    response = client.patch("/catalog/gpus/l40s", json={})
    assert response.status_code == 405
    assert_error_body(response.json(), "method_not_allowed")


def test_openapi_documents_typed_catalog_routes(client):
    schema = client.get("/openapi.json").json()
    assert schema["info"]["title"] == "fleetplan"
    assert "/catalog/gpus/{entry_id}" in schema["paths"]
    assert "/catalog/{kind}" not in schema["paths"]
    assert "Gpu" in schema["components"]["schemas"]
