"""Reports of stored plans and comparisons: shared by the REST routes and the CLI.

A plan report includes a sensitivity table (the cheapest fleet at traffic x1.5
and x2 and at the largest class's share -20/+20 points, each re-planned:
``planner.report.sensitivity``). Re-planning takes a few seconds for a small
fleet and about 13 s for the 80/20 example, so it is computed once, by the first
report that asks for it, and cached in the plan's ``report_extras``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from api.db.models import PlanRecord
from api.routes.calibrations import find_calibration
from catalog.schema import Catalog
from planner.errors import PlanningError
from planner.report.render import sensitivity
from planner.service import SolverLimits


def has_fleet(record: PlanRecord) -> bool:
    return (record.plan or {}).get("status") in ("optimal", "feasible")


def cached_sensitivity(record: PlanRecord) -> dict[str, Any] | None:
    return (record.report_extras or {}).get("sensitivity")


def compute_sensitivity(
    session: Session,
    record: PlanRecord,
    catalog: Catalog,
    caps: SolverLimits,
    workers: int | None = None,
) -> dict[str, Any] | None:
    """Compute the plan's sensitivity and cache it on ``record`` (the caller
    commits); None when the plan has no fleet to vary. Ends the session's read
    while re-planning, so no connection is held meanwhile."""
    if not has_fleet(record):
        return None
    request_doc = dict(record.request or record.normalized_request or {})
    base_cost = record.cost_usd_per_hour
    base_plan = dict(record.plan or {})  # its learned corrections carry over to every case
    calibrations = {}
    name = request_doc.get("calibration")
    if isinstance(name, str):
        try:
            calibrations[name] = find_calibration(session, name)
        except PlanningError as err:  # deleted since: say so, cache nothing
            return {"rows": [], "note": f"Sensitivity not computed: {err.message}"}
    session.rollback()  # no connection held while re-planning
    sens = sensitivity(
        request_doc,
        catalog,
        caps,
        base_cost_usd_per_hour=base_cost,
        base_plan=base_plan,
        workers=workers,
        calibrations=calibrations or None,
    )
    record.report_extras = {**(record.report_extras or {}), "sensitivity": sens}
    return sens


def plan_report_input(record: PlanRecord, sens: dict[str, Any] | None) -> dict[str, Any]:
    """What ``planner.report.render_plan_report`` takes."""
    out: dict[str, Any] = {
        "id": record.id,
        "created_at": record.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        "request": record.request,
        "plan": record.plan,
    }
    if sens is not None:
        out["sensitivity"] = sens
    return out
