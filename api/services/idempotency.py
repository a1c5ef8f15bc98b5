"""``Idempotency-Key`` on ``POST /plans`` and ``POST /comparisons``.

A client that did not get the answer to a POST (a timeout, a crash after the
commit) may send it again with the same key: it gets what the first request
created (the same plan or comparison, no second row). The same key with another
body is refused (:class:`KeyReused`, 422): the key names one request. Keys are
stored with the resource, in its transaction, so a request that failed leaves
no key behind; of two concurrent requests with one key, the second to commit
finds the first's key and answers with its resource.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy.orm import Session

from api.db import idempotency as repo
from api.services.errors import KeyReused

PLANS = "plans"
COMPARISONS = "comparisons"
HEADER = "Idempotency-Key"

__all__ = ["COMPARISONS", "HEADER", "PLANS", "KeyReused", "body_hash", "earlier", "remember"]


def body_hash(body: Any) -> str:
    """SHA-256 of the body as canonical JSON (keys sorted, no spaces)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def earlier(session: Session, scope: str, key: str | None, request_hash: str) -> str | None:
    """The id of what an earlier request with ``key`` created (None: no such
    request); :class:`KeyReused` when that request had another body."""
    if key is None:
        return None
    found = repo.get_key(session, scope, key)
    if found is None:
        return None
    if found.request_hash != request_hash:
        raise KeyReused(
            HEADER,
            f"this Idempotency-Key was used for another request body (it created "
            f"{scope[:-1]} {found.resource_id}); send a new key for a new request",
        )
    return found.resource_id


def remember(
    session: Session, scope: str, key: str | None, request_hash: str, resource_id: str
) -> None:
    """Store the key with the resource (flushed; the caller commits both)."""
    if key is not None:
        repo.add_key(session, scope, key, request_hash, resource_id)
