"""A small, fast what-if comparison shared by the comparison and report tests."""

from __future__ import annotations

import copy
from typing import Any

#: Two classes (so the mix can move), two GPU types, no verification by simulation.
BASE: dict[str, Any] = {
    "name": "small 70/30",
    "model": "llama-3.1-8b",
    "traffic": {
        "rate_rps": 10,
        "classes": [{"workload": "chat", "share": 0.7}, {"workload": "agent", "share": 0.3}],
    },
    "candidates": {"gpus": ["h100-sxm5-80gb", "l40s"]},
    "verify": {"enabled": False},
}

#: The base, three named variants (one infeasible) and a three-point sweep: 7 in all.
SPEC: dict[str, Any] = {
    "name": "small what-if",
    "base": BASE,
    "variants": [
        {"name": "traffic x2", "rate_scale": 2.0},
        {"name": "H100 only", "override": {"candidates": {"gpus": ["h100-sxm5-80gb"]}}},
        {"name": "TTFT 1 ms", "override": {"slo": {"ttft_ms": 1}}},
    ],
    "sweeps": [{"name": "agent share", "share_of": "agent", "values": [0.1, 0.5, 0.9]}],
}

NAMES = [
    "base",
    "traffic x2",
    "H100 only",
    "TTFT 1 ms",
    "agent share=0.1",
    "agent share=0.5",
    "agent share=0.9",
]


def spec(**changes: Any) -> dict[str, Any]:
    """A deep copy of :data:`SPEC` with top-level keys replaced."""
    out = copy.deepcopy(SPEC)
    out.update(copy.deepcopy(changes))
    return out
