"""Traffic a most-goodput plan leaves unserved, read from its JSON (``rate_rps`` and
``served_rps`` of each class) for the text plan and the report's class table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A class served below this share of its rate is shown as served in part.
SERVED_IN_FULL = 0.999


def _rps(value: float) -> str:
    return f"{value:,.1f}" if abs(value) >= 1 else f"{value:.3g}"


def served_in_part(c: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(offered, served)`` req/s of a class (its plan JSON) served below
    :data:`SERVED_IN_FULL` of its rate, else None."""
    offered, served = c.get("rate_rps"), c.get("served_rps")
    nums = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (offered, served))
    if nums and offered > 0 and served < SERVED_IN_FULL * offered:  # type: ignore[operator]
        return float(offered), float(served)  # type: ignore[arg-type]
    return None


def goodput_fleet(plan: Mapping[str, Any]) -> bool:
    """Whether ``plan`` (its JSON) is a most-goodput plan with a fleet: only such a plan
    serves part of a class (an infeasible or failed one serves nothing, by no choice)."""
    return plan.get("objective") == "max_goodput" and bool(plan.get("pools"))


def unserved_lines(plan: Mapping[str, Any]) -> list[str]:
    """One line per class a most-goodput plan serves in part (:func:`goodput_fleet`): how
    much of its rate is not served."""
    if not goodput_fleet(plan):
        return []
    out = []
    for c in plan.get("classes") or []:
        got = served_in_part(c) if isinstance(c, Mapping) else None
        if got is not None:
            offered, served = got
            out.append(
                f"  {c.get('name')}: {_rps(offered - served)} of its {_rps(offered)} req/s NOT "
                f"served ({(offered - served) / offered:.0%}): the fleet within the limits serves "
                "no more (objective max_goodput); latencies are those of the traffic served"
            )
    return out


def rate_served_cell(plan: Mapping[str, Any], c: Mapping[str, Any]) -> str | None:
    """``"<served> of <rate> served"`` for a class ``c`` a most-goodput plan serves in
    part, else None."""
    got = served_in_part(c) if goodput_fleet(plan) else None
    return None if got is None else f"{_rps(got[1])} of {_rps(got[0])} served"
