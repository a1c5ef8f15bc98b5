"""Pool use: links a pool's rate and replicas to its on/off variable y_j.

    r_j <= rate_k * y_j                       pool_rate__j      (requests/s)
    n_j <= max_replicas_j * y_j               pool_replicas__j  (replicas)
    n_j >= min_replicas * y_j                 min_replicas__j   (redundancy)

rate_k (the class's rate) and max_replicas_j (enough replicas to carry the
whole class) come from data; they are the big-M values.
"""

from __future__ import annotations

import pulp

from solver.problem import Problem
from solver.variables import Variables, safe_name


def define_pool_use(prob: pulp.LpProblem, problem: Problem, v: Variables) -> None:
    rate_of = {c.id: c.rate_rps for c in problem.classes}
    min_rep = max(1, problem.limits.min_replicas_per_pool)
    for cand in problem.candidates:
        j = safe_name(cand.id)
        y = v.used[cand.id]
        prob += v.rate[cand.id] <= rate_of[cand.class_id] * y, f"pool_rate__{j}"
        prob += v.replicas[cand.id] <= cand.max_replicas * y, f"pool_replicas__{j}"
        prob += v.replicas[cand.id] >= min_rep * y, f"min_replicas__{j}"
