"""Exact decompositions of the fleet MILP into smaller solves: by class (classes
interact only through fleet limits), by the set of GPU types (operations costs and a
type cap couple classes only through it), and by cases of KV pairing. Each takes the
solver to call on its subproblems (:class:`SolveFn`, :func:`solver.solve.solve`).
"""

from __future__ import annotations

import math
import time
from typing import Protocol

import numpy as np

from solver.backend import TOL
from solver.checks import limits_slack, unservable_classes
from solver.problem import (
    Limits,
    Mode,
    Objective,
    PoolRole,
    Problem,
    SolveResult,
    SolverOptions,
    SolveStatus,
)
from solver.prune import prune_by_cost


class SolveFn(Protocol):
    """:func:`solver.solve.solve`, which the decompositions call on their subproblems."""

    def __call__(
        self, problem: Problem, options: SolverOptions | None = None, cache: dict | None = None
    ) -> SolveResult: ...


#: Most pairing cases :func:`solve_pair_cases` solves one by one (reach sets and their
#: intersections); past it the MILP with the pairing rows is solved instead.
MAX_PAIR_CASES = 32


def solve_pair_cases(
    problem: Problem,
    options: SolverOptions,
    t0: float,
    cache: dict | None,
    *,
    solve: SolveFn,
) -> SolveResult | None:
    """One class with KV pairing rules, solved exactly by cases instead of with the
    pairing rows. A fleet that uses restricted prefill pools (each priced on a link that
    reaches only the decode GPU types ``pairs_with``) may use decode pools only on the
    types in the intersection I of their sets. So: either no restricted prefill pool is
    used (drop those candidates), or, for each set R in the closure of the sets under
    intersection, decode candidates on types in R and the restricted prefill candidates
    whose set contains R. The optimum lies in the case R = I of its own restricted
    pools, and every case's fleet pairs over its priced links; the cheapest feasible
    case is the optimum. None when a case runs out of time, or when the closure exceeds
    :data:`MAX_PAIR_CASES` (the caller then solves with the pairing rows)."""
    from dataclasses import replace as _replace

    restricted = {c.pairs_with for c in problem.candidates if c.pairs_with is not None}
    closure = set(restricted)
    frontier = set(restricted)
    while frontier:
        new = {a & b for a in frontier for b in restricted} - closure - {frozenset()}
        closure |= new
        frontier = new
        if len(closure) > MAX_PAIR_CASES:
            return None
    cases = [tuple(c for c in problem.candidates if c.pairs_with is None)]
    for reach in sorted(closure, key=sorted):
        cases.append(
            tuple(
                c
                for c in problem.candidates
                if (c.pairs_with is None or c.pairs_with >= reach)
                and (c.role != PoolRole.DECODE or c.gpu in reach)
            )
        )
    best: SolveResult | None = None
    statuses = []
    for cands in cases:
        left = options.time_limit_s - (time.perf_counter() - t0)
        if left <= 0.05:
            return None
        sub = _replace(problem, candidates=tuple(_replace(c, pairs_with=None) for c in cands))
        if unservable_classes(sub):
            continue
        r = solve(sub, _replace(options, time_limit_s=left), cache)
        statuses.append(r.status)
        if r.status == SolveStatus.ERROR:
            return None
        if r.status.has_solution and (
            best is None or (r.objective or 0.0) < (best.objective or 0.0)
        ):
            best = r
    if best is None:
        return None  # every case infeasible: the model with the rows explains it
    status = (
        SolveStatus.OPTIMAL
        if all(st in (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE) for st in statuses)
        else SolveStatus.FEASIBLE
    )
    return _replace(best, status=status, runtime_s=time.perf_counter() - t0)


def role_allowed(role: PoolRole, modes: tuple[Mode, ...]) -> bool:
    """A pool role is usable by a class in these modes."""
    if role == PoolRole.AGGREGATED:
        return Mode.AGGREGATED in modes
    return Mode.DISAGGREGATED in modes


def solve_by_class(
    problem: Problem,
    options: SolverOptions,
    t0: float,
    cache: dict | None = None,
    *,
    solve: SolveFn,
) -> SolveResult | None:
    """Solve each class on its own and combine, when that is exact.

    Pools serve one class, so classes interact only through the fleet limits
    (budget, stock, power, configurations). Without those limits the
    per-class optima add up to the fleet optimum; with them, if the combined
    fleet happens to satisfy every limit it is still optimal (the per-class
    problems are a relaxation). Otherwise return None and let the caller
    solve the monolithic model. The combined gap is sum(gap_k x cost_k) /
    sum(cost_k), i.e. (upper - lower bound) / upper bound over the fleet.
    """
    from dataclasses import replace

    results: list[SolveResult] = []
    for cls in problem.classes:
        sub = replace(
            problem,
            classes=(cls,),
            candidates=tuple(
                c
                for c in problem.candidates
                if c.class_id == cls.id and role_allowed(c.role, cls.modes)
            ),
            limits=replace(
                problem.limits,
                budget_usd_per_hour=None,
                max_gpus={},
                power_kw=None,
                max_configurations=None,
                max_gpu_types=None,
            ),
        )
        left = options.time_limit_s - (time.perf_counter() - t0)
        if left <= 0:
            return None
        key = (
            cls,
            sub.candidates,
            problem.limits.min_replicas_per_pool,
            problem.limits.max_replicas_per_pool,
            options.rel_gap,
        )
        r = cache.get(key) if cache is not None else None
        if r is None:
            r = solve(sub, replace(options, time_limit_s=left))
            if cache is not None and r.status.has_solution:
                cache[key] = r
        if not r.status.has_solution:
            return None
        results.append(r)
    replicas: dict[str, int] = {}
    rates: dict[str, float] = {}
    modes: dict[str, Mode] = {}
    served: dict[str, float] = {}
    for r in results:
        replicas.update(r.replicas)
        rates.update(r.rates_rps)
        modes.update(r.modes)
        served.update(r.served_rps)
    slack = limits_slack(problem, replicas)
    if slack is None:
        return None
    costs = [r.objective or 0.0 for r in results]
    total = sum(costs)
    gaps = [r.gap for r in results]
    gap = (
        sum((g or 0.0) * c for g, c in zip(gaps, costs, strict=True)) / total
        if total > 0 and all(g is not None for g in gaps)
        else (None if any(g is None for g in gaps) else 0.0)
    )
    status = (
        SolveStatus.OPTIMAL
        if all(r.status == SolveStatus.OPTIMAL for r in results)
        else SolveStatus.FEASIBLE
    )
    binding = tuple(sorted(k for k, v in slack.items() if v <= TOL * max(1.0, abs(v))))
    return SolveResult(
        status=status,
        objective=total,
        gap=gap,
        runtime_s=time.perf_counter() - t0,
        solver=results[0].solver if results else options.solver,
        replicas=replicas,
        rates_rps=rates,
        modes=modes,
        served_rps=served,
        binding=binding,
        message=f"solved class by class ({len(results)} independent subproblems)",
        num_variables=sum(r.num_variables for r in results),
        num_constraints=sum(r.num_constraints for r in results),
    )


def role_unit_costs(cands: list, tables: dict) -> dict[PoolRole, float]:
    """The cheapest cost of one request/s per role over ``cands`` ($/hour per
    request/s): min_j c_j / e_j with e_j = max_n capacity_j(n) / n, n up to the
    candidate's replica cap (requests/s per replica; ``tables`` caches capacity
    tables by candidate id). Roles without a candidate carrying any rate are absent."""
    from solver.prune import capacity_table

    best_role: dict[PoolRole, float] = {}
    for c in cands:
        if c.id not in tables:
            tables[c.id] = capacity_table(c)
        t = tables[c.id]
        if not len(t):
            continue
        per_replica = float(np.max(t / np.arange(1, len(t) + 1)))
        if per_replica <= 0:
            continue
        unit = c.cost_usd_per_hour_per_replica / per_replica
        best_role[c.role] = min(best_role.get(c.role, math.inf), unit)
    return best_role


def bound_from_unit_costs(cls, best_role: dict[PoolRole, float], ops) -> float:
    """:func:`class_lower_bound` from the per-role unit costs of
    :func:`role_unit_costs` ($/hour): aggregated lambda x unit + one configuration,
    disaggregated lambda x (prefill + decode unit) + two; inf when no mode has both."""
    conf = ops.usd_per_hour_per_configuration
    options = []
    if Mode.AGGREGATED in cls.modes and PoolRole.AGGREGATED in best_role:
        options.append(cls.rate_rps * best_role[PoolRole.AGGREGATED] + conf)
    if Mode.DISAGGREGATED in cls.modes and {PoolRole.PREFILL, PoolRole.DECODE} <= set(best_role):
        options.append(
            cls.rate_rps * (best_role[PoolRole.PREFILL] + best_role[PoolRole.DECODE]) + 2 * conf
        )
    return min(options) if options else math.inf


def class_lower_bound(cls, cands: list, ops, tables: dict) -> float:
    """A lower bound on one class's cost ($/hour) on these candidates, without a MILP:
    every pool j carries at most e_j = max_n capacity_j(n) / n requests/s per replica
    (n up to its replica cap), so carrying the rate lambda in one role costs at
    least lambda x min_j c_j / e_j; aggregated needs one role and one configuration,
    disaggregated prefill and decode (two configurations), each priced at
    ``usd_per_hour_per_configuration``. inf when no mode has candidates."""
    return bound_from_unit_costs(cls, role_unit_costs(cands, tables), ops)


def replace_limits(sub: Limits, lim: Limits, classes: int) -> Limits:
    """Per-class limits plus the configuration cap, which every class must meet on
    its own (exact for one class; necessary, not sufficient, for several)."""
    from dataclasses import replace

    return replace(sub, max_configurations=lim.max_configurations)


def class_limits_only(limits: Limits) -> Limits:
    """The limits that act on one pool at a time (kept in per-class subproblems)."""
    return Limits(
        min_replicas_per_pool=limits.min_replicas_per_pool,
        max_replicas_per_pool=limits.max_replicas_per_pool,
    )


def solve_by_gpu_types(
    problem: Problem,
    options: SolverOptions,
    t0: float,
    cache: dict | None = None,
    *,
    solve: SolveFn,
) -> SolveResult | None:
    """Operations costs and a GPU-type cap couple the classes only through the set S
    of GPU types the fleet runs; for a fixed S the classes are independent again.
    So: branch and bound over S by size m = 1, 2, ...:

        total(S) = usd_per_gpu_type x |S| + sum_k C_k(S)

    with C_k(S) the per-class optimum on GPU types in S (GPU cost plus the class's
    configurations x usd_per_configuration, cost-curve dominance within S:
    :func:`solver.prune.prune_by_cost`; a configuration shared by two classes is
    counted once in the reported cost, per class in the search). Order: every
    single GPU type first (small, fast subproblems: a first fleet), then the
    per-class optima over all types, whose sum bounds every S: a set of size m
    costs at least usd_per_gpu_type x m + sum_k C_k(all). The search stops at the
    first m where that bound reaches the best fleet: optimal (to the subproblems'
    gap). Within a size, a set S is abandoned once its partial sum plus the other
    classes' bounds reaches the best; class k's bound on S is the larger of its cheap
    bound on S (:func:`class_lower_bound`: rate x cheapest $/h per request/s on S's
    types) and its bound over all types (C_k(S) >= C_k(all): S's candidates are a
    subset), and the classes S serves worst (cheap bound on S minus on all types) are
    solved first, so an unpromising set is abandoned after few subproblems. Out of
    time, the best fleet so far is ``feasible`` with the gap to the bound (None before
    the bound is known).

    A configuration cap (``max_configurations``) is checked on each combined fleet
    (sets whose fleet breaks it are skipped), so with it the result is only
    ``feasible``; budget, stock and power go to the monolithic model (None)."""
    from dataclasses import replace
    from itertools import combinations

    lim = problem.limits
    if lim.budget_usd_per_hour is not None or lim.power_kw is not None or lim.max_gpus:
        return None
    ops = problem.operations
    per_type = ops.usd_per_hour_per_gpu_type
    sub_ops = replace(ops, usd_per_hour_per_gpu_type=0.0)
    types = sorted({c.gpu for c in problem.candidates})
    g_max = min(lim.max_gpu_types or len(types), len(types))
    gpu_of = {c.id: c.gpu for c in problem.candidates}
    by_id = {c.id: c for c in problem.candidates}
    per_class = {
        cls.id: [
            c
            for c in problem.candidates
            if c.class_id == cls.id and role_allowed(c.role, cls.modes)
        ]
        for cls in problem.classes
    }
    local: dict = {}
    tables: dict = {}

    def class_result(
        cls, allowed: frozenset[str], cap_s: float | None = None
    ) -> SolveResult | None:
        cands = prune_by_cost(
            tuple(c for c in per_class[cls.id] if c.gpu in allowed),
            cls.rate_rps,
            lim.min_replicas_per_pool,
            lim.max_replicas_per_pool,
            tables,
        )
        # within this problem a candidate id names its data: a cheap key for repeats
        local_key = (cls.id, tuple(c.id for c in cands))
        if local_key in local:
            return local[local_key]
        key = (
            "types",
            cls,
            cands,
            lim.min_replicas_per_pool,
            lim.max_replicas_per_pool,
            lim.max_configurations,
            sub_ops,
        )
        key_rel = (*key, options.rel_gap)
        r = cache.get(key_rel) if cache is not None else None
        if r is None:
            left = options.time_limit_s - (time.perf_counter() - t0)
            if left <= 0.05:
                raise TimeoutError
            sub = Problem(
                classes=(cls,),
                candidates=cands,
                limits=replace_limits(class_limits_only(lim), lim, len(problem.classes)),
                objective=Objective.MIN_COST,
                operations=sub_ops,
            )
            if not cands or unservable_classes(sub):
                local[local_key] = None
                return None
            limit = min(left, cap_s) if cap_s is not None else left
            r = solve(sub, replace(options, time_limit_s=limit, decompose=False))
            if not r.status.has_solution:
                if r.status == SolveStatus.ERROR:
                    if cap_s is not None:
                        return None  # capped: no fleet yet, not a proof of anything
                    raise TimeoutError
                r = None
            elif cache is not None:
                cache[key_rel] = r
        local[local_key] = r
        return r

    def combine(results: list[SolveResult]) -> tuple[float, dict[str, int]] | None:
        replicas: dict[str, int] = {}
        for r in results:
            replicas.update(r.replicas)
        used = [by_id[k] for k, n in replicas.items() if n > 0]
        configs = len({c.config_key or c.id for c in used})
        if lim.max_configurations is not None and configs > lim.max_configurations:
            return None
        if len({c.gpu for c in used}) > g_max:
            return None
        gpu = sum(c.cost_usd_per_hour_per_replica * replicas[c.id] for c in used)
        return gpu + problem.operations_cost_usd_per_hour(replicas), replicas

    best: tuple[float, list[SolveResult]] | None = None
    bound_k: list[float] | None = None
    proved = timed_out = False
    m_reached = 1

    # per class and GPU type, the cheapest $/h per request/s of each role: a set's
    # bound is the minimum over its types (class_lower_bound without re-reading tables)
    units_by_gpu: list[dict[str, dict[PoolRole, float]]] = []
    for cls in problem.classes:
        on_gpu: dict[str, list] = {}
        for c in per_class[cls.id]:
            on_gpu.setdefault(c.gpu, []).append(c)
        units_by_gpu.append({g: role_unit_costs(cs, tables) for g, cs in on_gpu.items()})

    def quick(i: int, allowed: frozenset[str]) -> float:
        """Class i's cheap lower bound on ``allowed``: :func:`class_lower_bound` on the
        class's candidates whose GPU type is in ``allowed`` (inf if no mode has any)."""
        best_role: dict[PoolRole, float] = {}
        for g in allowed:
            for role, unit in units_by_gpu[i].get(g, {}).items():
                if unit < best_role.get(role, math.inf):
                    best_role[role] = unit
        return bound_from_unit_costs(problem.classes[i], best_role, ops)

    def consider(allowed: frozenset[str], m: int) -> None:
        nonlocal best
        n_classes = len(problem.classes)
        results: list[SolveResult] = []
        partial = per_type * m
        order = list(range(n_classes))
        if best is not None:
            cheap = [quick(i, allowed) for i in range(n_classes)]
            if any(math.isinf(b) for b in cheap):
                return  # some class cannot run on this set
            # C_k(S) >= max(its cheap bound on S, its bound over all types)
            low = [max(b, k) for b, k in zip(cheap, bound_k or cheap, strict=True)]
            if partial + sum(low) >= best[0]:
                return  # it cannot beat the best
            # classes this set serves worst first: the partial sum passes the best sooner
            order.sort(key=lambda i: cheap[i] - cheap_k[i], reverse=True)
            left = sum(low)
        for i in order:
            if best is not None:
                if partial + left >= best[0]:
                    return
                left -= low[i]
            r = class_result(problem.classes[i], allowed)
            if r is None:
                return
            results.append(r)
            partial += r.objective or 0.0
        out = combine(results)
        if out is not None and (best is None or out[0] < best[0] - 1e-9):
            best = (out[0], results)

    try:
        # Each class on every GPU type: its lower bound (objective x (1 - gap)), and a
        # fleet; capped so that single GPU types still get their turn: the pass has 0.8 of
        # the time limit, each class the part of it not yet spent over the classes left,
        # so a class solved fast leaves its share to the next (three-class-70b-
        # consistency's agent class needs 4.1 s to prove its optimum; at an even 0.8 x 10
        # s / 3 it stopped at a 5.2% gap, too weak a bound to end the search over GPU-type
        # sets in time, while chat and RAG took 0.7 s). At half the share (0.5)
        # three-class-70b's agent and RAG classes stopped at gaps of 34-46%.
        everything = frozenset(types)
        cheap_k = [quick(i, everything) for i in range(len(problem.classes))]
        if any(math.isinf(b) for b in cheap_k):
            return None  # some class has no mode with candidates: the monolithic model says so
        full = []
        t_full = time.perf_counter()
        for i, cls in enumerate(problem.classes):
            unspent = 0.8 * options.time_limit_s - (time.perf_counter() - t_full)
            cap = max(0.2, unspent / (len(problem.classes) - i))
            full.append(class_result(cls, everything, cap))
        # each class's bound: its MILP optimum x (1 - gap) when solved, else the cheap one
        bound_k = [
            max(cheap_k[i], (r.objective or 0.0) * (1 - r.gap))
            if r is not None and r.gap is not None
            else cheap_k[i]
            for i, r in enumerate(full)
        ]
        if all(r is not None for r in full):
            out = combine(full)  # type: ignore[arg-type]
            if out is not None:
                best = (out[0], full)  # type: ignore[assignment]
        used_first = {gpu_of[k] for r in full if r is not None for k in r.replicas}

        def single_bound(t: str) -> float:
            return sum(quick(i, frozenset([t])) for i in range(len(problem.classes)))

        # most promising first, so that the cheap bound skips the rest
        for g in sorted(types, key=lambda t: (t not in used_first, single_bound(t), t)):
            consider(frozenset([g]), 1)
        if best is None and all(r is None for r in full):
            return None  # nothing serves every class: the monolithic model says why
        for m in range(2, g_max + 1):
            m_reached = m
            if best is not None and per_type * m + sum(bound_k) >= best[0] * (1 - options.rel_gap):
                proved = True
                break
            for subset in combinations(types, m):
                consider(frozenset(subset), m)
        else:
            proved = True
    except TimeoutError:
        timed_out = True
    if best is None:
        return None  # the monolithic model (and its elastic re-solve) reports it
    total, results = best
    replicas: dict[str, int] = {}
    rates: dict[str, float] = {}
    modes: dict[str, Mode] = {}
    served: dict[str, float] = {}
    for r in results:
        replicas.update(r.replicas)
        rates.update(r.rates_rps)
        modes.update(r.modes)
        served.update(r.served_rps)
    gaps = [r.gap for r in results]
    sub_gap = max(gaps) if all(g is not None for g in gaps) else None  # type: ignore[type-var]
    exact = (
        proved and not timed_out and (lim.max_configurations is None or len(problem.classes) == 1)
    )
    if exact and all(r.status == SolveStatus.OPTIMAL for r in results):
        status, gap = SolveStatus.OPTIMAL, sub_gap
    else:
        status = SolveStatus.FEASIBLE
        bound = (per_type * (m_reached if timed_out else 1) + sum(bound_k)) if bound_k else None
        gap = max(0.0, (total - bound) / total) if bound is not None and total > 0 else None
    used_types = {gpu_of[k] for k in replicas}
    binding = []
    if lim.max_gpu_types is not None and len(used_types) >= lim.max_gpu_types:
        binding.append("max_gpu_types")
    configs = {by_id[k].config_key or k for k in replicas}
    if lim.max_configurations is not None and len(configs) >= lim.max_configurations:
        binding.append("max_configurations")
    note = ""
    if timed_out:
        note = "; search stopped at the time limit"
    elif lim.max_configurations is not None:
        note = "; the configuration cap is checked per GPU-type set, not optimized across classes"
    return SolveResult(
        status=status,
        objective=total,
        gap=gap,
        runtime_s=time.perf_counter() - t0,
        solver=results[0].solver if results else options.solver,
        replicas=replicas,
        rates_rps=rates,
        modes=modes,
        served_rps=served,
        binding=tuple(binding),
        message=f"solved by GPU-type set ({len(used_types)} type(s) chosen{note})",
        num_variables=sum(r.num_variables for r in results),
        num_constraints=sum(r.num_constraints for r in results),
    )
