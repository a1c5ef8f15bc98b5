"""One fleet for several scenarios: GPUs bought once, re-assigned per scenario."""

from __future__ import annotations

import pytest

from solver.problem import (
    CapacityCut,
    ClassDemand,
    Limits,
    PoolCandidate,
    PoolRole,
    Problem,
    SolveStatus,
)
from solver.robust import Scenario, solve_robust
from solver.solve import solve


def cand(cid, cls, role, gpu, price, cap, tp=1, max_rep=50):
    return PoolCandidate(
        id=cid,
        class_id=cls,
        role=role,
        gpu=gpu,
        gpus_per_replica=tp,
        cost_usd_per_hour_per_replica=price * tp,
        power_kw_per_replica=0.7 * tp,
        cuts=(CapacityCut(0.0, cap),),
        max_replicas=max_rep,
        config_key=f"{role}-{gpu}",
    )


def test_shared_gpus_serve_both_scenarios_for_less_than_separate_fleets():
    # Scenario 1 (6 rps): x is cheapest (3 GPUs, $3); y also works (2 GPUs, $4).
    # Scenario 2 (2 rps): only y (2 GPUs, $4). Robust: buy 2 y and run scenario 1 on them.
    s1 = Problem(
        classes=(ClassDemand("k", 6.0),),
        candidates=(
            cand("ax", "k", PoolRole.AGGREGATED, "x", 1.0, 2.0),
            cand("ay", "k", PoolRole.AGGREGATED, "y", 2.0, 3.0),
        ),
    )
    s2 = Problem(
        classes=(ClassDemand("k", 2.0),),
        candidates=(cand("ay", "k", PoolRole.AGGREGATED, "y", 2.0, 1.0),),
    )
    assert solve(s1).objective == pytest.approx(3.0)
    assert solve(s2).objective == pytest.approx(4.0)
    r = solve_robust([Scenario("now", s1, 0.5), Scenario("later", s2, 0.5)], Limits())
    assert r.status == SolveStatus.OPTIMAL
    assert r.objective == pytest.approx(4.0)
    assert r.gpus_bought == {"y": 2}
    now, later = r.assignments
    assert now.replicas == {"ay": 2} and later.replicas == {"ay": 2}


def test_gpus_move_between_roles_across_scenarios():
    # Same GPU type: scenario A is decode-heavy, B prefill-heavy; 4 GPUs serve both.
    def prob(pre_cap, dec_cap):
        return Problem(
            classes=(ClassDemand("k", 4.0),),
            candidates=(
                cand("pre", "k", PoolRole.PREFILL, "x", 1.0, pre_cap),
                cand("dec", "k", PoolRole.DECODE, "x", 1.0, dec_cap),
            ),
        )

    a, b = prob(4.0, 4.0 / 3.0), prob(4.0 / 3.0, 4.0)  # A: 1 pre + 3 dec; B: 3 pre + 1 dec
    r = solve_robust([Scenario("a", a), Scenario("b", b)], Limits())
    assert r.gpus_bought == {"x": 4}
    ra, rb = r.assignments
    assert ra.replicas == {"pre": 1, "dec": 3}
    assert rb.replicas == {"pre": 3, "dec": 1}


def test_robust_limits_and_infeasibility():
    s = Problem(
        classes=(ClassDemand("k", 6.0),),
        candidates=(cand("ax", "k", PoolRole.AGGREGATED, "x", 1.0, 2.0),),
    )
    assert solve_robust([Scenario("s", s)], Limits(max_gpus={"x": 3})).objective == pytest.approx(
        3.0
    )
    r = solve_robust([Scenario("s", s)], Limits(budget_usd_per_hour=2.0))
    assert r.status == SolveStatus.INFEASIBLE
    assert r.objective is None
