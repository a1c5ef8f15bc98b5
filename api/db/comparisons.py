"""Comparisons: the ``comparisons`` rows and their variants' plans."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from api.db.base import utcnow
from api.db.models import ComparisonRecord, ComparisonStatus, PlanRecord


def add_comparison(session: Session, record: ComparisonRecord) -> ComparisonRecord:
    session.add(record)
    session.flush()
    return record


def set_done(session: Session, comparison_id: str, done: int) -> bool:
    """Record progress on a running comparison; False when it is gone (or no longer
    running). The caller commits."""
    result = session.execute(
        update(ComparisonRecord)
        .where(
            ComparisonRecord.id == comparison_id,
            ComparisonRecord.status == ComparisonStatus.RUNNING,
        )
        .values(done=done)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def get_comparison(session: Session, comparison_id: str) -> ComparisonRecord | None:
    return session.get(ComparisonRecord, comparison_id)


def list_comparisons(
    session: Session,
    *,
    status: ComparisonStatus | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[Sequence[ComparisonRecord], int]:
    """A page of comparisons, newest first (ties by id), and how many match."""
    stmt = select(ComparisonRecord).order_by(
        ComparisonRecord.created_at.desc(), ComparisonRecord.id
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


def mark_failed(session: Session, record: ComparisonRecord, reason: str) -> None:
    record.status = ComparisonStatus.FAILED
    record.error = reason[:4000]
    record.finished_at = utcnow()
    session.flush()
