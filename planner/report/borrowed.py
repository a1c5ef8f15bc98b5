"""GPUs whose factors for a plan's (dense) model are borrowed: measured on
mixture-of-experts LLMs only (planner.plan.assemble.borrowed_level_warnings), found in
the plan's warnings for the report's sentences."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.plan.models import BORROWED_LEVEL_MARK


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
