"""Idempotency keys (``idempotency_keys``): the caller adds the key in the same
transaction as the resource it created, and commits."""

from __future__ import annotations

from sqlalchemy.orm import Session

from api.db.models import IdempotencyKeyRecord


def get_key(session: Session, scope: str, key: str) -> IdempotencyKeyRecord | None:
    return session.get(IdempotencyKeyRecord, (scope, key), populate_existing=True)


def add_key(session: Session, scope: str, key: str, request_hash: str, resource_id: str) -> None:
    session.add(
        IdempotencyKeyRecord(
            scope=scope, key=key, request_hash=request_hash, resource_id=resource_id
        )
    )
    session.flush()
