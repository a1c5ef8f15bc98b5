"""From a request document to the solver's input: ``parse_request`` validates a raw
document into a :class:`PlanRequest`, ``build_problem`` turns a resolved request
and its screened candidates into a :class:`solver.problem.Problem`.

They live apart from the orchestrator (:mod:`planner.service`) because every
pipeline step that re-solves (robust scenarios, verification's corrections)
needs them, and the orchestrator in turn calls those steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from planner.candidates import Screening
from planner.errors import PlanningError
from planner.request import PlanRequest, ResolvedRequest
from planner.validation import friendly_issues
from solver.problem import ClassDemand, Limits, Operations, Problem


class RequestInvalid(PlanningError):
    code = "invalid_input"  # as the API names every invalid request body (api.errors)


def parse_request(data: Mapping[str, Any] | PlanRequest) -> PlanRequest:
    """Validate a raw request document; errors name each offending field."""
    if isinstance(data, PlanRequest):
        return data
    try:
        return PlanRequest.model_validate(data)
    except ValidationError as err:
        issues = friendly_issues(err.errors(), PlanRequest)
        text = "; ".join(f"{f}: {m}" for f, m in issues)
        raise RequestInvalid(text, issues) from None


def build_problem(req: ResolvedRequest, screening: Screening) -> Problem:
    """Solver input: class demands, the screened candidates, the fleet limits."""
    lim = req.request.constraints
    return Problem(
        classes=tuple(
            ClassDemand(c.name, c.rate_rps, tuple(c.modes)) for c in req.classes if c.rate_rps > 0
        ),
        candidates=tuple(c.to_pool_candidate() for c in screening.candidates),
        limits=Limits(
            budget_usd_per_hour=lim.budget_usd_per_hour,
            max_gpus=dict(lim.max_gpus),
            power_kw=lim.power_kw,
            min_replicas_per_pool=lim.min_replicas_per_pool,
            max_configurations=lim.max_configurations,
            max_gpu_types=lim.max_gpu_types,
            max_replicas_per_pool=lim.max_replicas_per_pool,
        ),
        objective=req.request.objective,
        operations=Operations(
            usd_per_hour_per_gpu_type=req.request.operations.usd_per_hour_per_gpu_type,
            usd_per_hour_per_configuration=req.request.operations.usd_per_hour_per_configuration,
        ),
    )
