"""GPUs whose factors for a plan's model rest on no measurement of their own: borrowed,
measured on mixture-of-experts LLMs only (planner.plan.assemble.borrowed_level_warnings,
found in the plan's warnings), or set by analogy (the plan's ``unmeasured_gpus``), as
the report's sentences name them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.plan.models import BORROWED_LEVEL_MARK, fp4_analogy_on_scaled_level


def borrowed_level_gpus(plan: Mapping[str, Any]) -> list[str]:
    """The GPUs whose factors for the planned (dense) model are borrowed, measured on
    mixture-of-experts LLMs only, read from the plan's warnings
    (planner.plan.assemble.borrowed_level_warnings), in their order."""
    warnings = plan.get("warnings")
    items = [str(w) for w in warnings] if isinstance(warnings, list) else []
    return [w.split(":", 1)[0] for w in items if BORROWED_LEVEL_MARK in w]


def borrowed_level_note(plan: Mapping[str, Any]) -> str:
    """``"; <gpus> measured on mixture-of-experts LLMs only: ..."`` for
    :func:`borrowed_level_gpus`, appended to the plan text's "unmeasured GPUs" line (which
    counts only GPUs set by analogy); empty when there are none."""
    gpus = borrowed_level_gpus(plan)
    if not gpus:
        return ""
    return (
        f"; {', '.join(gpus)} {BORROWED_LEVEL_MARK}: the factors for this model are borrowed "
        "from a measured GPU (see the warnings)"
    )


def analogy_in_fp4_only(plan: Mapping[str, Any], gpu: str) -> bool:
    """True when ``gpu``'s pools priced by analogy are all FP4 pools of a GPU whose level
    was scaled to measurements (``level_scale`` not 1): factors set in other formats, none
    in FP4 (planner.risk.factor_uncertainty), so it rests on a measurement, not on none
    (its own, or a sibling's where its level is borrowed: :func:`borrowed_level_gpus`)."""
    pools = [p for p in map(_as_map, _items(plan.get("pools"))) if p.get("gpu") == gpu]
    analogy = [p for p in pools if p.get("provenance") == "analogy"]
    return bool(analogy) and all(
        fp4_analogy_on_scaled_level(p.get("provenance"), p.get("dtype"), p.get("level_scale"))
        for p in analogy
    )


def unmeasured_gpu_note(plan: Mapping[str, Any], gpu: str) -> str:
    """``gpu`` as the plan's "unmeasured GPUs" line names it: ``"<gpu> (efficiency set by
    analogy, no measurement)"``, or where :func:`analogy_in_fp4_only`, ``"<gpu> (fp4
    pools: no factors measured in fp4; its level x the FP4 derates, see fp4 under
    Assumed)"``."""
    if analogy_in_fp4_only(plan, gpu):
        return (
            f"{gpu} (fp4 pools: no factors measured in fp4; its level x the FP4 derates, "
            "see fp4 under Assumed)"
        )
    return f"{gpu} (efficiency set by analogy, no measurement)"


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
