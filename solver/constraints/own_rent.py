"""Own or rent, hour by hour (the procurement MILP, :mod:`solver.hybrid`).

    o_j + q_j + x_{j,h} >= need_{j,h}       cover__j__h     (replicas)
    sum_{j on g} tp_j o_j <= G_g s_g         servers__g      (GPUs)

o_j: replicas of pool j owned (integer); q_j: replicas reserved for the whole
term (integer, only with a reserved price); x_{j,h}: replicas rented on demand
in hour h of the day (continuous: at the optimum x = max(0, need - o - q), an
integer); s_g: servers of GPU type g bought (integer, G_g GPUs each: whole
servers, whole NVL72 racks).
"""

from __future__ import annotations

import pulp

from solver.hybrid_problem import HybridProblem, HybridVariables
from solver.variables import safe_name


def define_own_rent(prob: pulp.LpProblem, problem: HybridProblem, v: HybridVariables) -> None:
    """The cover rows (every hour's need met by owned, reserved and on-demand
    replicas) and the server rows (owned GPUs fit in the servers bought)."""
    for p in problem.pools:
        for h, need in enumerate(p.need_by_hour):
            prob += (
                v.owned[p.id] + v.reserved[p.id] + v.on_demand[p.id][h] >= need,
                f"cover__{safe_name(p.id)}__{h}",
            )
    for g in problem.gpus:
        prob += (
            pulp.lpSum(p.gpus_per_replica * v.owned[p.id] for p in problem.pools if p.gpu == g.id)
            <= g.gpus_per_server * v.servers[g.id],
            f"servers__{safe_name(g.id)}",
        )


def own_rent_cost(problem: HybridProblem, v: HybridVariables) -> pulp.LpAffineExpression:
    """Total cost over the horizon, US dollars:
    sum_g s_g x owned_usd_per_server_g
    + sum_j q_j x tp_j x reserved $/GPU-h_g x horizon hours
    + sum_{j,h} x_{j,h} x tp_j x on-demand $/GPU-h_g x horizon days
    (hour h of the day recurs once per day of the horizon)."""
    by_gpu = {g.id: g for g in problem.gpus}
    terms = []
    for g in problem.gpus:
        if g.owned_usd_per_server is not None:
            terms.append(g.owned_usd_per_server * v.servers[g.id])
    for p in problem.pools:
        g = by_gpu[p.gpu]
        if g.reserved_usd_per_gpu_hour is not None:
            terms.append(
                p.gpus_per_replica
                * g.reserved_usd_per_gpu_hour
                * problem.horizon_hours
                * v.reserved[p.id]
            )
        rate = p.gpus_per_replica * g.on_demand_usd_per_gpu_hour * problem.horizon_days
        terms.extend(rate * x for x in v.on_demand[p.id])
    return pulp.lpSum(terms)
