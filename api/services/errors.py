"""What a service says when a request cannot be carried out, whatever the front end.

The routes turn these into HTTP answers (``api.errors``: 404, 409), the CLI into
one line on stderr (``api.cli``: exit status 2, or the one the CLI command gives).
Bad input stays a ``PlanningError``/``CatalogError`` (both front ends already
know them).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def error_reference() -> str:
    """A short reference for a server-side failure: the client sees it, the server log
    has the details under it (never SQL text, parameters or a traceback in an answer)."""
    return uuid.uuid4().hex[:12]


class ServiceError(Exception):
    """``field`` names what did not fit (an id, a name); ``issues`` the details."""

    code = "error"

    def __init__(self, field: str, detail: str, issues: Sequence[tuple[str, str]] = ()):
        super().__init__(detail)
        self.field = field
        self.detail = detail
        self.issues = list(issues) or [(field, detail)]


class NotFound(ServiceError):
    """Nothing stored under that id or name."""

    code = "not_found"


class Conflict(ServiceError):
    """The request contradicts what is stored (a name in use, a read-only entry,
    a comparison still running...)."""

    code = "conflict"


class KeyReused(ServiceError):
    """An ``Idempotency-Key`` sent before with another body (HTTP 422)."""

    code = "idempotency_key_reused"


class Busy(ServiceError):
    """Too much work is queued to take this request now: retry after
    ``retry_after_s`` seconds (HTTP 429 with Retry-After)."""

    code = "busy"

    def __init__(self, field: str, detail: str, retry_after_s: int):
        super().__init__(field, detail)
        self.retry_after_s = retry_after_s


class DatabaseNotReady(ServiceError):
    """The database is missing or not migrated to the newest revision."""

    code = "database"


def find_by_uuid(lookup: Callable[[str], T | None], ident: str, what: str) -> T:
    """``lookup(ident)``, or :class:`NotFound` naming ``id``; only well-formed UUIDs
    are looked up (anything else cannot be stored)."""
    detail = f"no {what} with id {ident[:80]!r}"
    try:
        uuid.UUID(ident)
    except ValueError:
        raise NotFound("id", detail) from None
    found = lookup(ident)
    if found is None:
        raise NotFound("id", detail)
    return found
