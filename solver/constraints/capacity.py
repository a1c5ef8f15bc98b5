"""Capacity: a pool serves no more than its queueing-aware capacity.

For pool candidate j (class k, n_j replicas, rate r_j in requests/s):

    r_j <= a_{j,i} * y_j + b_{j,i} * n_j                    capacity__j__i
        (every cut i: concave limits such as decode slots, enforced when the
         pool is used; y_j = 0 forces r_j = 0 through pool_rate__j anyway, and
         a negative intercept must not force replicas onto an unused pool)

and, when j has a convex queueing curve given as segments s = [lo_s, hi_s]
with chords (a_s, b_s), the multiple-choice (convex hull) formulation with
binary w_{j,s}, replicas nu_{j,s} >= 0 and rates rho_{j,s} >= 0 per segment:

    sum_s w_{j,s} = y_j                                     segment_pick__j
    lo_s * w_{j,s} <= nu_{j,s} <= hi_s * w_{j,s}            segment_lo__j__s, segment_hi__j__s
    rho_{j,s} <= a_s * w_{j,s} + b_s * nu_{j,s}             segment_cap__j__s
    n_j = sum_s nu_{j,s}                                    segment_replicas__j
    r_j <= sum_s rho_{j,s}                                  segment_rate__j

Units: requests/s; b in requests/s per replica; replicas are counts. At the
segment starts (and one past them) the chord is exact; see ``PoolCandidate``.
"""

from __future__ import annotations

import pulp

from solver.problem import Problem
from solver.variables import Variables, safe_name


def define_capacity(prob: pulp.LpProblem, problem: Problem, v: Variables) -> None:
    for cand in problem.candidates:
        j = safe_name(cand.id)
        r, n = v.rate[cand.id], v.replicas[cand.id]
        for i, cut in enumerate(cand.cuts):
            prob += (
                r - cut.slope_rps_per_replica * n - cut.intercept_rps * v.used[cand.id] <= 0,
                f"capacity__{j}__{i}",
            )
        if not cand.segments:
            continue
        picks, nus, rhos = [], [], []
        for s, seg in enumerate(cand.segments):
            w = prob.add_variable(f"w__{j}__{s}", cat="Binary")
            nu = prob.add_variable(f"nu__{j}__{s}", lowBound=0, upBound=seg.end_replicas)
            rho = prob.add_variable(f"rho__{j}__{s}", lowBound=0)
            picks.append(w)
            nus.append(nu)
            rhos.append(rho)
            prob += nu - seg.start_replicas * w >= 0, f"segment_lo__{j}__{s}"
            prob += nu - seg.end_replicas * w <= 0, f"segment_hi__{j}__{s}"
            prob += (
                rho - seg.intercept_rps * w - seg.slope_rps_per_replica * nu <= 0,
                f"segment_cap__{j}__{s}",
            )
        v.segment_pick[cand.id] = picks
        prob += pulp.lpSum(picks) == v.used[cand.id], f"segment_pick__{j}"
        prob += n == pulp.lpSum(nus), f"segment_replicas__{j}"
        prob += r <= pulp.lpSum(rhos), f"segment_rate__{j}"
