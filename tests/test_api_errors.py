"""The single error body, the body-size limit and the write-access dependency."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from api.deps import WriteAccess
from api.errors import unknown_entry_is_404
from api.main import create_app
from api.settings import Settings
from catalog.loader import CatalogError
from planner.errors import DoesNotFitError, PlanningError, UnknownEntryError


class Demand(BaseModel):
    workload: str
    rps: float = Field(gt=0)


class Body(BaseModel):
    model: str
    classes: list[Demand]


def probe_router() -> APIRouter:
    """Routes that raise each kind of error, as later planning routes will."""
    router = APIRouter(prefix="/_probe")

    @router.post("/validate")
    def validate(body: Body) -> dict:
        return {"ok": True}

    @router.post("/planning")
    def planning() -> None:
        raise PlanningError.for_field("classes.0.rps", "must be positive")

    @router.post("/unknown-in-body")
    def unknown_in_body() -> None:
        raise UnknownEntryError.for_field("model", "unknown model 'x'")

    @router.get("/unknown-in-path/{model_id}")
    def unknown_in_path(model_id: str) -> None:
        with unknown_entry_is_404("model_id"):
            raise UnknownEntryError.for_field("model_id", f"unknown model {model_id!r}")

    @router.post("/does-not-fit")
    def does_not_fit() -> None:
        raise DoesNotFitError("llama-3.1-405b does not fit in 1x l4", [("gpu", "too small")])

    @router.post("/catalog")
    def catalog_error() -> None:
        raise CatalogError("gpus.x.memory_gb: must be > 0", [("gpus.x.memory_gb", "> 0")])

    @router.get("/crash")
    def crash() -> None:
        raise RuntimeError("boom")

    @router.post("/echo")
    async def echo(request: Request) -> dict:
        return {"bytes": len(await request.body())}

    @router.post("/write", dependencies=[WriteAccess])
    def write() -> dict:
        return {"written": True}

    return router


def make_client(tmp_path, **settings) -> TestClient:
    app: FastAPI = create_app(
        Settings(database_url=f"sqlite:///{tmp_path / 'fleetplan.db'}", **settings)
    )
    app.include_router(probe_router())
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def probe(tmp_path) -> Iterator[TestClient]:
    with make_client(tmp_path, max_body_bytes=1000) as client:
        yield client


def body_of(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail", "issues"}
    assert body["error"] == code
    return body


def test_request_validation_issues_drop_the_body_prefix(probe):
    response = probe.post("/_probe/validate", json={"classes": [{"workload": "chat", "rps": 0}]})
    body = body_of(response, 422, "invalid_input")
    fields = {issue["field"] for issue in body["issues"]}
    assert fields == {"model", "classes[0].rps"}
    assert "classes[0].rps" in body["detail"]


def test_malformed_json_is_422(probe):
    response = probe.post(
        "/_probe/validate", content=b"{not json", headers={"content-type": "application/json"}
    )
    body_of(response, 422, "invalid_input")


def test_planning_error_is_422_with_its_issues(probe):
    body = body_of(probe.post("/_probe/planning"), 422, "invalid_input")
    assert body["issues"] == [{"field": "classes.0.rps", "message": "must be positive"}]
    assert body["detail"] == "classes.0.rps: must be positive"


def test_planning_error_subclass_keeps_its_code(probe):
    body = body_of(probe.post("/_probe/does-not-fit"), 422, "does_not_fit")
    assert body["issues"] == [{"field": "gpu", "message": "too small"}]


def test_unknown_id_in_a_body_is_422(probe):
    body = body_of(probe.post("/_probe/unknown-in-body"), 422, "unknown_entry")
    assert body["issues"][0]["field"] == "model"


def test_unknown_id_in_a_path_is_404(probe):
    body = body_of(probe.get("/_probe/unknown-in-path/nope"), 404, "not_found")
    assert body["issues"] == [{"field": "model_id", "message": "unknown model 'nope'"}]


def test_catalog_error_is_422(probe):
    body = body_of(probe.post("/_probe/catalog"), 422, "catalog_invalid")
    assert body["issues"] == [{"field": "gpus.x.memory_gb", "message": "> 0"}]


def test_unhandled_error_is_500_and_logged(probe, caplog):
    with caplog.at_level("ERROR", logger="api"):
        response = probe.get("/_probe/crash")
    body = body_of(response, 500, "internal_error")
    assert "boom" not in body["detail"]  # no internals leak to the client
    assert any("GET /_probe/crash" in r.getMessage() for r in caplog.records)


def test_declared_body_over_the_limit_is_413(probe):
    body = body_of(probe.post("/_probe/echo", content=b"x" * 1001), 413, "body_too_large")
    assert "1000" in body["detail"]


def test_streamed_body_over_the_limit_is_413(probe):
    def chunks() -> Iterator[bytes]:
        for _ in range(5):
            yield b"x" * 400

    body_of(probe.post("/_probe/echo", content=chunks()), 413, "body_too_large")


def test_body_within_the_limit_passes(probe):
    response = probe.post("/_probe/echo", content=b"x" * 1000)
    assert response.status_code == 200 and response.json() == {"bytes": 1000}


def test_writes_are_open_without_an_api_key(probe):
    assert probe.post("/_probe/write").json() == {"written": True}


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"X-API-Key": "wrong"}, 401), ({"X-API-Key": "s3cret"}, 200)],
)
def test_writes_need_the_api_key_when_set(tmp_path, headers, status):
    with make_client(tmp_path, api_key="s3cret") as client:
        response = client.post("/_probe/write", headers=headers)
        assert response.status_code == status
        if status == 401:
            body_of(response, 401, "unauthorized")
        # reads stay open
        assert client.get("/health").status_code == 200
