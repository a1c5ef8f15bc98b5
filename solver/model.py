"""build_model(): the MILP, assembled from its constraint families in a fixed order."""

from __future__ import annotations

import pulp

from solver.constraints.capacity import define_capacity
from solver.constraints.checkpoint import define_checkpoint
from solver.constraints.configurations import (
    define_configurations,
    define_gpu_types,
    operations_cost,
)
from solver.constraints.demand import define_demand
from solver.constraints.kv_pairs import define_kv_pairs
from solver.constraints.limits import (
    Elastic,
    define_budget,
    define_power,
    define_stock,
    fleet_cost,
)
from solver.constraints.pool_use import define_pool_use
from solver.problem import Objective, Problem
from solver.variables import Variables, create_variables, stock_row

LIMIT_ROWS = ("budget", "power", "stock__", "max_configurations", "max_gpu_types")


def build_model(
    problem: Problem,
    *,
    elastic: Elastic = False,
    goodput_floor_rps: float | None = None,
) -> tuple[pulp.LpProblem, Variables]:
    """The fleet MILP.

    Objective (units): ``min_cost`` minimizes sum_j cost_j n_j plus the operations
    cost (per GPU type and per configuration used, $/hour);
    ``max_goodput`` maximizes sum_k s_k (requests/s served within SLO) and
    is solved in two stages: once for goodput, then at that goodput
    (``goodput_floor_rps``) for the cheapest fleet. ``elastic`` adds a slack
    to every fleet limit (budget, stock, power, configurations, GPU types,
    replicas per pool, the replica minimum) and minimizes the sum of relative
    slacks (slack / limit), which says how far each limit must move for a fleet
    to exist; a frozenset of limit names (``"budget"``, ``"power"``,
    ``"stock__<gpu>"``) adds it to those only, the others held.
    """
    every = elastic is True
    goodput_stage = problem.objective == Objective.MAX_GOODPUT and goodput_floor_rps is None
    sense = pulp.LpMaximize if goodput_stage and not elastic else pulp.LpMinimize
    prob = pulp.LpProblem("fleetplan", sense)
    v = create_variables(prob, problem)
    define_demand(prob, problem, v)
    define_capacity(prob, problem, v)
    define_pool_use(prob, problem, v, every)
    define_budget(prob, problem, v, elastic)
    define_stock(prob, problem, v, elastic)
    define_power(prob, problem, v, elastic)
    define_configurations(prob, problem, v, elastic=every)
    define_gpu_types(prob, problem, v, every)
    define_checkpoint(prob, problem, v)
    define_kv_pairs(prob, problem, v)
    if goodput_floor_rps is not None:
        prob += pulp.lpSum(v.served.values()) >= goodput_floor_rps, "goodput_floor"
    if elastic:
        lim = problem.limits
        scale = {"budget": lim.budget_usd_per_hour or 1.0, "power": lim.power_kw or 1.0}
        for gpu, cap in lim.max_gpus.items():
            scale[stock_row(gpu)] = max(1.0, float(cap))
        scale["max_configurations"] = float(lim.max_configurations or 1)
        scale["max_gpu_types"] = float(lim.max_gpu_types or 1)
        scale["max_replicas_per_pool"] = float(lim.max_replicas_per_pool or 1)
        scale["min_replicas_per_pool"] = float(lim.min_replicas_per_pool)
        prob += pulp.lpSum(var / scale[name] for name, var in v.slack.items())
    elif goodput_stage:
        prob += pulp.lpSum(v.served.values())
    else:
        prob += fleet_cost(problem, v) + operations_cost(problem, v)
    return prob, v
