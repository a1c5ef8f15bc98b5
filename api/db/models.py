"""Tables. One name per layer: ``PlanRecord`` here, ``Plan`` in the planner,
``PlanCreate``/``PlanPublic`` in the API.

Plan ids are UUID4 strings (``String(36)``), not integers: they appear in URLs and
reports, so they should not be guessable or reveal how many plans exist; they can
be made before the row is written (the planner can name a plan while solving, a
client can retry without creating duplicates); rows copied between databases
(a laptop SQLite file to a shared PostgreSQL) never collide; and the text form is
identical on SQLite and PostgreSQL, so no dialect-specific UUID type is needed.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Double,
    Enum,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from api.db.base import Base, UtcDateTime, utcnow


class PlanStatus(StrEnum):
    """Outcome of a planning run, stored as text (no database enum type, so adding a
    value needs no migration). Must match the planner's statuses."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # stopped at the time limit with an incumbent; see ``gap``
    INFEASIBLE = "infeasible"  # stored with the reasons in ``plan``
    ERROR = "error"


class ComparisonStatus(StrEnum):
    """Where a what-if comparison is: its variants being solved, all solved (the
    table is stored), or stopped by an error (``error`` says why). Stored as text."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class CatalogKind(StrEnum):
    GPUS = "gpus"
    MODELS = "models"
    WORKLOADS = "workloads"
    LINKS = "links"


def new_plan_id() -> str:
    return str(uuid.uuid4())


class PlanRecord(Base):
    """A stored plan with everything needed to reproduce it."""

    __tablename__ = "plans"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_plan_id)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now(), index=True
    )
    status: Mapped[PlanStatus] = mapped_column(
        Enum(
            PlanStatus,
            native_enum=False,
            create_constraint=False,
            length=32,
            values_callable=lambda e: [m.value for m in e],
            validate_strings=True,
        ),
        index=True,
    )
    model_id: Mapped[str] = mapped_column(String(64), index=True)
    catalog_hash: Mapped[str] = mapped_column(String(80))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    normalized_request: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    solver_options: Mapped[dict[str, Any]] = mapped_column(JSON)
    objective: Mapped[float | None] = mapped_column(Double())
    cost_usd_per_hour: Mapped[float | None] = mapped_column(Double())
    gap: Mapped[float | None] = mapped_column(Double())
    runtime_s: Mapped[float | None] = mapped_column(Double())
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    # A variant of a what-if comparison links to it (deleted with it).
    comparison_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("comparisons.id", ondelete="CASCADE"), index=True
    )
    variant_name: Mapped[str | None] = mapped_column(String(200))
    # Computed later and cached: {"sensitivity": {...}} (the first report computes it).
    report_extras: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    # Summary columns, so a list reads no document: the request's name, the fleet's GPUs.
    name: Mapped[str | None] = mapped_column(String(200))
    gpus_total: Mapped[int | None] = mapped_column(Integer)

    def __repr__(self) -> str:
        return f"PlanRecord(id={self.id!r}, status={self.status!r}, model_id={self.model_id!r})"


class CatalogEntryRecord(Base):
    """A custom catalog entry (a GPU, model, workload or link the user added)."""

    __tablename__ = "catalog_entries"
    __table_args__ = (UniqueConstraint("kind", "entry_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    entry_id: Mapped[str] = mapped_column(String(64))
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, onupdate=utcnow, server_default=func.now()
    )

    def __repr__(self) -> str:
        return f"CatalogEntryRecord(kind={self.kind!r}, entry_id={self.entry_id!r})"


class CalibrationRecord(Base):
    """A named calibration: efficiency factors fitted to measurements (``POST
    /calibrations``); ``body`` is the ``planner.calibration.Calibration`` document."""

    __tablename__ = "calibrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )
    body: Mapped[dict[str, Any]] = mapped_column(JSON)

    def __repr__(self) -> str:
        return f"CalibrationRecord(name={self.name!r})"


class ComparisonRecord(Base):
    """A what-if comparison: the document as posted, its expanded variants, progress
    while they are solved, then the table (one row per variant, with the ``plan_id``
    of the variant's plan, a ``plans`` row linked by ``comparison_id``)."""

    __tablename__ = "comparisons"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_plan_id)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now(), index=True
    )
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[ComparisonStatus] = mapped_column(
        Enum(
            ComparisonStatus,
            native_enum=False,
            create_constraint=False,
            length=16,
            values_callable=lambda e: [m.value for m in e],
            validate_strings=True,
        )
    )
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    # [{name, axis, value, request}] in table order (base first), fixed at creation.
    variants: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer)
    table: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True))
    error: Mapped[str | None] = mapped_column(Text())
    # A durable job: each variant's outcome is stored as it finishes (a planned one as
    # a plan row; ``results[i]`` is {"ok": true, "plan_id"} or the error), so a resumed
    # run skips them. The service running it holds a lease, renewed by a heartbeat;
    # once it has expired, another service may claim the comparison (``attempts``).
    results: Mapped[list[dict[str, Any] | None] | None] = mapped_column(JSON(none_as_null=True))
    owner: Mapped[str | None] = mapped_column(String(120))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), index=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    def __repr__(self) -> str:
        return f"ComparisonRecord(id={self.id!r}, status={self.status!r}, name={self.name!r})"


class JobLeaseRecord(Base):
    """Who computes a shared, expensive result right now (a plan report's sensitivity
    table): one row per job key, held by ``owner`` until ``expires_at`` (renewed while
    it works). Other service processes wait for the result instead of computing it
    again; an expired lease (its holder died) may be taken over."""

    __tablename__ = "job_leases"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    owner: Mapped[str] = mapped_column(String(120))
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())

    def __repr__(self) -> str:
        return f"JobLeaseRecord(key={self.key!r}, owner={self.owner!r})"


class IdempotencyKeyRecord(Base):
    """An ``Idempotency-Key`` a client sent with a POST: the body's hash and what the
    request created, so a retry (the answer was lost) gets the same resource back
    instead of a second one."""

    __tablename__ = "idempotency_keys"

    scope: Mapped[str] = mapped_column(String(32), primary_key=True)  # "plans", ...
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    resource_id: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )

    def __repr__(self) -> str:
        return f"IdempotencyKeyRecord(scope={self.scope!r}, key={self.key!r})"
