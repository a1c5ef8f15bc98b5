"""Deployment artifacts of a plan: ``GET /plans/{id}/deployment`` and ``fleetplan
deploy`` both come here. The artifacts themselves are ``planner.deploy`` (pure
functions of the plan document and the catalog).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from api.services.catalog import merged_catalog
from api.services.errors import Conflict
from api.services.plans import find_plan
from catalog.schema import Catalog
from planner.deploy import ENGINES, TARGETS, Deployment, render_deployment
from planner.errors import PlanningError
from solver.problem import has_solution

__all__ = ["ENGINES", "TARGETS", "Deployment", "plan_document_deployment", "stored_deployment"]


def stored_deployment(
    session: Session, plan_id: str, target: str, shipped: Catalog, engine: str = "vllm"
) -> Deployment:
    """The ``target`` artifact of the stored plan ``plan_id`` (``NotFound`` if there is
    none; ``Conflict`` when it has no fleet), against the catalog it was planned with
    (shipped + custom entries)."""
    record = find_plan(session, plan_id)
    plan = record.plan or {}
    if not has_solution(plan.get("status")):
        raise Conflict("id", f"the plan is {record.status.value}: there is no fleet to deploy")
    catalog = merged_catalog(session, shipped)
    return render_deployment(
        plan, target, catalog, engine=engine, name=f"fleetplan-{record.id[:8]}"
    )


def plan_document_deployment(
    document: Mapping[str, Any], target: str, catalog: Catalog, engine: str = "vllm"
) -> Deployment:
    """The ``target`` artifact of a plan document: a plan (``fleetplan plan --json``,
    ``POST /plans``' ``plan``) or a stored record holding one (``plans show --json``)."""
    inner = document.get("plan")
    plan = inner if isinstance(inner, Mapping) else document
    if "pools" not in plan:
        raise PlanningError.for_field(
            "FILE", "not a plan (no 'pools'): give the output of 'fleetplan plan FILE --json'"
        )
    return render_deployment(plan, target, catalog, engine=engine)
