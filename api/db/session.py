"""Engines and sessions for SQLite (default) and PostgreSQL (psycopg 3)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

SQLITE_BUSY_TIMEOUT_MS = 5000
PG_CONNECT_TIMEOUT_S = 5


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; ``postgresql://`` and ``postgres://`` use the psycopg 3 driver."""
    parsed = make_url(url) if isinstance(url, str) else url
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")  # in-memory databases keep "memory"
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def make_engine(url: str | URL, **kwargs: Any) -> Engine:
    """An engine for ``url``.

    SQLite: usable from the server's worker threads (``check_same_thread=False``),
    WAL journal and foreign keys on; ``sqlite://`` (in memory) shares one connection.
    PostgreSQL: psycopg 3, a connect timeout and pre-ping so a restarted server is
    noticed instead of failing the next request.
    """
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        connect_args = {"check_same_thread": False, **kwargs.pop("connect_args", {})}
        if parsed.database in (None, "", ":memory:"):
            kwargs.setdefault("poolclass", StaticPool)
        engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if parsed.get_backend_name() == "postgresql":
        connect_args = {"connect_timeout": PG_CONNECT_TIMEOUT_S, **kwargs.pop("connect_args", {})}
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(parsed, connect_args=connect_args, **kwargs)
    return create_engine(parsed, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded attributes after commit (responses read them)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


def ping(engine: Engine) -> None:
    """One round trip to the database (raises SQLAlchemyError when it does not answer)."""
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
