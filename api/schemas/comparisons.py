"""API schemas of what-if comparisons (``/comparisons``).

The comparison document itself is ``planner.compare.ComparisonSpec`` (the body of
``POST /comparisons``); these are the responses.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from api.db.models import ComparisonStatus
from planner.compare import ComparisonSpec

__all__ = [
    "ComparisonPage",
    "ComparisonPublic",
    "ComparisonSpec",
    "ComparisonStatus",
    "ComparisonSummary",
    "ComparisonVariant",
]


class ComparisonVariant(BaseModel):
    """One variant of a comparison and, once solved, its stored plan."""

    name: str = Field(description="`base`, a named variant, or `<sweep>=<value>`.")
    axis: str | None = Field(description="The sweep it belongs to (null for named variants).")
    value: Any = Field(default=None, description="The sweep value (null for named variants).")
    plan_id: str | None = Field(
        description="The variant's stored plan (`GET /plans/{id}`); null until solved, "
        "or when the variant could not be planned."
    )
    status: str = Field(
        description="`pending` while running; then the plan's status (`optimal`, "
        "`feasible`, `infeasible`) or `error`; `not run` when the comparison failed."
    )
    cost_usd_per_hour: float | None
    delta_usd_per_hour: float | None = Field(description="Cost minus the base's cost.")
    delta_pct: float | None = Field(description="100 x (cost - base) / base.")
    error: str | None = Field(default=None, description="Why the variant could not be planned.")


class ComparisonSummary(BaseModel):
    """A stored comparison without its table (what ``GET /comparisons`` lists)."""

    id: str = Field(description="UUID of the comparison.")
    name: str | None = Field(description="The document's `name` (else the base request's).")
    status: ComparisonStatus = Field(description="`running`, `done` or `failed`.")
    done: int = Field(description="Variants solved so far (the base counts as one).")
    total: int = Field(description="Variants in all, the base included.")
    created_at: datetime
    finished_at: datetime | None
    error: str | None = Field(description="Why the comparison failed (null otherwise).")
    location: str = Field(description="This comparison's URL path.")


class ComparisonPublic(ComparisonSummary):
    """A stored comparison: progress, its variants and, when done, the table."""

    variants: list[ComparisonVariant]
    table: list[dict[str, Any]] | None = Field(
        description="When done, one row per variant (base first): status, cost per hour "
        "and per million tokens, delta from the base (US$/h and %), GPUs in total and "
        "by type, prefill:decode GPU ratio, power, and per class the mode, predicted "
        "TTFT/TPOT and whether the SLO is met; `plan_id` names the stored plan."
    )
    spec: dict[str, Any] = Field(description="The comparison document as posted.")


class ComparisonPage(BaseModel):
    """One page of stored comparisons, newest first."""

    items: list[ComparisonSummary]
    total: int = Field(description="Comparisons matching the filter, over all pages.")
    limit: int
    offset: int
