"""Variants of a request: deep merges, mix changes and rate scaling.

Shared by robust scenarios (``planner.scenarios``) and what-if comparisons.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from planner.errors import PlanningError


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged into a copy of ``base``: mappings merge key by key,
    everything else (lists, numbers, strings, None) replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_mix(request: Mapping[str, Any], mix: Mapping[str, float], field: str) -> dict[str, Any]:
    """Set class shares by class name (``name`` or ``workload``); a class not named
    in ``mix`` gets share 0. Raises if a name matches no class."""
    out = copy.deepcopy(dict(request))
    classes = out.get("traffic", {}).get("classes", [])
    names = {c.get("name") or c.get("workload"): c for c in classes}
    unknown = sorted(set(mix) - set(names))
    if unknown:
        raise PlanningError.for_field(
            field, f"unknown class(es) {unknown}; classes are {sorted(names)}"
        )
    for name, cls in names.items():
        cls["share"] = float(mix.get(name, 0.0))
    return out


def scale_rate(
    request: Mapping[str, Any], factor: float, field: str = "rate_scale"
) -> dict[str, Any]:
    """The request with its total rate multiplied by ``factor``; a ``PlanningError``
    naming ``field`` when the request has no numeric ``traffic.rate_rps`` to scale."""
    out = copy.deepcopy(dict(request))
    traffic = out.get("traffic")
    rate = traffic.get("rate_rps") if isinstance(traffic, dict) else None
    if not isinstance(rate, int | float) or isinstance(rate, bool):
        raise PlanningError.for_field(field, "needs a request with a numeric traffic.rate_rps")
    traffic["rate_rps"] = rate * factor  # type: ignore[index]
    return out
