"""What-if comparisons to records and back: shared by the REST routes and the CLI.

A comparison is stored as a ``comparisons`` row (the document as posted, its
expanded variants with their requests, progress, then the table) and, once its
variants are solved, one ``plans`` row per variant that was planned, linked by
``comparison_id`` and ``variant_name``; each table row carries its ``plan_id``.

The flow, for ``POST /comparisons`` and ``fleetplan compare --save`` alike:

1. :func:`prepare_comparison` validates everything up front (the document, each
   variant's request, its catalog ids, the calibrations it names) and raises a
   ``PlanningError`` naming ``base.<field>`` or ``variants[<name>].<field>``;
   nothing has been written yet.
2. :func:`new_comparison_record` makes the row (status ``running``), which the
   caller commits.
3. :func:`run_comparison` (``api.services.comparison_runner``) solves the variants and
   calls :func:`store_results`, or marks the comparison ``failed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from api.db import comparisons as repo
from api.db.base import utcnow
from api.db.comparisons import comparison_plans
from api.db.models import ComparisonRecord, ComparisonStatus, PlanRecord, PlanStatus
from api.schemas.comparisons import (
    ComparisonPage,
    ComparisonPublic,
    ComparisonSummary,
    ComparisonVariant,
)
from api.services.calibrations import resolver
from api.services.catalog import merged_catalog
from api.services.errors import NotFound, find_by_uuid
from api.settings import Settings
from planner.compare import (
    ComparisonSpec,
    check_variants,
    compare,
    comparison_table,
    expand,
    parse_comparison,
)
from planner.errors import PlanningError
from planner.problem_build import parse_request
from planner.service import SolverLimits

if TYPE_CHECKING:
    from catalog.schema import Catalog
    from planner.calibration import Calibration

__all__ = ["ComparisonSpec", "ComparisonStatus", "compare", "parse_comparison"]


@dataclass
class PreparedComparison:
    """A validated comparison, ready to store and run."""

    spec: ComparisonSpec
    raw: dict[str, Any]
    variants: list[dict[str, Any]]  # [{name, axis, value, request}], base first
    calibrations: dict[str, Calibration] = field(default_factory=dict)

    @property
    def name(self) -> str | None:
        name = self.spec.name or self.spec.base.get("name")
        return name if isinstance(name, str) else None


def _prefix(index: int, name: str) -> str:
    return "base" if index == 0 else f"variants[{name}]"


def prepare_comparison(
    raw: Mapping[str, Any],
    spec: ComparisonSpec,
    catalog: Catalog,
    find_calibration: Callable[[str], Calibration] | None = None,
) -> PreparedComparison:
    """Expand ``spec`` and validate every variant (schema, catalog ids, named
    calibrations, looked up with ``find_calibration``); a ``PlanningError``
    naming the variant's field otherwise."""
    variants = expand(spec)
    check_variants(variants, catalog)
    calibrations: dict[str, Calibration] = {}
    for i, v in enumerate(variants):
        name = v["request"].get("calibration")
        if not isinstance(name, str) or name in calibrations or find_calibration is None:
            continue
        try:
            calibrations[name] = find_calibration(name)
        except PlanningError as err:
            where = f"{_prefix(i, v['name'])}.calibration"
            message = err.issues[0][1] if err.issues else err.message
            raise type(err)(f"{where}: {message}", [(where, message)]) from None
    return PreparedComparison(
        spec=spec, raw=dict(raw), variants=variants, calibrations=calibrations
    )


def new_comparison_record(prepared: PreparedComparison) -> ComparisonRecord:
    """The row of a comparison about to run (unsaved; the caller adds and commits)."""
    return ComparisonRecord(
        name=prepared.name,
        status=ComparisonStatus.RUNNING,
        spec=prepared.raw,
        variants=[
            {k: v[k] for k in ("name", "axis", "value", "request")} for v in prepared.variants
        ],
        done=0,
        total=len(prepared.variants),
    )


# --------------------------------------------------------------------------- results


def _finite(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become None (PostgreSQL's json refuses NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def variant_plan_record(
    request_doc: Mapping[str, Any],
    plan: Mapping[str, Any],
    caps: SolverLimits,
    comparison_id: str,
    variant_name: str,
) -> PlanRecord:
    """A plan row for one variant's plan JSON (as ``build_plan_record`` makes for a
    ``Plan``), linked to its comparison."""
    request = parse_request(request_doc)
    solver = plan.get("solver") or {}
    status = plan.get("status")
    return PlanRecord(
        status=PlanStatus(status) if status in set(PlanStatus) else PlanStatus.ERROR,
        model_id=request.model,
        catalog_hash=str(plan.get("catalog_hash") or ""),
        request=_clean(dict(request_doc)),
        normalized_request=request.model_dump(mode="json"),
        solver_options={
            "time_limit_s": solver.get("time_limit_s"),
            "rel_gap": solver.get("rel_gap"),
            "solver": solver.get("solver"),
            "caps": {"time_limit_s": caps.time_limit_s, "rel_gap": caps.rel_gap},
        },
        objective=_finite(plan.get("objective_value")),
        cost_usd_per_hour=_finite(plan.get("cost_usd_per_hour")),
        gap=_finite(solver.get("gap")),
        runtime_s=_finite(solver.get("runtime_s")),
        plan=_clean(dict(plan)),
        comparison_id=comparison_id,
        variant_name=variant_name,
    )


def store_results(
    session: Session,
    record: ComparisonRecord,
    results: Sequence[Mapping[str, Any]],
    caps: SolverLimits,
) -> None:
    """Store each planned variant as a plan linked to ``record``, then the table
    (each row with its ``plan_id``), and mark the comparison done. Flushes; the
    caller commits."""
    variants = list(record.variants)
    table = comparison_table(variants, [dict(r) for r in results])
    for v, r, row in zip(variants, results, table, strict=True):
        row["plan_id"] = None
        if r.get("ok"):
            plan = variant_plan_record(v["request"], r["plan"], caps, record.id, v["name"])
            session.add(plan)
            session.flush()
            row["plan_id"] = plan.id
    record.table = _clean(table)
    record.status = ComparisonStatus.DONE
    record.done = len(variants)
    record.finished_at = utcnow()
    record.error = None
    session.flush()


# --------------------------------------------------------------------------- reads


def _variants(record: ComparisonRecord) -> list[ComparisonVariant]:
    rows = record.table or []
    out = []
    for i, v in enumerate(record.variants or []):
        row: Mapping[str, Any] = rows[i] if i < len(rows) else {}
        if row:
            status = str(row.get("status") or "error")
        elif record.status == ComparisonStatus.RUNNING:
            status = "pending"
        else:
            status = "not run"
        out.append(
            ComparisonVariant(
                name=str(v.get("name")),
                axis=v.get("axis"),
                value=v.get("value"),
                plan_id=row.get("plan_id"),
                status=status,
                cost_usd_per_hour=_finite(row.get("cost_usd_per_hour")),
                delta_usd_per_hour=_finite(row.get("delta_usd_per_hour")),
                delta_pct=_finite(row.get("delta_pct")),
                error=row.get("error"),
            )
        )
    return out


def _summary_fields(record: ComparisonRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "status": record.status,
        "done": record.done,
        "total": record.total,
        "created_at": record.created_at,
        "finished_at": record.finished_at,
        "error": record.error,
        "location": f"/comparisons/{record.id}",
    }


def comparison_summary(record: ComparisonRecord) -> ComparisonSummary:
    return ComparisonSummary(**_summary_fields(record))


def comparison_public(record: ComparisonRecord) -> ComparisonPublic:
    return ComparisonPublic(
        **_summary_fields(record),
        variants=_variants(record),
        table=record.table if record.status == ComparisonStatus.DONE else None,
        spec=record.spec,
    )


def comparison_report_input(session: Session, record: ComparisonRecord) -> dict[str, Any]:
    """What ``planner.report.render_comparison_report`` takes: the comparison as
    ``planner.compare.compare`` returns it, with its id and creation time."""
    plans = comparison_plans(session, record)
    rows = record.table or []
    plan_docs: list[dict[str, Any] | None] = []
    for i in range(len(record.variants or [])):
        plan_id = rows[i].get("plan_id") if i < len(rows) else None
        stored = plans.get(plan_id) if plan_id else None
        plan_docs.append(stored.plan if stored is not None else None)
    spec = record.spec or {}
    return {
        "id": record.id,
        "created_at": record.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        "name": record.name,
        "base": spec.get("base") or {},
        "variants": list(record.variants or []),
        "table": list(rows),
        "plans": plan_docs,
    }


# --------------------------------------------------------------------------- front-end steps


@dataclass
class StartedComparison:
    """A stored comparison (status ``running``), ready for its variants to be solved."""

    id: str
    prepared: PreparedComparison
    catalog: Catalog


def start_comparison(
    session: Session,
    raw: Mapping[str, Any],
    spec: ComparisonSpec,
    shipped: Catalog,
    settings: Settings,
) -> StartedComparison:
    """Validate every variant against the shipped + custom catalog (calibrations
    resolved database first, then the YAML store), store the comparison as
    ``running`` and commit. A bad variant raises before anything is written."""
    catalog = merged_catalog(session, shipped)
    prepared = prepare_comparison(raw, spec, catalog, resolver(session, settings.calibration_dir))
    record = new_comparison_record(prepared)
    repo.add_comparison(session, record)
    session.commit()
    return StartedComparison(record.id, prepared, catalog)


def find_comparison(session: Session, comparison_id: str) -> ComparisonRecord:
    """The comparison, or :class:`NotFound` (only well-formed UUIDs are looked up)."""
    return find_by_uuid(lambda i: repo.get_comparison(session, i), comparison_id, "comparison")


def reread_comparison(session: Session, comparison_id: str) -> ComparisonRecord:
    """The comparison as stored now (after a run): :class:`NotFound` when it was
    deleted meanwhile."""
    session.expire_all()
    record = repo.get_comparison(session, comparison_id)
    if record is None:
        raise NotFound("id", f"comparison {comparison_id} was deleted while it ran")
    return record


def get_comparison(session: Session, comparison_id: str) -> ComparisonPublic:
    return comparison_public(find_comparison(session, comparison_id))


def list_comparisons(
    session: Session,
    *,
    status: ComparisonStatus | None = None,
    limit: int = 50,
    offset: int = 0,
) -> ComparisonPage:
    items, total = repo.list_comparisons(session, status=status, limit=limit, offset=offset)
    return ComparisonPage(
        items=[comparison_summary(r) for r in items], total=total, limit=limit, offset=offset
    )


def delete_comparison(session: Session, comparison_id: str) -> None:
    """Delete the comparison and its variants' plans, and commit."""
    repo.delete_comparison(session, find_comparison(session, comparison_id))
    session.commit()
