"""API response schemas (``*Public``) and the documented error responses.

One name per layer: ``Plan`` (planner), ``PlanRecord`` (table), ``PlanPublic`` here.
The stored plan document and the request documents are served as the JSON they
were stored as (``dict``), not re-validated against today's ``Plan`` model: a plan
stored by an older version must stay readable after the planner's output grows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.db.models import PlanStatus
from planner.request import PlanRequest
from planner.simulate.results import SimulationResult

__all__ = [
    "ErrorBody",
    "Issue",
    "PlanAlternatives",
    "PlanPage",
    "PlanPublic",
    "PlanRequest",
    "PlanStatus",
    "PlanSummary",
    "SimulationCreate",
    "SimulationResult",
    "error_responses",
]


class Issue(BaseModel):
    field: str = Field(description="Dotted path of the offending field, or `(body)`.")
    message: str


class ErrorBody(BaseModel):
    """Every error response has this body."""

    error: str = Field(description="Machine-readable code, e.g. `invalid_input`, `not_found`.")
    detail: str
    issues: list[Issue]


ERROR_DESCRIPTIONS: dict[int, str] = {
    401: "Missing or wrong X-API-Key (when the server has one)",
    404: "No such resource",
    409: "Conflicts with an existing entry",
    413: "Request body too large",
    415: "Request body is not JSON",
    422: "Invalid input; `issues` names each field",
    429: "Too much work queued; retry after the Retry-After header's seconds",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each status documented with :class:`ErrorBody`."""
    return {
        status: {"model": ErrorBody, "description": ERROR_DESCRIPTIONS[status]}
        for status in statuses
    }


class PlanSummary(BaseModel):
    """A stored plan without its documents (what ``GET /plans`` lists)."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="UUID of the stored plan.")
    created_at: datetime
    status: PlanStatus
    model: str = Field(description="Catalog id of the model planned for.")
    name: str | None = Field(description="The request's `name`, if it had one.")
    catalog_hash: str = Field(description="Content hash of the catalog (shipped + custom) used.")
    objective: float | None = Field(description="Objective value (US$/h for min_cost).")
    cost_usd_per_hour: float | None
    gpus_total: int | None = Field(description="GPUs in the fleet (null when no plan).")
    gap: float | None = Field(description="Relative MIP gap of the main solve.")
    runtime_s: float | None = Field(description="Wall time of the main MILP solve, seconds.")
    comparison_id: str | None = Field(
        default=None, description="The comparison whose variant this plan is (null: none)."
    )
    variant_name: str | None = Field(default=None, description="That variant's name.")


class PlanPublic(PlanSummary):
    """A stored plan: the request as posted, the request with defaults filled, the
    solver options in force, and the plan document."""

    request: dict[str, Any] = Field(description="The request document as posted.")
    normalized_request: dict[str, Any] | None = Field(
        description="The validated request with every default filled in."
    )
    solver_options: dict[str, Any] = Field(
        description="Time limit and gap in force (the request's, capped by the server's)."
    )
    plan: dict[str, Any] | None = Field(
        description="The plan: pools, classes, costs, binding constraints, alternatives, "
        "why-not, infeasibility reasons, solver info (planner.plan.Plan as JSON)."
    )


class PlanAlternatives(BaseModel):
    """A stored plan's alternatives (``GET /plans/{id}/alternatives``): the next-cheapest
    fleets on the model the plan was solved on, and why each class got its mode."""

    status: str = Field(
        description="ready (computed; pending ones are computed before answering), or "
        "not_requested (planned without them)"
    )
    alternatives: list[dict[str, Any]] = Field(
        description="As in the plan document: name, status, cost_usd_per_hour, "
        "delta_usd_per_hour, note, class, verified."
    )
    mode_reasons: dict[str, str] = Field(
        description="Per class: why its mode won (what the other mode would cost)."
    )


class PlanPage(BaseModel):
    """One page of stored plans, newest first."""

    items: list[PlanSummary]
    total: int = Field(description="Plans matching the filters, over all pages.")
    limit: int
    offset: int | None = Field(description="The offset used (null when paging by cursor).")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class SimulationCreate(BaseModel):
    """Options of ``POST /plans/{id}/simulations`` (all optional; ``{}`` takes the defaults)."""

    model_config = ConfigDict(extra="forbid")

    requests: int = Field(
        default=100_000,
        ge=1,
        le=500_000,
        strict=True,
        description="Requests to simulate, all classes.",
    )
    seed: int = Field(
        default=0, ge=0, le=2**32 - 1, strict=True, description="Random seed (reproducible)."
    )
    burst_cv: float = Field(
        default=1.0,
        strict=True,
        ge=0.05,
        le=20,
        allow_inf_nan=False,
        description="Coefficient of variation of inter-arrival times (1: Poisson, >1: bursty).",
    )
