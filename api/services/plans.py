"""Plans: create one (plan and store it), read, list, delete, and re-simulate a
stored one. ``POST /plans`` and ``fleetplan plan [--save]`` both come here.

A stored plan keeps what is needed to reproduce it: the request as posted, the
request with defaults filled in, the catalog hash (shipped + custom entries), the
solver options in force (the request's, capped by the server's settings), the
status, objective, gap and runtime of the main solve, and the plan document.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.db import repository as repo
from api.db.models import PlanRecord, PlanStatus
from api.schemas import PlanPublic, PlanSummary
from api.services import idempotency
from api.services.calibrations import calibrated, preload_calibration
from api.services.catalog import merged_catalog
from api.services.errors import Conflict, NotFound, find_by_uuid
from api.settings import Settings
from catalog.schema import Catalog
from planner.plan import Plan
from planner.problem_build import parse_request
from planner.request import PlanRequest
from planner.service import SolverLimits, make_plan
from planner.simulate import simulate_plan
from planner.simulate.results import SimulationResult
from planner.simulate.runner import DEFAULT_REQUESTS, MAX_REQUESTS
from solver.problem import has_solution

__all__ = ["DEFAULT_REQUESTS", "MAX_REQUESTS", "PlanStatus", "parse_request"]


def solver_caps(settings: Settings) -> SolverLimits:
    """The server's limits: a request may ask for a shorter time, never a longer one."""
    return SolverLimits(
        time_limit_s=settings.solver_time_limit_s,
        rel_gap=settings.solver_gap,
        screening_time_limit_s=settings.screening_time_limit_s,
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def build_plan_record(
    raw: Mapping[str, Any], request: PlanRequest, plan: Plan, caps: SolverLimits
) -> PlanRecord:
    """A new (unsaved) record for ``plan``, made from ``request`` (posted as ``raw``);
    its document is the plan's JSON, ``assumed_notes`` included (the lines the reports
    print under "Assumed", :mod:`planner.plan.notes`), for clients that show the plan
    without a report (the web page)."""
    doc = plan.to_json_dict()
    normalized = request.model_dump(mode="json")
    return PlanRecord(
        status=PlanStatus(plan.status.value),
        model_id=request.model,
        catalog_hash=plan.catalog_hash,
        request=dict(raw),
        normalized_request=normalized,
        solver_options={
            "time_limit_s": plan.solver.time_limit_s,
            "rel_gap": plan.solver.rel_gap,
            "solver": plan.solver.solver,
            "caps": {"time_limit_s": caps.time_limit_s, "rel_gap": caps.rel_gap},
        },
        objective=_finite(plan.objective_value),
        cost_usd_per_hour=_finite(plan.cost_usd_per_hour),
        gap=_finite(plan.solver.gap),
        runtime_s=_finite(plan.solver.runtime_s),
        plan=doc,
        **summary_columns(raw, normalized, doc),
    )


def summary_columns(
    request: Mapping[str, Any] | None,
    normalized: Mapping[str, Any] | None,
    plan: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The plan's ``name`` and ``gpus_total`` columns, from its documents (stored
    beside them so a list reads no document)."""
    name = (normalized or {}).get("name") or (request or {}).get("name")
    gpus = (plan or {}).get("gpus_total")
    return {
        "name": name[:200] if isinstance(name, str) else None,
        "gpus_total": gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
    }


def _summary_fields(record: Any) -> dict[str, Any]:
    """The summary of a ``PlanRecord``, or of a row with its summary columns."""
    return {
        "id": record.id,
        "created_at": record.created_at,
        "status": record.status,
        "model": record.model_id,
        "name": record.name,
        "catalog_hash": record.catalog_hash,
        "objective": _finite(record.objective),
        "cost_usd_per_hour": _finite(record.cost_usd_per_hour),
        "gpus_total": record.gpus_total,
        "gap": _finite(record.gap),
        "runtime_s": _finite(record.runtime_s),
        "comparison_id": getattr(record, "comparison_id", None),
        "variant_name": getattr(record, "variant_name", None),
    }


def plan_summary(record: PlanRecord) -> PlanSummary:
    return PlanSummary(**_summary_fields(record))


def plan_public(record: PlanRecord) -> PlanPublic:
    return PlanPublic(
        **_summary_fields(record),
        request=record.request,
        normalized_request=record.normalized_request,
        solver_options=record.solver_options,
        plan=record.plan,
    )


# --------------------------------------------------------------------------- cursors


class BadCursor(ValueError):
    pass


def encode_cursor(record: PlanRecord) -> str:
    """An opaque keyset cursor: the (created_at, id) of the last plan of a page."""
    blob = json.dumps([record.created_at.isoformat(), record.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(blob.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, plan_id = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        when = datetime.fromisoformat(created)
        if when.tzinfo is None or not isinstance(plan_id, str):
            raise ValueError("bad cursor")
        return when, plan_id
    except (ValueError, TypeError, UnicodeError, binascii.Error):
        raise BadCursor("not a cursor returned by GET /plans") from None


# --------------------------------------------------------------------------- planning


def plan_request(
    request: PlanRequest,
    catalog: Catalog,
    settings: Settings,
    *,
    session: Session | None = None,
    alternatives: bool | str = True,
    verify: bool | None = None,
    corrections: Any = None,
) -> Plan:
    """Plan ``request`` against ``catalog`` within the settings' solver caps; its
    calibration is resolved now (database first with a ``session``, then the YAML
    store) and, with a session, its read is ended before solving. ``alternatives``
    and ``corrections`` as :func:`planner.service.make_plan` takes them."""
    calibrations = preload_calibration(session, request.calibration, settings.calibration_dir)
    if session is not None:
        session.rollback()  # end the read: no connection is held while solving
    return make_plan(
        request,
        catalog,
        solver_caps(settings),
        alternatives=alternatives,
        verify=verify,
        verify_default=settings.verify_default,
        calibrations=calibrations,
        corrections=corrections,
    )


@dataclass
class CreatedPlan:
    plan: Plan
    record: PlanRecord
    replayed: bool = False  # the record an earlier request with the same key made

    @property
    def public(self) -> PlanPublic:
        return plan_public(self.record)


def _keyed_plan(session: Session, plan_id: str) -> PlanRecord:
    try:
        return find_plan(session, plan_id)
    except NotFound:
        raise Conflict(
            idempotency.HEADER, f"the plan this Idempotency-Key created ({plan_id}) was deleted"
        ) from None


def replayed_plan(
    session: Session, raw: Mapping[str, Any], idempotency_key: str | None
) -> PlanRecord | None:
    """The plan an earlier ``POST /plans`` with this key and body stored (None: there
    was none); :class:`~api.services.idempotency.KeyReused` for another body."""
    found = idempotency.earlier(
        session, idempotency.PLANS, idempotency_key, idempotency.body_hash(raw)
    )
    return _keyed_plan(session, found) if found is not None else None


def create_plan(
    session: Session,
    raw: Mapping[str, Any],
    request: PlanRequest,
    shipped: Catalog,
    settings: Settings,
    idempotency_key: str | None = None,
    alternatives: str = "inline",
) -> CreatedPlan:
    """Plan ``request`` (posted as ``raw``) against the shipped catalog plus the
    database's custom entries, store the plan (infeasible ones too) and commit.
    Any failure before the commit writes nothing. With ``idempotency_key`` the key
    is stored with the plan; when a concurrent request with that key committed
    first, its plan is returned (``replayed``) and this one is not stored.
    ``alternatives``: ``inline`` solves them with the plan; otherwise they are stored
    ``pending`` and the plan keeps its solved model (``api.services.alternatives``)."""
    catalog = merged_catalog(session, shipped)
    plan = plan_request(
        request,
        catalog,
        settings,
        session=session,
        alternatives=True if alternatives == "inline" else "deferred",
    )
    record = build_plan_record(raw, request, plan, solver_caps(settings))
    digest = idempotency.body_hash(raw)
    try:
        repo.add_plan(session, record)
        idempotency.remember(session, idempotency.PLANS, idempotency_key, digest, record.id)
        session.commit()
    except IntegrityError:
        session.rollback()
        found = idempotency.earlier(session, idempotency.PLANS, idempotency_key, digest)
        if found is None:
            raise
        return CreatedPlan(plan, _keyed_plan(session, found), replayed=True)
    return CreatedPlan(plan, record)


# --------------------------------------------------------------------------- reads


def find_plan(session: Session, plan_id: str) -> PlanRecord:
    """The stored plan, or :class:`NotFound` (only well-formed UUIDs are looked up)."""
    return find_by_uuid(lambda i: repo.get_plan(session, i), plan_id, "plan")


def get_plan(session: Session, plan_id: str) -> PlanPublic:
    return plan_public(find_plan(session, plan_id))


def read_plan_json(sessions: Callable[[], Session], plan_id: str) -> bytes:
    """:func:`get_plan_json` in a session of its own (one call, one thread hop)."""
    with sessions() as session:
        return get_plan_json(session, plan_id)


def get_plan_json(session: Session, plan_id: str) -> bytes:
    """``PlanPublic`` of the stored plan as JSON bytes, its documents copied as
    stored rather than parsed and serialized again (``GET /plans/{id}`` at speed;
    the same object as :func:`get_plan`). :class:`NotFound` as :func:`find_plan`."""
    row = find_by_uuid(lambda i: repo.get_plan_text(session, i), plan_id, "plan")
    head = PlanSummary(**_summary_fields(row)).model_dump_json()
    parts = [head[:-1]]
    for name in repo.PLAN_DOCUMENTS:
        text = getattr(row, f"{name}_text")
        parts.append(f',"{name}":{text if text is not None else "null"}')
    parts.append("}")
    return "".join(parts).encode()


@dataclass
class PlanPageResult:
    items: list[PlanSummary]
    total: int
    next_cursor: str | None


def list_plans(
    session: Session,
    *,
    model: str | None = None,
    status: PlanStatus | None = None,
    search: str | None = None,
    variants: bool = True,
    limit: int = 50,
    offset: int = 0,
    cursor: str | None = None,
) -> PlanPageResult:
    """Summaries of stored plans, newest first, with the total matching the filters
    (:class:`api.db.repository.PlanFilter`); paged by ``offset`` or by ``cursor``
    (:class:`BadCursor` when it is not one)."""
    after = decode_cursor(cursor) if cursor is not None else None
    where = repo.PlanFilter(model_id=model, status=status, search=search, variants=variants)
    records = repo.list_plans(session, where=where, limit=limit + 1, offset=offset, after=after)
    more = len(records) > limit
    records = records[:limit]
    total = repo.count_plans(session, where=where)
    return PlanPageResult(
        items=[plan_summary(r) for r in records],
        total=total,
        next_cursor=encode_cursor(records[-1]) if more and records else None,
    )


def delete_plan(session: Session, plan_id: str) -> None:
    """Delete and commit; :class:`Conflict` for a comparison's variant."""
    record = find_plan(session, plan_id)
    if record.comparison_id is not None:
        why = (
            f"the plan of variant {record.variant_name!r} of comparison {record.comparison_id}; "
            "delete the comparison instead"
        )
        raise Conflict("id", why)
    session.delete(record)
    session.commit()


# --------------------------------------------------------------------------- simulation


@dataclass
class StoredFleet:
    """What simulating a stored plan needs: its plan document, its request and the
    catalog it was made with (shipped + custom entries, calibrated as it asked)."""

    status: str
    plan: dict[str, Any]
    request: Mapping[str, Any] | PlanRequest
    catalog: Catalog


def stored_fleet(
    session: Session, plan_id: str, shipped: Catalog, settings: Settings
) -> StoredFleet:
    record = find_plan(session, plan_id)
    request = record.normalized_request or record.request or {}
    catalog = calibrated(
        merged_catalog(session, shipped),
        request.get("calibration"),
        session,
        settings.calibration_dir,
    )
    return StoredFleet(record.status.value, record.plan or {}, request, catalog)


def simulate(
    fleet: StoredFleet | Plan,
    request: Mapping[str, Any] | PlanRequest | None = None,
    catalog: Catalog | None = None,
    requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
    burst_cv: float = 1.0,
) -> SimulationResult:
    """Simulate a stored fleet, or a freshly made plan (with its request and catalog)."""
    if isinstance(fleet, StoredFleet):
        plan_doc, request, catalog = fleet.plan, fleet.request, fleet.catalog
    else:
        plan_doc = fleet.to_json_dict()
    assert request is not None and catalog is not None
    return simulate_plan(plan_doc, request, catalog, requests, seed, burst_cv)


def simulate_stored_plan(
    session: Session,
    plan_id: str,
    shipped: Catalog,
    settings: Settings,
    requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
    burst_cv: float = 1.0,
) -> SimulationResult:
    """Simulate a stored plan's fleet at the rates it was planned for; :class:`Conflict`
    when it has no fleet (infeasible) or is robust (its verification section
    simulates each scenario). Holds no connection while simulating."""
    fleet = stored_fleet(session, plan_id, shipped, settings)
    if not has_solution(fleet.plan.get("status")) or fleet.plan.get("scenarios"):
        why = (
            "a robust plan: its verification section simulates every scenario"
            if fleet.plan.get("scenarios")
            else f"the plan is {fleet.status}: there is no fleet to simulate"
        )
        raise Conflict("id", why)
    session.rollback()  # hold no connection while simulating
    return simulate(fleet, requests=requests, seed=seed, burst_cv=burst_cv)
