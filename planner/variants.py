"""Variants of a request: deep merges, mix changes and rate scaling.

Shared by robust scenarios (``planner.scenarios``) and what-if comparisons.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from planner.errors import PlanningError

#: Deepest nesting of mappings and lists accepted in a free-form part of a request
#: (an ``override``, a comparison's ``base``): a plan request is 4 levels deep; deeper
#: documents only serve to exhaust the recursion of copying and merging them.
MAX_DEPTH = 16
#: Most entries (keys and list items, all levels) of one free-form part.
MAX_NODES = 10_000


def check_shape(doc: Any) -> Any:
    """``doc`` itself when it nests at most MAX_DEPTH levels and holds at most
    MAX_NODES entries; else ValueError (pydantic reports it on the field). Iterative,
    so a hostile depth cannot exhaust the stack here."""
    stack = [(doc, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        children = (
            node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
        )
        for child in children:
            nodes += 1
            if nodes > MAX_NODES:
                raise ValueError(f"holds more than {MAX_NODES:,} entries")
            if isinstance(child, Mapping | list):
                if depth + 1 > MAX_DEPTH:
                    raise ValueError(f"nests deeper than {MAX_DEPTH} levels of mappings and lists")
                stack.append((child, depth + 1))
    return doc


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


def traffic_of(
    request: Mapping[str, Any], field: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The ``traffic`` mapping of a composed request document and its classes, checked
    to have the shape a mix, a rate scale or a class override works on (the full
    validation of the composed document comes after): PlanningError naming
    ``<field>.traffic...`` otherwise. ``field`` names the document (``variants.0``).
    The classes are returned by name (``name``, else ``workload``)."""
    traffic = request.get("traffic")
    if not isinstance(traffic, dict):
        raise PlanningError.for_field(
            _at(field, "traffic"),
            f"must be a mapping with rate_rps and classes, got {type(traffic).__name__}",
        )
    classes = traffic.get("classes")
    if not isinstance(classes, list) or not all(isinstance(c, dict) for c in classes):
        raise PlanningError.for_field(
            _at(field, "traffic.classes"),
            "must be a list of class mappings ({workload, share, ...})",
        )
    by_name: dict[str, dict[str, Any]] = {}
    for i, c in enumerate(classes):
        name: Any = c.get("name") or c.get("workload")
        if not isinstance(name, str):
            raise PlanningError.for_field(
                _at(field, f"traffic.classes[{i}].workload"), "must be a workload id (a string)"
            )
        by_name[name] = c
    return traffic, by_name


def _at(prefix: str, field: str) -> str:
    return f"{prefix}.{field}" if prefix else field


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def apply_mix(
    request: Mapping[str, Any], mix: Mapping[str, float], field: str, doc_field: str = ""
) -> dict[str, Any]:
    """Set class shares by class name (``name`` or ``workload``); a class not named
    in ``mix`` gets share 0. Raises if a name matches no class. ``doc_field`` names
    the document in errors about its shape (``traffic_of``)."""
    out = copy.deepcopy(dict(request))
    _, names = traffic_of(out, doc_field or field)
    unknown = sorted(set(mix) - set(names))
    if unknown:
        raise PlanningError.for_field(
            field, f"unknown class(es) {unknown}; classes are {sorted(names)}"
        )
    for name, cls in names.items():
        cls["share"] = float(mix.get(name, 0.0))
    return out


def scale_rate(request: Mapping[str, Any], factor: float, field: str = "") -> dict[str, Any]:
    """The request with its total rate multiplied by ``factor``; ``field`` names the
    document in errors about its shape."""
    out = copy.deepcopy(dict(request))
    traffic, _ = traffic_of(out, field)
    rate: Any = traffic.get("rate_rps")
    if not _number(rate):
        raise PlanningError.for_field(
            _at(field, "traffic.rate_rps"),
            f"must be a number to scale, got {type(rate).__name__}",
        )
    traffic["rate_rps"] = rate * factor
    return out
