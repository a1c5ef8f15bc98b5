"""The own-or-rent MILP: how many replicas of each pool to own (in whole servers),
to reserve, and to rent on demand in each hour of the day, at the least total cost
over a horizon. Rows in :mod:`solver.constraints.own_rent`; the math in
docs/formulation.md ("Owning and renting over a day's load").

The pools and each hour's replica need come from the planner (the fleet is
sized for the peak hour by the fleet MILP; the need at a lower hour is the fewest
replicas whose capacity carries that hour's rate). Buying everything for the peak
(o = peak need, q = x = 0) and renting everything (o = 0) are both feasible
points, so the optimum is never dearer than either.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pulp

from solver.backend import run_solver, var_value
from solver.constraints.own_rent import define_own_rent, own_rent_cost
from solver.hybrid_problem import HybridGpu, HybridPool, HybridProblem, HybridVariables
from solver.problem import SolverOptions, SolveStatus
from solver.variables import safe_name

__all__ = [
    "HybridGpu",
    "HybridPool",
    "HybridProblem",
    "HybridResult",
    "HybridVariables",
    "build_hybrid_model",
    "solve_hybrid",
]


@dataclass
class HybridResult:
    status: SolveStatus
    total_usd: float | None
    owned_replicas: dict[str, int] = field(default_factory=dict)
    reserved_replicas: dict[str, int] = field(default_factory=dict)
    on_demand_replicas: dict[str, tuple[int, ...]] = field(default_factory=dict)
    servers: dict[str, int] = field(default_factory=dict)
    gap: float | None = None
    runtime_s: float = 0.0
    message: str = ""


def _variables(prob: pulp.LpProblem, problem: HybridProblem) -> HybridVariables:
    v = HybridVariables()
    by_gpu = {g.id: g for g in problem.gpus}
    for g in problem.gpus:
        v.servers[g.id] = (
            prob.add_variable(f"s__{safe_name(g.id)}", lowBound=0, cat="Integer")
            if g.owned_usd_per_server is not None
            else 0.0
        )
    for p in problem.pools:
        g = by_gpu[p.gpu]
        peak = max(p.need_by_hour, default=0)
        name = safe_name(p.id)
        v.owned[p.id] = (
            prob.add_variable(f"o__{name}", lowBound=0, upBound=peak, cat="Integer")
            if g.owned_usd_per_server is not None
            else 0.0
        )
        v.reserved[p.id] = (
            prob.add_variable(f"q__{name}", lowBound=0, upBound=peak, cat="Integer")
            if g.reserved_usd_per_gpu_hour is not None
            else 0.0
        )
        v.on_demand[p.id] = [
            prob.add_variable(f"x__{name}__{h}", lowBound=0) for h in range(len(p.need_by_hour))
        ]
    return v


def build_hybrid_model(problem: HybridProblem) -> tuple[pulp.LpProblem, HybridVariables]:
    """The own-or-rent MILP: minimize :func:`own_rent_cost` subject to
    :func:`define_own_rent`."""
    prob = pulp.LpProblem("own_or_rent", pulp.LpMinimize)
    v = _variables(prob, problem)
    define_own_rent(prob, problem, v)
    prob += own_rent_cost(problem, v)
    return prob, v


def solve_hybrid(problem: HybridProblem, options: SolverOptions | None = None) -> HybridResult:
    """Solve the own-or-rent MILP (HiGHS; gap 0 by default: the model is small)."""
    opts = options or SolverOptions(time_limit_s=10.0, rel_gap=0.0)
    t0 = time.perf_counter()
    prob, v = build_hybrid_model(problem)
    status, gap, _name, msg = run_solver(prob, opts, opts.time_limit_s)
    runtime = time.perf_counter() - t0
    if not status.has_solution:
        return HybridResult(status, None, gap=gap, runtime_s=runtime, message=msg)

    def val(x: pulp.LpVariable | float) -> int:
        return round(var_value(x)) if isinstance(x, pulp.LpVariable) else round(x)

    owned = {p.id: val(v.owned[p.id]) for p in problem.pools}
    reserved = {p.id: val(v.reserved[p.id]) for p in problem.pools}
    on_demand = {
        p.id: tuple(max(0, need - owned[p.id] - reserved[p.id]) for need in p.need_by_hour)
        for p in problem.pools
    }
    servers = {g.id: val(v.servers[g.id]) for g in problem.gpus}
    return HybridResult(
        status,
        float(pulp.value(prob.objective) or 0.0),
        owned,
        reserved,
        on_demand,
        servers,
        gap,
        runtime,
        msg,
    )
