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

When every segment's chord is non-negative at its start (a_s + b_s lo_s >= 0, b_s >= 0:
what ``segments_for`` builds from an increasing curve), the per-segment rates are
dropped and the rate row reads the chords directly (``segment_rate__j``):

    r_j <= sum_s (a_s * w_{j,s} + b_s * nu_{j,s})

Same feasible set and same LP relaxation: given w and nu, rho_{j,s} = a_s w_{j,s} +
b_s nu_{j,s} is feasible (it is >= 0 because nu_{j,s} >= lo_s w_{j,s}), and any
feasible rho is at most that, so projecting rho out leaves exactly this row. One
variable and one row fewer per segment.

Units: requests/s; b in requests/s per replica; replicas are counts. At the
segment starts (and one past them) the chord is exact; see ``PoolCandidate``.
Rows are built from (variable, coefficient) lists, not PuLP's operators (their
intermediate expressions made model building cost more than the solve).
"""

from __future__ import annotations

import pulp

from solver.problem import PoolCandidate, Problem
from solver.variables import Variables, safe_name

_LE, _GE, _EQ = pulp.LpConstraintLE, pulp.LpConstraintGE, pulp.LpConstraintEQ


def add_row(
    prob: pulp.LpProblem,
    terms: list[tuple[pulp.LpVariable, float]],
    sense: int,
    rhs: float,
    name: str,
) -> None:
    """Add the row ``sum(coef x var) <sense> rhs`` named ``name`` to ``prob``."""
    prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, rhs))


def chords_nonnegative(cand: PoolCandidate) -> bool:
    """Every segment's chord is >= 0 over its range: a_s + b_s lo_s >= 0 and b_s >= 0
    (then the per-segment rate variables are redundant, see the module doc)."""
    return all(
        s.slope_rps_per_replica >= 0
        and s.intercept_rps + s.slope_rps_per_replica * s.start_replicas >= 0
        for s in cand.segments
    )


def define_capacity(prob: pulp.LpProblem, problem: Problem, v: Variables) -> None:
    for cand in problem.candidates:
        j = safe_name(cand.id)
        r, n, y = v.rate[cand.id], v.replicas[cand.id], v.used[cand.id]
        for i, cut in enumerate(cand.cuts):
            add_row(
                prob,
                [(r, 1.0), (n, -cut.slope_rps_per_replica), (y, -cut.intercept_rps)],
                _LE,
                0.0,
                f"capacity__{j}__{i}",
            )
        if not cand.segments:
            continue
        direct = chords_nonnegative(cand)
        picks = []
        replicas: list[tuple[pulp.LpVariable, float]] = [(n, 1.0)]
        rate: list[tuple[pulp.LpVariable, float]] = [(r, 1.0)]
        for s, seg in enumerate(cand.segments):
            w = prob.add_variable(f"w__{j}__{s}", cat="Binary")
            nu = prob.add_variable(f"nu__{j}__{s}", lowBound=0, upBound=seg.end_replicas)
            picks.append(w)
            replicas.append((nu, -1.0))
            if seg.start_replicas > 0:
                add_row(
                    prob, [(nu, 1.0), (w, -seg.start_replicas)], _GE, 0.0, f"segment_lo__{j}__{s}"
                )
            add_row(prob, [(nu, 1.0), (w, -seg.end_replicas)], _LE, 0.0, f"segment_hi__{j}__{s}")
            if direct:
                rate += [(w, -seg.intercept_rps), (nu, -seg.slope_rps_per_replica)]
                continue
            rho = prob.add_variable(f"rho__{j}__{s}", lowBound=0)
            rate.append((rho, -1.0))
            add_row(
                prob,
                [(rho, 1.0), (w, -seg.intercept_rps), (nu, -seg.slope_rps_per_replica)],
                _LE,
                0.0,
                f"segment_cap__{j}__{s}",
            )
        v.segment_pick[cand.id] = picks
        add_row(prob, [(w, 1.0) for w in picks] + [(y, -1.0)], _EQ, 0.0, f"segment_pick__{j}")
        add_row(prob, replicas, _EQ, 0.0, f"segment_replicas__{j}")
        add_row(prob, rate, _LE, 0.0, f"segment_rate__{j}")
