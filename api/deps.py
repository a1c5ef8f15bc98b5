"""Request dependencies: settings, catalog, database session, write access."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import secrets
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session

from api.errors import ApiError
from api.settings import Settings
from catalog.schema import Catalog

T = TypeVar("T")


async def run_heavy(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run CPU-heavy ``fn`` (planning, a report, a simulation) on the app's work
    threads (``FLEETPLAN_WORK_THREADS``): never on the event loop, and never in the
    threadpool that serves reads and ``/health``, so those keep answering."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(request.app.state.heavy, call)


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_catalog(request: Request) -> Catalog:
    return request.app.state.catalog


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; the route commits what it wrote (nothing is
    committed implicitly, and an exception rolls back on close)."""
    with request.app.state.sessionmaker() as session:
        yield session


def require_api_key(
    settings: Annotated[Settings, Depends(get_settings)],
    x_api_key: Annotated[str | None, Header(alias="X-API-Key")] = None,
) -> None:
    """Write routes depend on this. With no ``FLEETPLAN_API_KEY`` configured, anyone
    may write (a local tool); with one, the request must present it."""
    if settings.api_key is None:
        return
    expected = settings.api_key.get_secret_value()
    if x_api_key is None:
        raise ApiError(
            401,
            "unauthorized",
            "this request needs an API key in the X-API-Key header",
            [("X-API-Key", "missing")],
            headers={"WWW-Authenticate": "X-API-Key"},
        )
    if not secrets.compare_digest(x_api_key.encode(), expected.encode()):
        raise ApiError(
            401,
            "unauthorized",
            "the API key in X-API-Key is not valid",
            [("X-API-Key", "invalid")],
            headers={"WWW-Authenticate": "X-API-Key"},
        )


SettingsDep = Annotated[Settings, Depends(get_settings)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
SessionDep = Annotated[Session, Depends(get_session)]
WriteAccess = Depends(require_api_key)
"""Use as ``@router.post(..., dependencies=[WriteAccess])`` on every write route."""


async def posted_json(request: Request) -> Any:
    """The body as posted (parsed strictly, once, for the typed parameter too). None
    when there is no usable body: the typed parameter then reports the error."""
    if not await request.body():
        return None
    try:
        return await request.json()
    except ValueError:
        return None


PostedJson = Annotated[Any, Depends(posted_json)]
"""The raw JSON body, stored beside the typed one (``POST /plans``, ``/comparisons``)."""


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=r"^[!-~]+$",
        description="Any printable ASCII string (no spaces, at most 200): a retry with the "
        "same key and body returns what the first request created.",
    ),
]
"""The ``Idempotency-Key`` header of ``POST /plans`` and ``POST /comparisons``."""
