"""Helpers shared by the API tests: small requests, clients, database counts."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import func, select
from sqlalchemy.pool import NullPool

from api.db.models import CatalogEntryRecord, PlanRecord
from api.db.session import make_engine
from api.main import create_app
from api.settings import Settings

with warnings.catch_warnings():  # see conftest.py
    warnings.filterwarnings(
        "ignore", message=r"Using `httpx` with `starlette\.testclient` is deprecated"
    )
    from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

#: A request that plans in a fraction of a second: one small model, two GPU types,
#: no verification by simulation (the examples and the 80/20 tests keep it on).
SMALL: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "traffic": {"rate_rps": 5, "classes": [{"workload": "chat", "share": 1.0}]},
    "candidates": {"gpus": ["h100-sxm5-80gb", "l40s"]},
    "verify": {"enabled": False},
}


def small(**changes: Any) -> dict[str, Any]:
    """A deep copy of :data:`SMALL` with top-level keys replaced."""
    body = copy.deepcopy(SMALL)
    body.update(copy.deepcopy(changes))
    return body


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))


@contextmanager
def api_client(database_url: str, **settings: Any) -> Iterator[TestClient]:
    """The app on ``database_url`` (already migrated), started and stopped."""
    app = create_app(Settings(database_url=database_url, **settings))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def count_rows(database_url: str, model: type = PlanRecord) -> int:
    engine = make_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(model)).scalar_one())
    finally:
        engine.dispose()


def count_plans(database_url: str) -> int:
    return count_rows(database_url, PlanRecord)


def count_custom_entries(database_url: str) -> int:
    return count_rows(database_url, CatalogEntryRecord)


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The response has ``status`` and the single error body; returns the body."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail", "issues"}, body
    assert isinstance(body["detail"], str) and body["detail"]
    for issue in body["issues"]:
        assert set(issue) == {"field", "message"}
    if code is not None:
        assert body["error"] == code, body
    return body
