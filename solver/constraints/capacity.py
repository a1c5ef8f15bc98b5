"""Capacity: a pool serves no more than its queueing-aware capacity.

For pool candidate j (class k, n_j replicas, rate r_j in requests/s):

    r_j <= a_{j,i} + b_{j,i} * n_j                       capacity__j__i
        (every cut i: concave limits such as decode slots, always enforced)

    r_j <= a_{j,t} + b_{j,t} * n_j + M_{j,t} (1 - u_{j,t})   queue__j__t
    sum_t u_{j,t} = y_j                                     queue_pick__j
        (chords t of the convex queueing curve; u binary picks one chord;
         M_{j,t} = max(0, rate_k - a_{j,t}) from data)

Units: requests/s; b in requests/s per replica. At the chords' tabulated
replica counts the picked chord is exact; see ``PoolCandidate``.
"""

from __future__ import annotations

import pulp

from solver.problem import Problem
from solver.variables import Variables, safe_name


def define_capacity(prob: pulp.LpProblem, problem: Problem, v: Variables) -> None:
    rate_of = {c.id: c.rate_rps for c in problem.classes}
    for cand in problem.candidates:
        j = safe_name(cand.id)
        r, n = v.rate[cand.id], v.replicas[cand.id]
        for i, cut in enumerate(cand.cuts):
            prob += (
                r - cut.slope_rps_per_replica * n <= cut.intercept_rps,
                f"capacity__{j}__{i}",
            )
        if not cand.chords:
            continue
        picks = []
        for t, chord in enumerate(cand.chords):
            u = prob.add_variable(f"u__{j}__{t}", cat="Binary")
            v.chord_pick.setdefault(cand.id, []).append(u)
            picks.append(u)
            big_m = max(0.0, rate_of[cand.class_id] - chord.intercept_rps)
            prob += (
                r - chord.slope_rps_per_replica * n - big_m * (1 - u) <= chord.intercept_rps,
                f"queue__{j}__{t}",
            )
        prob += pulp.lpSum(picks) == v.used[cand.id], f"queue_pick__{j}"
