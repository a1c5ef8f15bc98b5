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
3. :func:`run_comparison` (``api.services.comparison_runner``) solves the variants,
   storing each as it finishes (:func:`store_variant`), then the table
   (:func:`results_table`), or marks the comparison ``failed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError
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
from api.services import idempotency
from api.services.calibrations import resolver
from api.services.catalog import merged_catalog
from api.services.errors import Conflict, NotFound, find_by_uuid
from api.services.plans import summary_columns
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


def new_comparison_record(
    prepared: PreparedComparison,
    owner: str | None = None,
    lease_until: datetime | None = None,
) -> ComparisonRecord:
    """The row of a comparison about to run (unsaved; the caller adds and commits),
    leased to ``owner`` until ``lease_until`` (its first attempt) when given."""
    return ComparisonRecord(
        name=prepared.name,
        status=ComparisonStatus.RUNNING,
        spec=prepared.raw,
        variants=[
            {k: v[k] for k in ("name", "axis", "value", "request")} for v in prepared.variants
        ],
        done=0,
        total=len(prepared.variants),
        results=[None] * len(prepared.variants),
        owner=owner,
        lease_expires_at=lease_until,
        heartbeat_at=utcnow() if owner is not None else None,
        attempts=1 if owner is not None else 0,
    )


def resume_inputs(
    session: Session, record: ComparisonRecord, shipped: Catalog, settings: Settings
) -> tuple[Catalog, dict[str, Calibration]]:
    """What running a stored comparison again needs: the catalog (shipped + custom
    entries, as they are now) and the calibrations its variants name. A
    ``PlanningError`` when one of them is gone."""
    catalog = merged_catalog(session, shipped)
    find = resolver(session, settings.calibration_dir)
    calibrations: dict[str, Calibration] = {}
    for v in record.variants or []:
        name = (v.get("request") or {}).get("calibration")
        if isinstance(name, str) and name not in calibrations:
            calibrations[name] = find(name)
    return catalog, calibrations


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
    normalized = request.model_dump(mode="json")
    return PlanRecord(
        status=PlanStatus(status) if status in set(PlanStatus) else PlanStatus.ERROR,
        model_id=request.model,
        catalog_hash=str(plan.get("catalog_hash") or ""),
        request=_clean(dict(request_doc)),
        normalized_request=normalized,
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
        **summary_columns(request_doc, normalized, plan),
    )


def store_variant(
    session: Session,
    comparison_id: str,
    variant: Mapping[str, Any],
    result: Mapping[str, Any],
    caps: SolverLimits,
) -> dict[str, Any]:
    """What ``results[i]`` keeps for one finished variant: a planned one is stored as
    a plan linked to the comparison (flushed; the caller commits) and named by its
    ``plan_id``; an error is kept as it is."""
    if not result.get("ok"):
        return {k: _clean(result.get(k)) for k in ("ok", "error", "detail", "issues")}
    plan = variant_plan_record(
        variant["request"], result["plan"], caps, comparison_id, variant["name"]
    )
    session.add(plan)
    session.flush()
    return {"ok": True, "plan_id": plan.id}


def results_table(
    session: Session, record: ComparisonRecord, results: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The comparison's table from its stored outcomes (the plans read back), each
    row with its ``plan_id``."""
    plans = comparison_plans(session, record)
    full: list[dict[str, Any]] = []
    for r in results:
        stored = plans.get(str(r.get("plan_id"))) if r.get("ok") else None
        if r.get("ok") and stored is None:
            full.append({"ok": False, "detail": "its stored plan is gone"})
        elif stored is not None:
            full.append({"ok": True, "plan": stored.plan or {}})
        else:
            full.append(dict(r))
    table = comparison_table(list(record.variants), full)
    for r, row in zip(results, table, strict=True):
        row["plan_id"] = r.get("plan_id") if row.get("status") != "error" else None
    return _clean(table)


# --------------------------------------------------------------------------- reads


def _variants(record: ComparisonRecord) -> list[ComparisonVariant]:
    rows = record.table or []
    stored = record.results or []
    out = []
    for i, v in enumerate(record.variants or []):
        row: Mapping[str, Any] = rows[i] if i < len(rows) else {}
        if not row and i < len(stored) and stored[i]:  # solved, the table not built yet
            r = stored[i] or {}
            row = {"status": "planned", "plan_id": r.get("plan_id")}
            if not r.get("ok"):
                row = {"status": "error", "error": r.get("detail")}
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
    """A stored comparison (status ``running``), ready for its variants to be solved;
    ``replayed``: the one an earlier request with the same Idempotency-Key stored
    (already running or finished: not to be run again)."""

    id: str
    prepared: PreparedComparison
    catalog: Catalog
    replayed: bool = False


def replayed_comparison(
    session: Session, raw: Mapping[str, Any], idempotency_key: str | None
) -> ComparisonRecord | None:
    """The comparison an earlier ``POST /comparisons`` with this key and body stored
    (None: there was none); ``KeyReused`` for another body, :class:`Conflict` when
    it was deleted since."""
    found = idempotency.earlier(
        session, idempotency.COMPARISONS, idempotency_key, idempotency.body_hash(raw)
    )
    if found is None:
        return None
    record = repo.get_comparison(session, found)
    if record is None:
        raise Conflict(
            idempotency.HEADER,
            f"the comparison this Idempotency-Key created ({found}) was deleted",
        )
    return record


def start_comparison(
    session: Session,
    raw: Mapping[str, Any],
    spec: ComparisonSpec,
    shipped: Catalog,
    settings: Settings,
    owner: str | None = None,
    idempotency_key: str | None = None,
) -> StartedComparison:
    """Validate every variant against the shipped + custom catalog (calibrations
    resolved database first, then the YAML store), store the comparison as
    ``running`` (leased to ``owner`` for ``settings.comparison_lease_s``) with its
    ``idempotency_key``, and commit. A bad variant raises before anything is
    written."""
    catalog = merged_catalog(session, shipped)
    prepared = prepare_comparison(raw, spec, catalog, resolver(session, settings.calibration_dir))
    until = utcnow() + timedelta(seconds=settings.comparison_lease_s)
    record = new_comparison_record(prepared, owner, until if owner is not None else None)
    digest = idempotency.body_hash(raw)
    try:
        repo.add_comparison(session, record)
        idempotency.remember(session, idempotency.COMPARISONS, idempotency_key, digest, record.id)
        session.commit()
    except IntegrityError:  # a concurrent request with the same key committed first
        session.rollback()
        earlier = replayed_comparison(session, raw, idempotency_key)
        if earlier is None:
            raise
        return StartedComparison(earlier.id, prepared, catalog, replayed=True)
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


def get_comparison(
    session: Session,
    comparison_id: str,
    on_stale: Callable[[str], object] | None = None,
) -> ComparisonPublic:
    """The comparison. A running one whose lease expired (its service died) is
    handed to ``on_stale`` (the runner claims it: resumes or fails it) first."""
    record = find_comparison(session, comparison_id)
    expired = record.lease_expires_at is None or record.lease_expires_at < utcnow()
    if on_stale is not None and record.status == ComparisonStatus.RUNNING and expired:
        session.rollback()
        on_stale(comparison_id)
        record = reread_comparison(session, comparison_id)
    return comparison_public(record)


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
