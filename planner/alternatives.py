"""The plan's alternatives: the next-cheapest fleets on the model the plan was solved on.

Each mode alone, each class in its other mode, and the fleet without each GPU type the
plan uses, re-solved with a short time limit (:func:`solve_alternatives`); the classes'
``mode_reason`` come from them (:func:`explain_modes`).

They cost about as much as the plan itself (the 80/20 example: 1.6 s of re-solves
after a 0.9 s plan), so they need not be computed with it: ``make_plan(...,
alternatives="deferred")`` returns the plan with ``alternatives_status: pending`` and
keeps the solved model (:class:`SolvedModel`: the problem, its solution, the per-class
cache of sub-solves, the candidates set aside by pruning) on the plan, and
:func:`complete_alternatives` solves them later on that model: the same alternatives
as computed inline, and no screening again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from planner.plan import Alternative, Plan
from solver.problem import (
    MIN_SOLVE_TIME_S,
    Mode,
    PoolCandidate,
    PoolRole,
    Problem,
    SolveResult,
    SolverOptions,
)
from solver.solve import solve

#: Each alternative (a next-cheapest fleet) gets at most this much solver time.
ALTERNATIVE_TIME_LIMIT_S = 2.0

#: ``Plan.alternatives_status``: computed with the plan (or since).
READY = "ready"
#: Not computed yet: ``complete_alternatives`` (the service: in the background, or
#: ``GET /plans/{id}/alternatives``) computes them.
PENDING = "pending"
#: Not asked for (``make_plan(..., alternatives=False)``: what-if variants, sensitivity).
NOT_REQUESTED = "not_requested"


@dataclass
class SolvedModel:
    """What solving the alternatives needs of a plan's solve: the (corrected) model,
    its solution, the solver options, the candidates of the request without a GPU
    type (``without``), the per-class sub-solve cache, and the solver seconds the
    plan's own solves used (the alternatives share the request's time limit)."""

    problem: Problem
    result: SolveResult
    opts: SolverOptions
    without: Callable[[str], tuple[PoolCandidate, ...]] | None
    cache: dict[Any, Any] = field(default_factory=dict)
    solver_used_s: float = 0.0


def solve_alternatives(
    problem: Problem,
    result: SolveResult,
    opts: SolverOptions,
    without: Callable[[str], tuple[PoolCandidate, ...]] | None = None,
    deadline: float | None = None,
    cache: dict | None = None,
) -> list[Alternative]:
    """The next-cheapest fleets: each mode alone, each class in its other mode, and
    the fleet without each GPU type the plan uses (``without(gpu)``: the model's
    candidates for the request without that GPU type, i.e. the ones another GPU type
    beat on cost come back and are pruned again with the rest; by default the
    screened candidates of the other GPU types), re-solved with a short time limit.
    ``problem`` and ``without`` are the corrected model the plan was solved on, so every
    alternative restricts that model and costs no less than the plan (up to the solver gap);
    alternatives are not simulated (``verified: false``). All of it
    stays within ``deadline`` (perf_counter seconds): alternatives that do not fit
    are reported as skipped."""
    if not result.status.has_solution:
        return []
    base = result.objective or 0.0
    # Same gap as the plan, so the per-class subproblems they share with the plan
    # (and with each other) come from ``cache`` instead of being solved again.
    short = replace(opts, time_limit_s=min(ALTERNATIVE_TIME_LIMIT_S, opts.time_limit_s))
    variants: list[tuple[str, Problem, str]] = []
    modes_used = set(result.modes.get(c.id) for c in problem.classes)
    for mode, roles in (
        (Mode.AGGREGATED, {PoolRole.AGGREGATED}),
        (Mode.DISAGGREGATED, {PoolRole.PREFILL, PoolRole.DECODE}),
    ):
        if modes_used == {mode}:
            continue
        classes = tuple(replace(c, modes=(mode,)) for c in problem.classes)
        cands = tuple(c for c in problem.candidates if c.role in roles)
        variants.append(
            (f"{mode.value} only", replace(problem, classes=classes, candidates=cands), "")
        )
    for cls in problem.classes:
        chosen = result.modes.get(cls.id)
        other = Mode.DISAGGREGATED if chosen == Mode.AGGREGATED else Mode.AGGREGATED
        if other not in cls.modes or chosen is None:
            continue
        classes = tuple(
            replace(c, modes=(other,)) if c.id == cls.id else c for c in problem.classes
        )
        variants.append(
            (f"{cls.id} {other.value}", replace(problem, classes=classes), f"class:{cls.id}")
        )
    used_gpus = sorted({c.gpu for c in problem.candidates if c.id in result.replicas})
    for gpu in used_gpus:
        if without is not None:
            cands = without(gpu)
        else:
            cands = tuple(c for c in problem.candidates if c.gpu != gpu)
        variants.append((f"without {gpu}", replace(problem, candidates=cands), ""))
    out = []
    for name, prob, note in variants:
        left = (deadline - time.perf_counter()) if deadline is not None else short.time_limit_s
        if left < MIN_SOLVE_TIME_S:
            out.append(
                Alternative(
                    name=name,
                    status="skipped",
                    cost_usd_per_hour=None,
                    delta_usd_per_hour=None,
                    note="not solved: the request's solver time limit was used up",
                    class_name=note.removeprefix("class:") if note else None,
                )
            )
            continue
        r = solve(prob, replace(short, time_limit_s=min(short.time_limit_s, left)), cache)
        ok = r.status.has_solution
        cost = _cost(prob, r) if ok else None
        out.append(
            Alternative(
                name=name,
                status=r.status.value,
                cost_usd_per_hour=cost,
                delta_usd_per_hour=(cost - base) if cost is not None else None,
                note=r.message if not ok else "",
                class_name=note.removeprefix("class:") if note else None,
            )
        )
    return sorted(out, key=lambda a: (a.cost_usd_per_hour is None, a.cost_usd_per_hour or 0.0))


def explain_modes(plan: Plan) -> None:
    """Say, per class, why its mode won: what the other mode would cost the fleet."""
    for cls in plan.classes:
        if cls.mode is None:
            continue
        alt = next((a for a in plan.alternatives if a.class_name == cls.name), None)
        if alt is None:
            cls.mode_reason = f"{cls.mode.value}: the only mode allowed or with feasible pools"
        elif alt.cost_usd_per_hour is None:
            cls.mode_reason = (
                f"{cls.mode.value}: serving it {alt.name.split()[-1]} is {alt.status} ({alt.note})"
                if alt.note
                else f"{cls.mode.value}: the other mode is {alt.status}"
            )
        else:
            other = alt.name.split()[-1]
            delta = alt.delta_usd_per_hour or 0.0
            if delta < 0:
                cls.mode_reason = f"{cls.mode.value}: within the solver gap of {other}"
            elif round(delta, 2) == 0:
                cls.mode_reason = (
                    f"{cls.mode.value}: {other} would cost the same (a tie, to the cent; "
                    "either serves the class)"
                )
            else:
                cls.mode_reason = f"{cls.mode.value}: {other} would cost ${delta:,.2f}/h more"


def _cost(prob: Problem, r: SolveResult) -> float:
    """GPU cost plus operations cost of a solved fleet ($/hour)."""
    by_id = {c.id: c for c in prob.candidates}
    gpu = sum(by_id[k].cost_usd_per_hour_per_replica * n for k, n in r.replicas.items())
    return gpu + prob.operations_cost_usd_per_hour(r.replicas)


def complete_alternatives(plan: Plan, model: SolvedModel | None = None) -> bool:
    """Solve the alternatives of a plan made with ``alternatives="deferred"`` on the model
    it kept (or ``model``), set them and the classes' ``mode_reason``, and mark them
    ready. False (nothing done) when the plan kept no model."""
    model = model or plan.solved_model()
    if model is None:
        return False
    deadline = time.perf_counter() + max(model.opts.time_limit_s - model.solver_used_s, 0.0)
    plan.alternatives = solve_alternatives(
        model.problem,
        model.result,
        model.opts,
        without=model.without,
        deadline=deadline,
        cache=model.cache,
    )
    explain_modes(plan)
    plan.alternatives_status = READY
    plan.keep_solved_model(None)
    return True
