"""Comparisons: the ``comparisons`` rows and their variants' plans."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session, load_only

from api.db.base import utcnow
from api.db.models import ComparisonRecord, ComparisonStatus, PlanRecord


def add_comparison(session: Session, record: ComparisonRecord) -> ComparisonRecord:
    session.add(record)
    session.flush()
    return record


def get_comparison(session: Session, comparison_id: str) -> ComparisonRecord | None:
    return session.get(ComparisonRecord, comparison_id)


SUMMARY_COLUMNS = (
    ComparisonRecord.id,
    ComparisonRecord.name,
    ComparisonRecord.status,
    ComparisonRecord.done,
    ComparisonRecord.total,
    ComparisonRecord.created_at,
    ComparisonRecord.finished_at,
    ComparisonRecord.error,
)


def list_comparisons(
    session: Session,
    *,
    status: ComparisonStatus | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[Sequence[ComparisonRecord], int]:
    """A page of comparisons, newest first (ties by id), and how many match."""
    stmt = (
        select(ComparisonRecord)
        .options(load_only(*SUMMARY_COLUMNS))  # no documents: spec, variants, table
        .order_by(ComparisonRecord.created_at.desc(), ComparisonRecord.id)
    )
    count = select(func.count()).select_from(ComparisonRecord)
    if status is not None:
        stmt = stmt.where(ComparisonRecord.status == status)
        count = count.where(ComparisonRecord.status == status)
    items = session.scalars(stmt.limit(limit).offset(offset)).all()
    return items, int(session.scalar(count) or 0)


def delete_comparison(session: Session, record: ComparisonRecord) -> None:
    """Delete the comparison and its variants' plans (flushes; the caller commits)."""
    session.execute(delete(PlanRecord).where(PlanRecord.comparison_id == record.id))
    session.delete(record)
    session.flush()


def comparison_plans(session: Session, record: ComparisonRecord) -> dict[str, PlanRecord]:
    """The comparison's stored plans, by id."""
    stmt = select(PlanRecord).where(PlanRecord.comparison_id == record.id)
    return {p.id: p for p in session.scalars(stmt)}


# --------------------------------------------------------------------------- leases
#
# Every write a running comparison makes is guarded by ``owner`` (and status
# ``running``): a service that lost its lease (another claimed the comparison after
# it expired) or whose comparison was deleted changes nothing. The caller commits.


def _running(comparison_id: str, owner: str) -> Any:
    return (
        ComparisonRecord.id == comparison_id,
        ComparisonRecord.owner == owner,
        ComparisonRecord.status == ComparisonStatus.RUNNING,
    )


def _expired(now: datetime) -> Any:
    return or_(ComparisonRecord.lease_expires_at.is_(None), ComparisonRecord.lease_expires_at < now)


def stale_comparisons(session: Session, now: datetime, limit: int = 20) -> list[str]:
    """Ids of running comparisons whose lease expired (oldest first)."""
    stmt = (
        select(ComparisonRecord.id)
        .where(ComparisonRecord.status == ComparisonStatus.RUNNING, _expired(now))
        .order_by(ComparisonRecord.created_at, ComparisonRecord.id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def claim(session: Session, comparison_id: str, owner: str, now: datetime, until: datetime) -> bool:
    """Take the running comparison over if its lease expired (one statement, so two
    services cannot both win); counts an attempt. False when another holds it."""
    result = session.execute(
        update(ComparisonRecord)
        .where(
            ComparisonRecord.id == comparison_id,
            ComparisonRecord.status == ComparisonStatus.RUNNING,
            _expired(now),
        )
        .values(
            owner=owner,
            lease_expires_at=until,
            heartbeat_at=now,
            attempts=ComparisonRecord.attempts + 1,
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def _update_held(session: Session, ids: Collection[str], owner: str, **values: Any) -> int:
    """Set ``values`` on the running comparisons of ``ids`` whose lease ``owner`` holds;
    how many it holds."""
    if not ids:
        return 0
    result = session.execute(
        update(ComparisonRecord)
        .where(
            ComparisonRecord.id.in_(list(ids)),
            ComparisonRecord.owner == owner,
            ComparisonRecord.status == ComparisonStatus.RUNNING,
        )
        .values(**values)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def renew(
    session: Session, ids: Collection[str], owner: str, now: datetime, until: datetime
) -> int:
    """Extend the leases ``owner`` holds on ``ids``; how many it still holds."""
    return _update_held(session, ids, owner, lease_expires_at=until, heartbeat_at=now)


def release(session: Session, ids: Collection[str], owner: str, now: datetime) -> int:
    """Let the leases on ``ids`` expire now, so another service resumes them."""
    return _update_held(session, ids, owner, lease_expires_at=now)


def record_result(
    session: Session,
    comparison_id: str,
    owner: str,
    results: list[dict[str, Any] | None],
    now: datetime,
) -> bool:
    """Store the outcomes so far (and ``done``, their count); False when ``owner``
    no longer runs the comparison (deleted, failed, or claimed by another)."""
    done = sum(r is not None for r in results)
    result = session.execute(
        update(ComparisonRecord)
        .where(*_running(comparison_id, owner))
        .values(results=list(results), done=done, heartbeat_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def finish(
    session: Session,
    comparison_id: str,
    owner: str,
    table: list[dict[str, Any]],
    now: datetime,
) -> bool:
    """Mark the comparison done with its table; False when ``owner`` no longer runs it."""
    result = session.execute(
        update(ComparisonRecord)
        .where(*_running(comparison_id, owner))
        .values(
            status=ComparisonStatus.DONE,
            table=table,
            done=len(table),
            finished_at=now,
            error=None,
            lease_expires_at=None,
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def fail(session: Session, comparison_id: str, reason: str, owner: str | None = None) -> bool:
    """Mark the running comparison failed (only if ``owner`` holds it, when given)."""
    conditions = [
        ComparisonRecord.id == comparison_id,
        ComparisonRecord.status == ComparisonStatus.RUNNING,
    ]
    if owner is not None:
        conditions.append(ComparisonRecord.owner == owner)
    result = session.execute(
        update(ComparisonRecord)
        .where(*conditions)
        .values(
            status=ComparisonStatus.FAILED,
            error=reason[:4000],
            finished_at=utcnow(),
            lease_expires_at=None,
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
