"""Plans to records and back: shared by the REST routes and the CLI.

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
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from api.db.models import PlanRecord, PlanStatus
from api.schemas import PlanPublic, PlanSummary
from api.settings import Settings
from planner.plan import Plan
from planner.request import PlanRequest
from planner.service import SolverLimits


def solver_caps(settings: Settings) -> SolverLimits:
    """The server's limits: a request may ask for a shorter time, never a longer one."""
    return SolverLimits(time_limit_s=settings.solver_time_limit_s, rel_gap=settings.solver_gap)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def build_plan_record(
    raw: Mapping[str, Any], request: PlanRequest, plan: Plan, caps: SolverLimits
) -> PlanRecord:
    """A new (unsaved) record for ``plan``, made from ``request`` (posted as ``raw``)."""
    return PlanRecord(
        status=PlanStatus(plan.status.value),
        model_id=request.model,
        catalog_hash=plan.catalog_hash,
        request=dict(raw),
        normalized_request=request.model_dump(mode="json"),
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
        plan=plan.to_json_dict(),
    )


def _summary_fields(record: PlanRecord) -> dict[str, Any]:
    plan = record.plan or {}
    name = (record.normalized_request or {}).get("name") or (record.request or {}).get("name")
    gpus_total = plan.get("gpus_total")
    return {
        "id": record.id,
        "created_at": record.created_at,
        "status": record.status,
        "model": record.model_id,
        "name": name if isinstance(name, str) else None,
        "catalog_hash": record.catalog_hash,
        "objective": _finite(record.objective),
        "cost_usd_per_hour": _finite(record.cost_usd_per_hour),
        "gpus_total": gpus_total if isinstance(gpus_total, int) else None,
        "gap": _finite(record.gap),
        "runtime_s": _finite(record.runtime_s),
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
