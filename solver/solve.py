"""Solve the fleet MILP with HiGHS through PuLP (CBC as fallback) and report honestly.

:func:`solve` tries the exact decompositions first (:mod:`solver.decompose`), then
the monolithic model (:mod:`solver.backend`); on infeasibility it explains which
fleet limit must move (an elastic re-solve).
"""

from __future__ import annotations

import time
from dataclasses import replace

from solver.backend import TOL, extract_result, run_solver, var_value
from solver.checks import has_limits, merge_split_pools, pairs_respected, unservable_classes
from solver.decompose import class_lower_bound as class_lower_bound  # re-exported
from solver.decompose import solve_by_class, solve_by_gpu_types, solve_pair_cases
from solver.model import build_model
from solver.problem import (
    MIN_SOLVE_TIME_S,
    Objective,
    Problem,
    SolveResult,
    SolverOptions,
    SolveStatus,
)
from solver.variables import stock_row


def solve(
    problem: Problem, options: SolverOptions | None = None, cache: dict | None = None
) -> SolveResult:
    """Solve ``problem``; on infeasibility, explain with an elastic re-solve of the limits.
    A solution has one pool per class, role and engine configuration where one candidate
    can carry it (:func:`solver.checks.merge_split_pools`).

    ``cache`` (a dict the caller keeps) memoizes the per-class subproblems of the
    class-by-class solve, so re-solving variants that share classes (the plan's
    alternatives) does not solve the same subproblem twice."""
    return merge_split_pools(problem, _solve(problem, options, cache))


def _solve(
    problem: Problem, options: SolverOptions | None = None, cache: dict | None = None
) -> SolveResult:
    """:func:`solve` without the merge of split pools."""
    options = options or SolverOptions()
    t0 = time.perf_counter()
    missing = unservable_classes(problem)
    if missing and problem.objective == Objective.MIN_COST:
        return SolveResult(
            status=SolveStatus.INFEASIBLE,
            objective=None,
            gap=None,
            runtime_s=time.perf_counter() - t0,
            solver=options.solver,
            message="no feasible pool candidates for class(es): " + ", ".join(missing),
        )

    limit_s = options.time_limit_s

    def remaining() -> float:
        return limit_s - (time.perf_counter() - t0)

    if options.budget_first and budget_only(problem):
        early = _budget_first(problem, options, t0, cache)
        if early is not None:
            return early
        options = replace(options, budget_first=False)  # not again in the solves below

    if len(problem.classes) == 1 and any(c.pairs_with is not None for c in problem.candidates):
        # One class (the subproblems of the decompositions): the KV pairing rows only
        # forbid some (prefill, decode) combinations, so solve without them first (a
        # relaxation, faster) with at most half the time; when its fleet pairs only
        # over priced links it is optimal with the rows too.
        from dataclasses import replace as _replace

        relaxed = _replace(
            problem, candidates=tuple(_replace(c, pairs_with=None) for c in problem.candidates)
        )
        r = _solve(relaxed, _replace(options, time_limit_s=max(0.05, remaining() / 2)), cache)
        if r.status.has_solution and pairs_respected(problem, r.replicas):
            return _replace(r, runtime_s=time.perf_counter() - t0)
        if r.status != SolveStatus.INFEASIBLE:
            split = solve_pair_cases(problem, options, t0, cache, solve=solve)
            if split is not None:
                return split

    if (
        options.decompose
        and problem.objective == Objective.MIN_COST
        and len(problem.classes) > 1
        and not problem.couples_classes
    ):
        split = solve_by_class(problem, options, t0, cache, solve=solve)
        if split is not None:
            return split
    if options.decompose and problem.objective == Objective.MIN_COST and problem.couples_classes:
        split = solve_by_gpu_types(problem, options, t0, cache, solve=solve)
        if split is not None:
            return split

    prob, v = build_model(problem)
    # one class (the decompositions' subproblems): presolve costs more than it saves
    presolve = len(problem.classes) > 1
    status, gap, name, msg = run_solver(prob, options, remaining(), presolve=presolve)
    if status.has_solution and problem.objective == Objective.MAX_GOODPUT:
        floor = sum(var_value(s) for s in v.served.values())
        prob2, v2 = build_model(problem, goodput_floor_rps=floor * (1 - 1e-7) - 1e-9)
        status2, gap2, name, msg2 = run_solver(
            prob2, options, max(MIN_SOLVE_TIME_S, remaining()), presolve=presolve
        )
        if status2.has_solution:
            prob, v, gap, msg = prob2, v2, (gap if status == SolveStatus.FEASIBLE else gap2), msg2
            if status2 == SolveStatus.FEASIBLE:
                status = SolveStatus.FEASIBLE
    if status.has_solution:
        return extract_result(problem, v, status, gap, time.perf_counter() - t0, name, prob, msg)
    if status == SolveStatus.INFEASIBLE:
        explained = _explain_infeasible(problem, options, max(0.5, remaining()))
        relaxation = explained or {}
        alone = _one_limit_alone(problem, options, remaining()) if relaxation else {}
        if relaxation:
            message = "fleet limits bind: " + ", ".join(
                f"{k} short by {val:.4g}" for k, val in relaxation.items()
            )
        elif explained is None:
            message = (
                "no fleet meets the request within its limits; the re-solve that finds "
                "which limit to move ran out of time (raise solver.time_limit_s)"
            )
        else:
            message = (
                "no fleet meets the SLOs even with every fleet limit relaxed (budget, stock, "
                "power, configurations, GPU types, replicas per pool)"
            )
        return SolveResult(
            status=SolveStatus.INFEASIBLE,
            objective=None,
            gap=None,
            runtime_s=time.perf_counter() - t0,
            solver=name,
            relaxation=relaxation,
            relaxation_alone=alone,
            message=message,
            num_variables=prob.numVariables(),
            num_constraints=prob.numConstraints(),
        )
    return SolveResult(
        status=status,
        objective=None,
        gap=None,
        runtime_s=time.perf_counter() - t0,
        solver=name,
        message=msg or "solver error",
        num_variables=prob.numVariables(),
        num_constraints=prob.numConstraints(),
    )


def _explain_infeasible(
    problem: Problem, options: SolverOptions, time_limit_s: float
) -> dict[str, float] | None:
    """Elastic re-solve: how far each fleet limit must move for a fleet to exist, in
    its units (budget $/h, stock GPUs, power kW, configurations, GPU types, replicas
    per pool, the replica minimum); {} when no limit is set or even relaxing all of
    them leaves no fleet (then no fleet meets the SLOs); None when it ran out of time."""
    if not has_limits(problem):
        return {}
    prob, v = build_model(problem, elastic=True)
    status, _, _, _ = run_solver(prob, options, time_limit_s)
    if status == SolveStatus.INFEASIBLE:
        return {}  # nothing, even with every limit relaxed
    if not status.has_solution:
        return None  # out of time: unknown
    return {name: var_value(var) for name, var in v.slack.items() if var_value(var) > TOL}


#: Limits moved one at a time (:func:`_one_limit_alone`): what a buyer can change.
BUY_LIMITS = ("budget", "power", "stock__")


def _one_limit_alone(
    problem: Problem, options: SolverOptions, time_limit_s: float
) -> dict[str, float]:
    """For each budget, power or stock limit of an infeasible ``problem`` (with two or more
    of them): how far it alone must move, the others held, for a fleet to exist (an
    elastic re-solve with that limit's slack only, :func:`solver.model.build_model`),
    in its units; a limit that cannot do it alone, or whose re-solve ran out of its share
    of ``time_limit_s``, is left out. The elastic re-solve over all of them gives one
    combination; a buyer may be able to move only one (H100s out of stock, A100s to be
    had)."""
    names = [n for n in limit_names(problem) if n.startswith(BUY_LIMITS)]
    if len(names) < 2:
        return {}
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        left = time_limit_s - (time.perf_counter() - t0)
        if left <= MIN_SOLVE_TIME_S:
            break
        prob, v = build_model(problem, elastic=frozenset([name]))
        status, _, _, _ = run_solver(prob, options, left / (len(names) - i))
        if status == SolveStatus.OPTIMAL and name in v.slack:
            out[name] = var_value(v.slack[name])
    return out


def limit_names(problem: Problem) -> list[str]:
    """The names of ``problem``'s budget, power and stock rows (as the model names them:
    ``budget``, ``power``, ``stock__<gpu>`` for each GPU type with candidates)."""
    lim = problem.limits
    out = ["budget"] if lim.budget_usd_per_hour is not None else []
    out += ["power"] if lim.power_kw is not None else []
    gpus = {c.gpu for c in problem.candidates}
    out += [stock_row(g) for g in sorted(lim.max_gpus) if g in gpus]
    return out


def budget_only(problem: Problem) -> bool:
    """A least-cost problem whose one fleet limit is a budget: without it, it decomposes
    (class by class, or by GPU-type sets with operations costs) as a plan without limits
    does, which :func:`_budget_first` uses."""
    if problem.objective != Objective.MIN_COST or problem.limits.budget_usd_per_hour is None:
        return False
    return not has_limits(without_budget(problem))


def without_budget(problem: Problem) -> Problem:
    """``problem`` with no budget row."""
    return replace(problem, limits=replace(problem.limits, budget_usd_per_hour=None))


def _budget_first(
    problem: Problem, options: SolverOptions, t0: float, cache: dict | None
) -> SolveResult | None:
    """A least-cost problem whose one limit is a budget (:func:`budget_only`), settled
    without the budget row where that is exact (the budget couples every class, so the
    model with it cannot be solved class by class and takes the whole time limit where a
    short budget makes it infeasible):

    * the least GPU cost ``G`` (operations costs left out: the budget limits the GPUs'
      cost only) above the budget ``B`` by more than the sub-solve's gap: no fleet fits
      it, infeasible, the budget short by ``G - B`` (``relaxation``);
    * no fleet at all without the budget: infeasible as that sub-solve says (a budget
      cannot help);
    * the least-cost fleet without the budget within it: optimal with it too (the budget
      is ``binding`` when that fleet spends all of it).

    None otherwise, or where a sub-solve is not proven optimal (then the model with the
    budget row decides, with what is left of the time limit). Each sub-solve may take half
    of what is left."""
    budget = problem.limits.budget_usd_per_hour
    assert budget is not None
    inner = replace(options, budget_first=False)

    def left() -> SolverOptions:
        rest = options.time_limit_s - (time.perf_counter() - t0)
        return replace(inner, time_limit_s=max(MIN_SOLVE_TIME_S, rest / 2))

    free = without_budget(problem)
    gpus_only = replace(free, operations=type(problem.operations)())
    least = _solve(gpus_only, left(), None)
    if least.status == SolveStatus.INFEASIBLE:
        return replace(least, runtime_s=time.perf_counter() - t0)
    if least.status != SolveStatus.OPTIMAL:
        return None
    g = problem.gpu_cost_usd_per_hour(least.replicas)
    # (within the solve's relative gap of the budget the model with it decides)
    if g * (1.0 - max(least.gap or 0.0, options.rel_gap)) > budget + TOL * max(1.0, budget):
        short = g - budget
        return SolveResult(
            status=SolveStatus.INFEASIBLE,
            objective=None,
            gap=None,
            runtime_s=time.perf_counter() - t0,
            solver=least.solver,
            relaxation={"budget": short},
            message=f"fleet limits bind: budget short by {short:.4g}",
        )
    best = least if not problem.operations.active else _solve(free, left(), cache)
    if best.status != SolveStatus.OPTIMAL:
        return None
    spent = problem.gpu_cost_usd_per_hour(best.replicas)
    if spent > budget + TOL * max(1.0, budget):
        return None  # the least-cost fleet is over budget: another one may fit
    binding = best.binding + (("budget",) if spent >= budget - TOL * max(1.0, budget) else ())
    return replace(best, binding=binding, runtime_s=time.perf_counter() - t0)
