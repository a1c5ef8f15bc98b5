"""Buying for a mix that will move: one fleet that serves every scenario.

Procurement buys GPUs once; the traffic mix then moves (80/20 chat/agent now,
50/50 or 20/80 next year). Given scenarios s (each a full :class:`Problem`
over the same GPU types), the robust model buys G_g GPUs of each type g and,
per scenario, assigns them to pools and roles freely (a GPU bought for decode
in one scenario may prefill in another):

    min   sum_g price_g * G_g                                   ($/hour)
    s.t.  every scenario's own rows (demand, capacity, pool use,
          configurations), with its variables prefixed by the scenario
    sum_{j in J_s, gpu_j = g} tp_j * n_{j,s} <= G_g          fleet__s__g   (GPUs)
    G_g <= max_gpus_g                                        stock__g      (GPUs)
    sum_g price_g * G_g <= budget                            budget        ($/hour)
    sum_g power_g * G_g <= power_kw                          power         (kW)

price_g and power_g are per GPU (a replica's cost and power over its TP).
Scenario weights do not change what is bought (every scenario must be
served); they weight the scenarios' costs in the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import pulp

from solver.backend import run_solver, var_value
from solver.constraints.capacity import define_capacity
from solver.constraints.checkpoint import define_checkpoint
from solver.constraints.configurations import define_configurations
from solver.constraints.demand import define_demand
from solver.constraints.kv_pairs import define_kv_pairs
from solver.constraints.pool_use import define_pool_use
from solver.problem import (
    MIN_SOLVE_TIME_S,
    Limits,
    Mode,
    Objective,
    Problem,
    SolverOptions,
    SolveStatus,
)
from solver.variables import Variables, create_variables, safe_name, stock_row


@dataclass(frozen=True)
class Scenario:
    name: str
    problem: Problem
    weight: float = 1.0


@dataclass(frozen=True)
class ScenarioAssignment:
    name: str
    replicas: dict[str, int]  # candidate id (unprefixed) -> replicas
    rates_rps: dict[str, float]
    modes: dict[str, Mode]
    gpus_by_type: dict[str, int]


@dataclass(frozen=True)
class RobustResult:
    status: SolveStatus
    objective: float | None  # $/hour of the GPUs bought
    gap: float | None
    runtime_s: float
    solver: str
    gpus_bought: dict[str, int] = field(default_factory=dict)
    assignments: tuple[ScenarioAssignment, ...] = ()
    binding: tuple[str, ...] = ()
    message: str = ""
    num_variables: int = 0
    num_constraints: int = 0


def _tagged(tag: str, problem: Problem) -> Problem:
    """The scenario's problem with class and candidate ids prefixed by ``tag``."""
    classes = tuple(replace(c, id=f"{tag}:{c.id}") for c in problem.classes)
    cands = tuple(
        replace(
            c,
            id=f"{tag}:{c.id}",
            class_id=f"{tag}:{c.class_id}",
            config_key=f"{tag}:{c.config_key or c.id}",
        )
        for c in problem.candidates
    )
    return replace(
        problem,
        classes=classes,
        candidates=cands,
        limits=Limits(
            min_replicas_per_pool=problem.limits.min_replicas_per_pool,
            max_configurations=problem.limits.max_configurations,
        ),
    )


def gpu_prices(scenarios: list[Scenario]) -> tuple[dict[str, float], dict[str, float]]:
    """$/GPU-hour and kW per GPU of every GPU type, from the candidates."""
    price: dict[str, float] = {}
    power: dict[str, float] = {}
    for sc in scenarios:
        for c in sc.problem.candidates:
            price[c.gpu] = c.cost_usd_per_hour_per_replica / c.gpus_per_replica
            power[c.gpu] = c.power_kw_per_replica / c.gpus_per_replica
    return price, power


def solve_robust(
    scenarios: list[Scenario], limits: Limits, options: SolverOptions | None = None
) -> RobustResult:
    """Cheapest set of GPUs per type that serves every scenario at its SLOs."""
    options = options or SolverOptions()
    t0 = time.perf_counter()
    prob = pulp.LpProblem("fleetplan_robust", pulp.LpMinimize)
    price, power = gpu_prices(scenarios)
    bought = {
        g: prob.add_variable(f"G__{safe_name(g)}", lowBound=0, cat="Integer") for g in sorted(price)
    }
    per: list[tuple[Scenario, Problem, Variables]] = []
    for i, sc in enumerate(scenarios):
        tag = f"s{i}"
        tagged = _tagged(tag, replace(sc.problem, objective=Objective.MIN_COST))
        v = create_variables(prob, tagged)
        define_demand(prob, tagged, v)
        define_capacity(prob, tagged, v)
        define_pool_use(prob, tagged, v)
        define_configurations(prob, tagged, v, tag)
        define_checkpoint(prob, tagged, v)
        define_kv_pairs(prob, tagged, v)
        for g, var in bought.items():
            used = pulp.lpSum(
                c.gpus_per_replica * v.replicas[c.id] for c in tagged.candidates if c.gpu == g
            )
            prob += used - var <= 0, f"fleet__{tag}__{safe_name(g)}"
        per.append((sc, tagged, v))
    for g, cap in sorted(limits.max_gpus.items()):
        if g in bought:
            prob += bought[g] <= cap, stock_row(g)
    cost = pulp.lpSum(price[g] * var for g, var in bought.items())
    if limits.budget_usd_per_hour is not None:
        prob += cost <= limits.budget_usd_per_hour, "budget"
    if limits.power_kw is not None:
        prob += pulp.lpSum(power[g] * var for g, var in bought.items()) <= limits.power_kw, "power"
    prob += cost
    # the time limit covers building the model too (12 scenarios took seconds to build,
    # and the whole solve ran 14.2 s against a 10 s limit)
    left = max(MIN_SOLVE_TIME_S, options.time_limit_s - (time.perf_counter() - t0))
    status, gap, name, msg = run_solver(prob, options, left)
    runtime = time.perf_counter() - t0
    if not status.has_solution:
        return RobustResult(
            status=status,
            objective=None,
            gap=None,
            runtime_s=runtime,
            solver=name,
            message=msg or "no single fleet serves every scenario within the limits",
            num_variables=prob.numVariables(),
            num_constraints=prob.numConstraints(),
        )
    assignments = []
    for sc, tagged, v in per:
        prefix = len(tagged.classes[0].id.split(":")[0]) + 1 if tagged.classes else 0
        reps = {cid[prefix:]: round(var_value(x)) for cid, x in v.replicas.items()}
        reps = {k: n for k, n in reps.items() if n > 0}
        rates = {cid[prefix:]: var_value(x) for cid, x in v.rate.items() if var_value(x) > 1e-9}
        modes = {
            k[prefix:]: (Mode.DISAGGREGATED if var_value(m) > 0.5 else Mode.AGGREGATED)
            for k, m in v.disagg.items()
        }
        by_id = {c.id[prefix:]: c for c in tagged.candidates}
        gpus: dict[str, int] = {}
        for cid, n in reps.items():
            c = by_id[cid]
            gpus[c.gpu] = gpus.get(c.gpu, 0) + n * c.gpus_per_replica
        assignments.append(ScenarioAssignment(sc.name, reps, rates, modes, gpus))
    gpus_bought = {
        g: round(var_value(var)) for g, var in bought.items() if round(var_value(var)) > 0
    }
    binding = []
    for con in prob.constraints():
        slack = -(con.value() or 0.0)
        limit_row = con.name.startswith(("budget", "power", "stock__"))
        if limit_row and slack <= 1e-6 * max(1.0, abs(con.constant)):
            binding.append(con.name)
    return RobustResult(
        status=status,
        objective=sum(price[g] * n for g, n in gpus_bought.items()),
        gap=gap,
        runtime_s=runtime,
        solver=name,
        gpus_bought=gpus_bought,
        assignments=tuple(assignments),
        binding=tuple(sorted(binding)),
        message=msg,
        num_variables=prob.numVariables(),
        num_constraints=prob.numConstraints(),
    )
