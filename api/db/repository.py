"""Small read/write functions over the tables. They add, flush and query; the
caller (a route or CLI command) owns the transaction and commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Text, and_, bindparam, cast, func, or_, select
from sqlalchemy.orm import Session, load_only

from api.db.models import CatalogEntryRecord, PlanRecord, PlanStatus

# --------------------------------------------------------------------------- catalog entries


def list_catalog_entries(session: Session, kind: str | None = None) -> Sequence[CatalogEntryRecord]:
    """Custom entries, of one ``kind`` or all, ordered by kind then id."""
    stmt = select(CatalogEntryRecord).order_by(CatalogEntryRecord.kind, CatalogEntryRecord.entry_id)
    if kind is not None:
        stmt = stmt.where(CatalogEntryRecord.kind == kind)
    return session.scalars(stmt).all()


def get_catalog_entry(session: Session, kind: str, entry_id: str) -> CatalogEntryRecord | None:
    stmt = select(CatalogEntryRecord).where(
        CatalogEntryRecord.kind == kind, CatalogEntryRecord.entry_id == entry_id
    )
    return session.scalars(stmt).one_or_none()


def put_catalog_entry(
    session: Session, kind: str, entry_id: str, body: Mapping[str, Any]
) -> CatalogEntryRecord:
    """Insert or replace the entry ``(kind, entry_id)``; validation is the caller's job."""
    record = get_catalog_entry(session, kind, entry_id)
    if record is None:
        record = CatalogEntryRecord(kind=kind, entry_id=entry_id, body=dict(body))
        session.add(record)
    else:
        record.body = dict(body)
    session.flush()
    return record


def delete_catalog_entry(session: Session, kind: str, entry_id: str) -> bool:
    """Delete the entry; False when there was none."""
    record = get_catalog_entry(session, kind, entry_id)
    if record is None:
        return False
    session.delete(record)
    session.flush()
    return True


# --------------------------------------------------------------------------- plans


def add_plan(session: Session, record: PlanRecord) -> PlanRecord:
    """Stage a new plan and flush it, so its id and defaults are set."""
    session.add(record)
    session.flush()
    return record


def get_plan(session: Session, plan_id: str) -> PlanRecord | None:
    return session.get(PlanRecord, plan_id)


@dataclass(frozen=True)
class PlanFilter:
    """What a plan list keeps: ``model_id`` and ``status`` equal; ``search`` a part of
    the name (any case, ``%`` and ``_`` literal) or the start of the id; ``variants``
    False leaves out the plans of comparisons' variants."""

    model_id: str | None = None
    status: PlanStatus | None = None
    search: str | None = None
    variants: bool = True


def _plan_filters(f: PlanFilter) -> list[ColumnElement[bool]]:
    model_id, status = f.model_id, f.status
    out: list[ColumnElement[bool]] = []
    if f.search:
        out.append(
            or_(
                PlanRecord.name.icontains(f.search, autoescape=True),
                PlanRecord.id.startswith(f.search.lower(), autoescape=True),
            )
        )
    if not f.variants:
        out.append(PlanRecord.comparison_id.is_(None))
    if model_id is not None:
        out.append(PlanRecord.model_id == model_id)
    if status is not None:
        out.append(PlanRecord.status == status)
    return out


PLAN_SUMMARY_COLUMNS = (
    PlanRecord.id,
    PlanRecord.created_at,
    PlanRecord.status,
    PlanRecord.model_id,
    PlanRecord.name,
    PlanRecord.catalog_hash,
    PlanRecord.objective,
    PlanRecord.cost_usd_per_hour,
    PlanRecord.gpus_total,
    PlanRecord.gap,
    PlanRecord.runtime_s,
    PlanRecord.comparison_id,
    PlanRecord.variant_name,
)
"""What a list shows (``PlanSummary``): columns only, no JSON document."""

#: The documents of ``GET /plans/{id}``, as the JSON text stored.
PLAN_DOCUMENTS = ("request", "normalized_request", "solver_options", "plan")


_PLAN_TEXT = select(
    *PLAN_SUMMARY_COLUMNS,
    *(cast(getattr(PlanRecord, name), Text).label(f"{name}_text") for name in PLAN_DOCUMENTS),
).where(PlanRecord.id == bindparam("plan_id"))


def get_plan_text(session: Session, plan_id: str) -> Any:
    """The plan's summary columns (by attribute name) and its documents as the JSON
    text stored (``<document>_text``: never parsed, ``GET /plans/{id}`` sends them as
    they are), or None. One prepared statement (cached compilation)."""
    return session.execute(_PLAN_TEXT, {"plan_id": plan_id}).one_or_none()


def list_plans(
    session: Session,
    *,
    where: PlanFilter = PlanFilter(),
    limit: int = 50,
    offset: int = 0,
    after: tuple[datetime, str] | None = None,
) -> Sequence[PlanRecord]:
    """Plans, newest first (ties by id), optionally filtered (:class:`PlanFilter`).

    ``after`` is a keyset cursor, the ``(created_at, id)`` of the last plan of the
    previous page: the page starts right after it, whatever was added meanwhile.
    """
    stmt = (
        select(PlanRecord)
        .options(load_only(*PLAN_SUMMARY_COLUMNS))  # no documents
        .order_by(PlanRecord.created_at.desc(), PlanRecord.id)
    )
    conditions = _plan_filters(where)
    if after is not None:
        created_at, plan_id = after
        conditions.append(
            or_(
                PlanRecord.created_at < created_at,
                and_(PlanRecord.created_at == created_at, PlanRecord.id > plan_id),
            )
        )
    if conditions:
        stmt = stmt.where(*conditions)
    return session.scalars(stmt.limit(limit).offset(offset)).all()


def count_plans(session: Session, *, where: PlanFilter = PlanFilter()) -> int:
    """How many plans match the filters."""
    stmt = select(func.count()).select_from(PlanRecord)
    conditions = _plan_filters(where)
    if conditions:
        stmt = stmt.where(*conditions)
    return int(session.scalar(stmt) or 0)


def delete_plan(session: Session, plan_id: str) -> bool:
    """Delete the plan; False when there was none."""
    record = get_plan(session, plan_id)
    if record is None:
        return False
    session.delete(record)
    session.flush()
    return True
