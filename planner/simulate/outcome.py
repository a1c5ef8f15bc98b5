"""Which plan a verification correction keeps, and the plan's record of it.

:func:`planner.simulate.verify.correct` solves and simulates up to
``MAX_CORRECTIONS`` corrected plans after the original missed. The plan returned
is the best of them all, the original included (:func:`best_tried`): one that
meets every class's target; else the one attaining most of its SLOs
(:func:`attainment_rank`); on a tie the cheaper. A correction that costs more and
attains no more is stated (``verification.correction``: every round's cost and
attainment, the corrections tried) and not kept, and the plan's
``verification.corrections`` stay the ones the kept plan was solved with, which is
what the alternatives and every variant reuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.simulate.results import Correction, CorrectionRound, FamilyCorrection, Verification

#: A correction's key: (class, role, GPU type, side).
Key = tuple[str, str, str, str]

#: Attainments are ranked in steps of this share (0.1 percentage point, the resolution
#: the verdicts print): two plans whose shortfalls round to the same steps attain the
#: same, and the cheaper one is kept.
ATTAINMENT_STEP = 0.001


def attainment_rank(ver: Verification) -> tuple[int, int, int]:
    """How well a simulated plan attains its SLOs; larger is better, compared in order:
    the classes that meet their target, minus the worst class's shortfall, minus the
    classes' summed shortfall. A class's shortfall is max(0, target - attainment)
    (target = percentile / 100; shares), counted in :data:`ATTAINMENT_STEP` steps
    (rounded), so differences below the printed resolution are ties."""
    steps = [
        round(max(0.0, c.percentile / 100.0 - c.attainment) / ATTAINMENT_STEP) for c in ver.classes
    ]
    return (sum(c.meets_slo for c in ver.classes), -max(steps, default=0), -sum(steps))


@dataclass
class Tried:
    """A plan :func:`correct` solved and simulated: round 0 is the plan as first solved
    (``out`` None), round r >= 1 the r-th re-solve (``out``: replan's output)."""

    round: int
    plan: Any
    ver: Verification
    out: Any
    corrections: dict[Key, FamilyCorrection]

    @property
    def cost_usd_per_hour(self) -> float:
        return self.plan.cost_usd_per_hour or 0.0


def best_tried(tried: list[Tried]) -> Tried:
    """The plan to return: best by :func:`attainment_rank`; on a tie the cheaper
    ($/h), then the earlier round. A plan that meets every target outranks any that
    does not, so a correction that verifies is always kept; a costlier re-solve that
    attains no more never is."""
    return max(tried, key=lambda t: (attainment_rank(t.ver), -t.cost_usd_per_hour, -t.round))


def attainments(ver: Verification, other: Verification | None = None) -> str:
    """Per class, 'name a%' (or 'name a% vs b%' against ``other``, by class name)."""
    before = {c.name: c.attainment for c in other.classes} if other is not None else {}
    parts = []
    for c in ver.classes:
        was = f" vs {before[c.name]:.1%}" if c.name in before else ""
        parts.append(f"{c.name} {c.attainment:.1%}{was} (target {c.percentile:g}%)")
    return ", ".join(parts)


def kept_because(kept: Tried, original: Tried) -> str:
    """Why a corrected plan that still misses is kept over the original, in words."""
    if attainment_rank(kept.ver) > attainment_rank(original.ver):
        return "it attains more"
    return "it attains as much (at the 0.1% shown) and costs less"


def _families(corrections: list[FamilyCorrection]) -> str:
    """'class role on GPU side xfactor, ...' for corrections."""
    return ", ".join(
        f"{c.class_name} {c.role} on {c.gpu} {c.side} x{c.factor:.3g}" for c in corrections
    )


def correction_record(
    tried: list[Tried],
    kept: Tried,
    learned: Mapping[Key, FamilyCorrection],
    rounds: int,
    why: str,
) -> Correction:
    """The ``correction`` section of the kept plan's verification: every plan tried,
    which one is kept and why, in words; ``learned`` is every correction the rounds
    asked for (those the kept plan was not solved with are listed as tried)."""
    original, first = tried[0].plan, tried[0].ver
    was = f"${original.cost_usd_per_hour or 0:,.2f}/h"
    dropped = [c for k, c in sorted(learned.items()) if kept.corrections.get(k) is not c]
    record = {
        "iterations": rounds,
        "original_cost_usd_per_hour": original.cost_usd_per_hour,
        "original": first.classes,
        "rounds": [
            CorrectionRound(
                round=t.round,
                cost_usd_per_hour=t.plan.cost_usd_per_hour,
                passed=t.ver.passed,
                attainment={c.name: c.attainment for c in t.ver.classes},
                kept=t is kept,
            )
            for t in tried
        ],
        "tried_corrections": dropped,
        "kept": "corrected" if kept.round else "original",
    }
    if len(tried) == 1:
        shown = _families(dropped)
        return Correction(
            **record,
            cost_usd_per_hour=None,
            note=f"no corrected fleet could be solved ({why}); the plan stands as solved "
            "and misses as stated" + (f" (the simulation asked for {shown})" if shown else ""),
        )
    best = kept if kept.round else best_tried(tried[1:])
    fresh = [c for k, c in sorted(best.corrections.items()) if tried[0].corrections.get(k) is not c]
    last = tried[-1]
    fams = len([c for c in best.corrections.values() if c.learned == "this plan"])
    head = (
        f"the solved plan missed ({first.summary}); the capacity curves of {fams} pool "
        f"famil{'y' if fams == 1 else 'ies'} (class, role, GPU type) were derated as "
        "listed and the whole model re-solved; "
    )
    n = len(tried) - 1
    if kept.round and kept.ver.passed:
        note = (
            f"the corrected plan meets its targets at ${kept.cost_usd_per_hour:,.2f}/h (was {was})"
        )
    elif kept.round:
        which = "the corrected plan" if kept is last else f"the plan of re-solve {kept.round}"
        note = (
            f"{which} still misses after {n} re-solve{'s' if n > 1 else ''} (stopped: {why}) "
            f"at ${kept.cost_usd_per_hour:,.2f}/h (was {was}); it is kept because "
            f"{kept_because(kept, tried[0])}: {attainments(kept.ver, first)}"
        )
    else:
        head = f"the solved plan missed ({first.summary}); "
        note = (
            f"correction tried ({n} re-solve{'s' if n > 1 else ''}, stopped: {why}): "
            f"${best.cost_usd_per_hour:,.2f}/h"
            + (f" (solved with {_families(fresh)})" if fresh else "")
            + f", attainment {attainments(best.ver, first)}; "
            f"no better than the original at {was}, so the original plan is kept"
            + (
                f" with the {len(kept.corrections)} inherited correction"
                f"{'s' if len(kept.corrections) > 1 else ''} it was solved with"
                if kept.corrections
                else ""
            )
            + "; the corrections tried are not applied (tried_corrections)"
        )
    return Correction(**record, cost_usd_per_hour=best.plan.cost_usd_per_hour, note=head + note)
