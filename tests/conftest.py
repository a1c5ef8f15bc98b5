"""Shared fixtures: databases built by the Alembic migrations, and app clients.

SQLite always runs. PostgreSQL runs when ``FLEETPLAN_TEST_POSTGRES_URL`` is set
and reachable (``.ci/run`` sets it when a server listens on 127.0.0.1:5432); each
test gets a fresh schema, dropped afterwards, so a shared database stays clean.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator

import pytest
from settings_support import planner_defaults
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from api.db.migrate import upgrade
from api.db.session import make_engine
from api.main import create_app
from api.settings import Settings

# Starlette >= 1.x prefers the `httpx2` package for its TestClient and warns once, at
# import, when only `httpx` (our declared dev dependency) is installed. Ignore exactly
# that notice, here, for this one import; every other warning stays an error.
with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", message=r"Using `httpx` with `starlette\.testclient` is deprecated"
    )
    from fastapi.testclient import TestClient

POSTGRES_ENV = "FLEETPLAN_TEST_POSTGRES_URL"


@pytest.fixture(autouse=True)
def _clean_fleetplan_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's FLEETPLAN_* settings (test settings stay)."""
    for name in list(os.environ):
        if name.startswith("FLEETPLAN_") and not name.startswith("FLEETPLAN_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _plans_skip_verification(_clean_fleetplan_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans are not simulated unless a test asks (``make_plan(..., verify=True)`` or
    ``verify.enabled`` in the request): the simulation adds 0.2-2 s to every plan."""
    monkeypatch.setenv("FLEETPLAN_VERIFY_DEFAULT", "off")
    planner_defaults(monkeypatch, Settings())  # direct planner calls: the same settings


@pytest.fixture(autouse=True)
def _plans_with_alternatives_inline(
    _clean_fleetplan_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POST /plans`` solves alternatives before answering unless a test asks otherwise
    (tests/test_alternatives_deferred.py): no background thread outlives its test (the
    solver's ``warnings.catch_warnings`` on another thread would race pytest's)."""
    monkeypatch.setenv("FLEETPLAN_ALTERNATIVES", "inline")


# --------------------------------------------------------------------------- databases


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The PostgreSQL URL from the environment, or a skip that says why."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(
            f"PostgreSQL tests need {POSTGRES_ENV} "
            "(e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)"
        )
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as err:
        shown = make_url(url).render_as_string(hide_password=True)
        pytest.skip(f"PostgreSQL at {shown} is unreachable: {str(err).splitlines()[0]}")
    finally:
        engine.dispose()
    return url


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A URL whose search_path is a fresh, empty schema (dropped after the test)."""
    schema = f"fleetplan_test_{uuid.uuid4().hex[:12]}"
    admin = make_engine(postgres_server_url, poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(postgres_server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """An empty SQLite database file in the test's temporary directory."""
    return f"sqlite:///{tmp_path / 'fleetplan.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request: pytest.FixtureRequest) -> str:
    """An empty database on each backend (PostgreSQL skipped when unavailable)."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def db_url(empty_db_url: str) -> str:
    """A database on each backend, built by running the migrations."""
    upgrade(empty_db_url)
    return empty_db_url


@pytest.fixture
def migrated_sqlite_url(sqlite_url: str) -> str:
    """A SQLite database built by running the migrations."""
    upgrade(sqlite_url)
    return sqlite_url


# --------------------------------------------------------------------------- app


@pytest.fixture
def settings(migrated_sqlite_url: str) -> Settings:
    return Settings(database_url=migrated_sqlite_url, api_key=None)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The app on a migrated SQLite database, started (lifespan) and stopped."""
    with TestClient(create_app(settings)) as test_client:
        yield test_client
