"""Demand: every class's served rate is split over pools of its mode.

For class k with served rate s_k (requests/s; = rate_k under min_cost) and
disaggregated rate D_k:

    sum_{j in AGG(k)} r_j     = s_k - D_k      demand_aggregated__k
    sum_{j in PRE(k)} r_j     = D_k            demand_prefill__k
    sum_{j in DEC(k)} r_j     = D_k            demand_decode__k
    D_k       <= rate_k * m_k                  mode_disaggregated__k
    s_k - D_k <= rate_k * (1 - m_k)            mode_aggregated__k

m_k in {0,1} is the class's mode (1 = disaggregated), so a class runs in one
mode; the two mode rows exist only when both modes are possible. Units:
requests/s.
"""

from __future__ import annotations

import pulp

from solver.problem import PoolRole, Problem
from solver.variables import Variables, safe_name


def define_demand(prob: pulp.LpProblem, problem: Problem, v: Variables) -> None:
    for cls in problem.classes:
        k = safe_name(cls.id)
        s_k, d_k, m_k = v.served[cls.id], v.disagg_rate[cls.id], v.disagg[cls.id]

        def total(role: PoolRole, class_id: str = cls.id) -> pulp.LpAffineExpression:
            return pulp.lpSum(v.rate[c.id] for c in problem.candidates_of(class_id, role))

        prob += total(PoolRole.AGGREGATED) == s_k - d_k, f"demand_aggregated__{k}"
        prob += total(PoolRole.PREFILL) == d_k, f"demand_prefill__{k}"
        prob += total(PoolRole.DECODE) == d_k, f"demand_decode__{k}"
        if isinstance(m_k, pulp.LpVariable):
            prob += d_k <= cls.rate_rps * m_k, f"mode_disaggregated__{k}"
            prob += s_k - d_k <= cls.rate_rps * (1 - m_k), f"mode_aggregated__{k}"
