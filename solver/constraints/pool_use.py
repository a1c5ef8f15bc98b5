"""Pool use: links a pool's rate and replicas to its on/off variable y_j.

    r_j <= rate_k * y_j                       pool_rate__j      (requests/s)
    n_j <= max_replicas_j * y_j               pool_replicas__j  (replicas)
    n_j >= min_replicas * y_j (- slack_min)   min_replicas__j   (redundancy)
    n_j <= max_replicas_per_pool (+ slack)    replica_cap__j    (when set)

rate_k (the class's rate) and max_replicas_j (enough replicas to carry the
whole class) come from data; they are the big-M values. The two slacks
(one shared by all pools each) exist only in the elastic re-solve that
explains an infeasible request.
"""

from __future__ import annotations

import pulp

from solver.problem import Problem
from solver.variables import Variables, safe_name


def define_pool_use(
    prob: pulp.LpProblem, problem: Problem, v: Variables, elastic: bool = False
) -> None:
    rate_of = {c.id: c.rate_rps for c in problem.classes}
    min_rep = max(1, problem.limits.min_replicas_per_pool)
    cap = problem.limits.max_replicas_per_pool
    slack_min = slack_cap = 0
    if elastic and min_rep > 1:
        slack_min = prob.add_variable("slack__min_replicas_per_pool", lowBound=0)
        v.slack["min_replicas_per_pool"] = slack_min
    if elastic and cap is not None:
        slack_cap = prob.add_variable("slack__max_replicas_per_pool", lowBound=0)
        v.slack["max_replicas_per_pool"] = slack_cap
    for cand in problem.candidates:
        j = safe_name(cand.id)
        y = v.used[cand.id]
        prob += v.rate[cand.id] <= rate_of[cand.class_id] * y, f"pool_rate__{j}"
        prob += v.replicas[cand.id] <= cand.max_replicas * y, f"pool_replicas__{j}"
        prob += v.replicas[cand.id] >= min_rep * y - slack_min, f"min_replicas__{j}"
        if cap is not None and cap < cand.max_replicas:
            prob += v.replicas[cand.id] <= cap + slack_cap, f"replica_cap__{j}"
