"""The MILP on tiny instances with hand-computed optima, and against brute force."""

from __future__ import annotations

import random
from dataclasses import replace

import pulp
import pytest
from brute_solver import brute_force_cost

from solver.model import build_model
from solver.problem import (
    CapacityCut,
    ClassDemand,
    Limits,
    Mode,
    Objective,
    Operations,
    PoolCandidate,
    PoolRole,
    Problem,
    Segment,
    SolverOptions,
    SolveStatus,
)
from solver.solve import solve


def linear(cap_per_replica: float) -> tuple[CapacityCut, ...]:
    return (CapacityCut(0.0, cap_per_replica),)


def cand(cid, cls, role, gpu="g", cost=1.0, cap=1.0, tp=1, power=1.0, max_rep=50, cuts=None):
    return PoolCandidate(
        id=cid,
        class_id=cls,
        role=role,
        gpu=gpu,
        gpus_per_replica=tp,
        cost_usd_per_hour_per_replica=cost,
        power_kw_per_replica=power,
        cuts=cuts or linear(cap),
        max_replicas=max_rep,
        config_key=f"{role}-{gpu}-{tp}",
    )


def test_single_pool_rounds_up_replicas():
    # 10 rps at 3 rps per replica needs ceil(10/3) = 4 replicas at $2 each = $8/h.
    p = Problem(
        classes=(ClassDemand("a", 10.0),),
        candidates=(cand("agg", "a", PoolRole.AGGREGATED, cost=2.0, cap=3.0),),
    )
    r = solve(p)
    assert r.status == SolveStatus.OPTIMAL
    assert r.replicas == {"agg": 4}
    assert r.objective == pytest.approx(8.0)
    assert r.modes["a"] == Mode.AGGREGATED


def test_disaggregation_chosen_when_cheaper():
    # Aggregated: 1 rps per $3 replica -> 10 rps costs $30.
    # Disaggregated: prefill 5 rps per $2 (2 replicas, $4) + decode 2 rps per $2 (5, $10) = $14.
    p = Problem(
        classes=(ClassDemand("a", 10.0),),
        candidates=(
            cand("agg", "a", PoolRole.AGGREGATED, cost=3.0, cap=1.0),
            cand("pre", "a", PoolRole.PREFILL, cost=2.0, cap=5.0),
            cand("dec", "a", PoolRole.DECODE, cost=2.0, cap=2.0),
        ),
    )
    r = solve(p)
    assert r.objective == pytest.approx(14.0)
    assert r.modes["a"] == Mode.DISAGGREGATED
    assert r.replicas == {"pre": 2, "dec": 5}
    # Forbidding disaggregation falls back to the aggregated pool.
    p2 = Problem(
        classes=(ClassDemand("a", 10.0, modes=(Mode.AGGREGATED,)),),
        candidates=p.candidates,
    )
    assert solve(p2).objective == pytest.approx(30.0)


def test_concave_cuts_all_hold():
    # capacity(n) = min(n, 0.5 + 0.5 n): 1 -> 1.0, 2 -> 1.5, 3 -> 2.0
    cuts = (CapacityCut(0.0, 1.0), CapacityCut(0.5, 0.5))
    c = cand("agg", "a", PoolRole.AGGREGATED, cuts=cuts)
    assert [c.capacity_rps(n) for n in (1, 2, 3)] == pytest.approx([1.0, 1.5, 2.0])
    p = Problem(classes=(ClassDemand("a", 1.6),), candidates=(c,))
    assert solve(p).replicas == {"agg": 3}


def segments_of(f, points, end):
    """Segments [a_s, a_{s+1}] (last to ``end``) with the chord of f through (a, a+1)."""
    pts = list(points)
    out = []
    for i, a in enumerate(pts):
        hi = pts[i + 1] if i + 1 < len(pts) else end
        slope = f(a + 1) - f(a)
        out.append(Segment(a, hi, f(a) - slope * a, slope))
    return tuple(out)


def test_convex_queue_curve_gives_economies_of_scale():
    # f(n) = n - sqrt(n) (square-root staffing): f(1)=0, f(2)=0.586, f(4)=2, f(9)=6
    def f(n):
        return n - n**0.5

    c = cand("pre", "a", PoolRole.AGGREGATED, cuts=(), max_rep=40)
    c = PoolCandidate(**{**c.__dict__, "cuts": (), "segments": segments_of(f, range(0, 40), 40)})
    for n in (1, 2, 4, 9, 16):
        assert c.capacity_rps(n) == pytest.approx(f(n))
    for rate, want in ((0.5, 2), (2.0, 4), (5.9, 9), (6.0, 9), (6.1, 10)):
        r = solve(Problem(classes=(ClassDemand("a", rate),), candidates=(c,)))
        assert r.replicas == {"pre": want}, rate
    # Sparse segments starting at 0, 1, 3, 7: exact at 0, 1, 2, 3, 4, 7, 8; below f elsewhere.
    sparse = PoolCandidate(**{**c.__dict__, "segments": segments_of(f, (0, 1, 3, 7), 40)})
    assert sparse.capacity_rps(8) == pytest.approx(f(8))
    assert sparse.capacity_rps(6) <= f(6)
    r = solve(Problem(classes=(ClassDemand("a", f(8) - 1e-6),), candidates=(sparse,)))
    assert r.replicas == {"pre": 8}


def test_budget_infeasible_reports_shortfall():
    p = Problem(
        classes=(ClassDemand("a", 10.0),),
        candidates=(cand("agg", "a", PoolRole.AGGREGATED, cost=2.0, cap=3.0),),
        limits=Limits(budget_usd_per_hour=5.0),
    )
    r = solve(p)
    assert r.status == SolveStatus.INFEASIBLE
    assert r.relaxation["budget"] == pytest.approx(3.0)
    assert "budget" in r.message


def test_stock_forces_second_gpu_type_and_binds():
    p = Problem(
        classes=(ClassDemand("a", 10.0),),
        candidates=(
            cand("cheap", "a", PoolRole.AGGREGATED, gpu="x", cost=1.0, cap=1.0),
            cand("dear", "a", PoolRole.AGGREGATED, gpu="y", cost=5.0, cap=2.0),
        ),
        limits=Limits(max_gpus={"x": 4}),
    )
    r = solve(p)
    # 4 cheap replicas carry 4 rps; 6 rps remain on 3 dear ones: 4 + 15 = 19.
    assert r.objective == pytest.approx(19.0)
    assert r.replicas == {"cheap": 4, "dear": 3}
    assert "stock__x" in r.binding


def test_min_replicas_and_max_configurations():
    cands = (
        cand("a1", "a", PoolRole.AGGREGATED, gpu="x", cost=1.0, cap=10.0),
        cand("b1", "b", PoolRole.AGGREGATED, gpu="y", cost=1.0, cap=10.0),
        cand("b2", "b", PoolRole.AGGREGATED, gpu="x", cost=1.5, cap=10.0),
    )
    base = Problem(classes=(ClassDemand("a", 1.0), ClassDemand("b", 1.0)), candidates=cands)
    assert solve(base).objective == pytest.approx(2.0)
    two = Problem(base.classes, cands, Limits(min_replicas_per_pool=2))
    assert solve(two).objective == pytest.approx(4.0)
    one_cfg = Problem(base.classes, cands, Limits(max_configurations=1))
    r = solve(one_cfg)
    assert r.objective == pytest.approx(2.5)  # both classes on GPU x
    assert set(r.replicas) == {"a1", "b2"}


def test_power_limit():
    p = Problem(
        classes=(ClassDemand("a", 4.0),),
        candidates=(
            cand("hot", "a", PoolRole.AGGREGATED, gpu="x", cost=1.0, cap=1.0, power=2.0),
            cand("cool", "a", PoolRole.AGGREGATED, gpu="y", cost=2.0, cap=1.0, power=0.5),
        ),
        limits=Limits(power_kw=5.0),
    )
    r = solve(p)
    # hot h, cool c: h + c = 4, 2h + 0.5c <= 5 -> h <= 2; cost h + 2c minimal at h=2: 2 + 4.
    assert r.objective == pytest.approx(6.0)
    assert "power" in r.binding


def test_class_without_candidates_is_infeasible_with_reason():
    p = Problem(
        classes=(ClassDemand("a", 1.0), ClassDemand("b", 1.0)),
        candidates=(cand("a1", "a", PoolRole.AGGREGATED),),
    )
    r = solve(p)
    assert r.status == SolveStatus.INFEASIBLE
    assert "b" in r.message


def test_max_goodput_under_budget():
    p = Problem(
        classes=(ClassDemand("a", 10.0), ClassDemand("b", 10.0)),
        candidates=(
            cand("a1", "a", PoolRole.AGGREGATED, cost=1.0, cap=2.0),
            cand("b1", "b", PoolRole.AGGREGATED, cost=1.0, cap=1.0),
        ),
        limits=Limits(budget_usd_per_hour=6.0),
        objective=Objective.MAX_GOODPUT,
    )
    r = solve(p)
    assert r.status == SolveStatus.OPTIMAL
    # 5 replicas of a1 serve all 10 rps of a; the 6th dollar buys 1 rps of b.
    assert r.served_rps["a"] == pytest.approx(10.0, rel=1e-5)
    assert r.served_rps["b"] == pytest.approx(1.0, rel=1e-5)
    assert r.objective == pytest.approx(11.0, rel=1e-5)


def test_rows_are_named_by_family():
    p = Problem(
        classes=(ClassDemand("chat", 10.0),),
        candidates=(
            cand("agg-h100", "chat", PoolRole.AGGREGATED),
            cand("pre-h100", "chat", PoolRole.PREFILL),
            cand("dec-h100", "chat", PoolRole.DECODE),
        ),
        limits=Limits(budget_usd_per_hour=100, power_kw=10, max_gpus={"g": 3}),
    )
    prob, _ = build_model(p)
    names = {c.name for c in prob.constraints()}
    for expected in (
        "demand_aggregated__chat",
        "demand_prefill__chat",
        "demand_decode__chat",
        "mode_disaggregated__chat",
        "capacity__agg_h100__0",
        "pool_rate__pre_h100",
        "min_replicas__dec_h100",
        "budget",
        "power",
        "stock__g",
    ):
        assert expected in names
    cap = prob.get_constraint_by_name("capacity__agg_h100__0")
    assert cap.sense == pulp.LpConstraintLE


# ---------------------------------------------------------------- brute force


@pytest.mark.parametrize("seed", range(12))
def test_milp_matches_brute_force_on_random_instances(seed):
    rng = random.Random(seed)
    classes = tuple(ClassDemand(f"k{i}", round(rng.uniform(0.5, 4.0), 2)) for i in range(2))
    cands = []
    roles = [PoolRole.AGGREGATED, PoolRole.PREFILL, PoolRole.DECODE]
    for k in classes:
        for role in roles:
            gpu = rng.choice(["x", "y"])
            slope = rng.uniform(0.6, 2.5)
            cuts = (CapacityCut(0.3, slope),)
            rho = rng.uniform(0.3, 0.9)

            def f(n, slope=slope, rho=rho):
                return slope * n * (1 - (1 - rho) / (n**0.5)) if n > 0 else 0.0

            cands.append(
                cand(
                    f"{k.id}-{role}",
                    k.id,
                    role,
                    gpu=gpu,
                    cost=round(rng.uniform(1, 5), 2),
                    cuts=cuts,
                    tp=rng.choice([1, 2]),
                    max_rep=4,
                )
            )
            if rng.random() < 0.6:
                cands[-1] = PoolCandidate(
                    **{
                        **cands[-1].__dict__,
                        "segments": segments_of(f, rng.choice([(0, 1, 2, 3), (0, 2)]), 4),
                    }
                )
    limits = Limits(
        budget_usd_per_hour=rng.choice([None, 30.0]),
        max_gpus=rng.choice([{}, {"x": 6}]),
        min_replicas_per_pool=rng.choice([1, 1, 2]),
    )
    p = Problem(classes, tuple(cands), limits)
    expected = brute_force_cost(p, 4)
    r = solve(p, SolverOptions(rel_gap=0.0))
    if expected is None:
        assert r.status == SolveStatus.INFEASIBLE
    else:
        assert r.status == SolveStatus.OPTIMAL
        assert r.objective == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_class_by_class_equals_monolithic(seed):
    rng = random.Random(100 + seed)
    classes = tuple(ClassDemand(f"k{i}", rng.uniform(0.5, 6.0)) for i in range(3))
    cands = []
    for k in classes:
        for role in (PoolRole.AGGREGATED, PoolRole.PREFILL, PoolRole.DECODE):
            for gpu in ("x", "y"):
                cands.append(
                    cand(
                        f"{k.id}-{role}-{gpu}",
                        k.id,
                        role,
                        gpu=gpu,
                        cost=rng.uniform(1, 4),
                        cap=rng.uniform(0.5, 3.0),
                        max_rep=20,
                    )
                )
    for limits in (Limits(), Limits(budget_usd_per_hour=1e6), Limits(max_gpus={"x": 3})):
        p = Problem(classes, tuple(cands), limits)
        split = solve(p, SolverOptions(rel_gap=0.0))
        mono = solve(p, SolverOptions(rel_gap=0.0, decompose=False))
        assert split.status == mono.status == SolveStatus.OPTIMAL
        assert split.objective == pytest.approx(mono.objective, abs=1e-6)
        if limits.max_gpus:
            assert sum(n for c, n in split.replicas.items() if c.endswith("-x")) <= 3


def test_cbc_fallback_agrees():
    p = Problem(
        classes=(ClassDemand("a", 10.0),),
        candidates=(
            cand("agg", "a", PoolRole.AGGREGATED, cost=3.0, cap=1.0),
            cand("pre", "a", PoolRole.PREFILL, cost=2.0, cap=5.0),
            cand("dec", "a", PoolRole.DECODE, cost=2.0, cap=2.0),
        ),
    )
    r = solve(p, SolverOptions(solver="cbc"))
    assert r.solver == "cbc"
    assert r.status == SolveStatus.OPTIMAL
    assert r.objective == pytest.approx(14.0)


def test_disaggregated_pairs_share_one_checkpoint():
    def c(cid, role, fmt, cost, cap):
        base = cand(cid, "a", role, cost=cost, cap=cap)
        return PoolCandidate(**{**base.__dict__, "checkpoint": fmt})

    # Cheapest mix would be prefill in fp8 and decode in bf16; they cannot pair.
    p = Problem(
        classes=(ClassDemand("a", 10.0, modes=(Mode.DISAGGREGATED,)),),
        candidates=(
            c("pre8", PoolRole.PREFILL, "fp8", 1.0, 10.0),
            c("pre16", PoolRole.PREFILL, "bf16", 3.0, 10.0),
            c("dec8", PoolRole.DECODE, "fp8", 3.0, 10.0),
            c("dec16", PoolRole.DECODE, "bf16", 1.0, 10.0),
        ),
    )
    r = solve(p)
    assert r.objective == pytest.approx(4.0)
    assert set(r.replicas) in ({"pre8", "dec8"}, {"pre16", "dec16"})
    names = {con.name for con in build_model(p)[0].constraints()}
    assert "checkpoint_pick__a" in names and "checkpoint_use__pre8" in names


def test_vectorized_capacity_curve_is_the_scalar_capacity():
    """solver.prune.capacity_curve (numpy over n) equals PoolCandidate.capacity_rps
    at every n, on the screened candidates of a real request (cuts and queueing
    segments alike)."""
    import numpy as np

    from catalog.loader import load_catalog
    from planner.candidates import screen_candidates
    from planner.problem_build import parse_request
    from planner.request import resolve_request
    from solver.prune import capacity_curve, capacity_table

    cat = load_catalog()
    req = {
        "model": "llama-3.1-8b",
        "traffic": {
            "rate_rps": 40,
            "classes": [{"workload": "chat", "share": 0.7}, {"workload": "rag", "share": 0.3}],
        },
        "candidates": {"gpus": ["h100-sxm5-80gb", "l40s"], "tp": [1, 2]},
    }
    sc = screen_candidates(resolve_request(parse_request(req), cat), cat)
    pcs = [c.to_pool_candidate() for c in sc.candidates]
    assert pcs and any(pc.segments for pc in pcs)
    for pc in pcs:
        scalar = np.array([pc.capacity_rps(n) for n in range(1, pc.max_replicas + 1)])
        np.testing.assert_allclose(capacity_curve(pc), scalar, rtol=1e-12, atol=1e-9)
        assert np.all(np.diff(capacity_table(pc)) >= 0)


# ------------------------------------------------- fast formulation and search (issue 14)


@pytest.mark.parametrize("rate", [0.5, 1.0, 2.0, 2.6, 3.9])
def test_negative_chord_keeps_its_segment_rate(rate):
    """A segment whose chord is negative at its start keeps its rate variable (the
    projection that drops it needs a_s + b_s lo_s >= 0); the optimum is brute force's."""
    from solver.constraints.capacity import chords_nonnegative

    segs = (Segment(0, 1, 0.0, 1.0), Segment(1, 4, -2.0, 1.5))
    pool = PoolCandidate(**{**cand("p", "a", PoolRole.AGGREGATED, cost=1.0).__dict__})
    pool = PoolCandidate(**{**pool.__dict__, "cuts": (), "segments": segs, "max_replicas": 4})
    assert not chords_nonnegative(pool)
    p = Problem((ClassDemand("a", rate, (Mode.AGGREGATED,)),), (pool,))
    prob, _ = build_model(p)
    assert prob.get_constraint_by_name("segment_cap__p__1") is not None
    r = solve(p, SolverOptions(rel_gap=0.0))
    assert r.objective == pytest.approx(brute_force_cost(p, 4), abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_gpu_type_search_equals_monolithic_with_operations_costs(seed):
    """With per-GPU-type and per-configuration costs the GPU-type-set search (its
    cheap and all-types bounds, classes worst-served first) finds the monolithic
    model's optimum."""
    from solver.problem import Operations

    rng = random.Random(300 + seed)
    classes = tuple(ClassDemand(f"k{i}", rng.uniform(0.5, 6.0)) for i in range(3))
    cands = []
    for k in classes:
        for role in (PoolRole.AGGREGATED, PoolRole.PREFILL, PoolRole.DECODE):
            for gpu in ("x", "y", "z"):
                slope, rho = rng.uniform(0.6, 2.5), rng.uniform(0.3, 0.9)

                def f(n, slope=slope, rho=rho):
                    return slope * n * (1 - (1 - rho) / n**0.5) if n > 0 else 0.0

                base = cand(
                    f"{k.id}-{role}-{gpu}", k.id, role, gpu=gpu, cost=rng.uniform(1, 4), max_rep=8
                )
                cands.append(
                    PoolCandidate(
                        **{
                            **base.__dict__,
                            "cuts": (),
                            "segments": segments_of(f, (0, 1, 2, 3, 4, 6), 8),
                            # one configuration per class: the search prices a
                            # configuration per class (docs/formulation.md)
                            "config_key": f"{k.id}-{role}-{gpu}",
                        }
                    )
                )
    ops = Operations(
        usd_per_hour_per_gpu_type=rng.choice([1.0, 3.0]), usd_per_hour_per_configuration=0.5
    )
    p = Problem(classes, tuple(cands), Limits(), operations=ops)
    split = solve(p, SolverOptions(rel_gap=0.0))
    mono = solve(p, SolverOptions(rel_gap=0.0, decompose=False, time_limit_s=60))
    assert split.status == mono.status == SolveStatus.OPTIMAL
    assert split.objective == pytest.approx(mono.objective, abs=1e-6)


def _split_prefill():
    """Two prefill candidates of one configuration (cost 2, 1 and 0.9 requests/s per
    replica), a decode one, 9.5 requests/s, and a solution splitting the prefill 9 + 1."""
    from solver.problem import SolveResult

    a = cand("pre@a", "c", PoolRole.PREFILL, cost=2.0, cap=1.0)
    b = cand("pre@b", "c", PoolRole.PREFILL, cost=2.0, cap=0.9)
    dec = cand("dec", "c", PoolRole.DECODE, cost=1.0, cap=5.0)
    p = Problem(classes=(ClassDemand("c", 9.5),), candidates=(a, b, dec))
    split = SolveResult(
        status=SolveStatus.OPTIMAL,
        objective=22.0,
        gap=0.0,
        runtime_s=0.0,
        solver="test",
        replicas={"pre@a": 9, "pre@b": 1, "dec": 2},
        rates_rps={"pre@a": 9.0, "pre@b": 0.5, "dec": 9.5},
    )
    return a, b, dec, p, split


def test_split_pools_of_one_configuration_are_merged():
    """merge_split_pools: replicas of one class, role and engine configuration spread
    over candidates (a prefill pool priced over two KV links) go to the one that can
    carry them all, at equal cost; else they stay split."""
    from dataclasses import replace

    from solver.checks import merge_split_pools

    a, b, dec, p, split = _split_prefill()
    got = merge_split_pools(p, split)
    # 10 replicas of pre@a carry 10 >= 9.5 rps: one pool, same cost
    assert got.replicas == {"pre@a": 10, "dec": 2}
    assert got.rates_rps == {"pre@a": pytest.approx(9.5), "dec": 9.5}

    def cost(problem, replicas):
        by = {c.id: c for c in problem.candidates}
        return sum(by[k].cost_usd_per_hour_per_replica * n for k, n in replicas.items())

    assert cost(p, got.replicas) == cost(p, split.replicas) == 22.0
    # the request's replica cap per pool is a limit the split may be there for
    limited = replace(p, limits=Limits(max_replicas_per_pool=9))
    assert merge_split_pools(limited, split) is split
    # the faster of two that can carry it all (more capacity at the merged count)
    fast = replace(p, candidates=(a, replace(b, cuts=linear(1.2)), dec))
    assert merge_split_pools(fast, split).replicas == {"pre@b": 10, "dec": 2}
    # pre@a at most 9 replicas: pre@b carries 10 x 0.9 = 9 < 9.5 rps either, so no merge
    capped = replace(p, candidates=(replace(a, max_replicas=9), b, dec))
    assert merge_split_pools(capped, split) is split
    # ... but at 9.0 rps it does (the larger pool cannot, the other can)
    lighter = replace(split, rates_rps={"pre@a": 8.5, "pre@b": 0.5, "dec": 9.0})
    assert merge_split_pools(capped, lighter).replicas == {"pre@b": 10, "dec": 2}
    # a KV link that does not reach the decode GPU type: not that one, the other
    unpaired = replace(p, candidates=(replace(a, pairs_with=frozenset({"h"})), b, dec))
    assert merge_split_pools(unpaired, lighter).replicas == {"pre@b": 10, "dec": 2}
    assert merge_split_pools(p, lighter).replicas == {"pre@a": 10, "dec": 2}
    # another cost per replica (not the same deployment's price): left as solved
    dear = replace(p, candidates=(a, replace(b, cost_usd_per_hour_per_replica=2.5), dec))
    assert merge_split_pools(dear, split) is split
    # other configurations, or no solution: untouched
    other = replace(p, candidates=(a, replace(b, config_key="prefill-g-2"), dec))
    assert merge_split_pools(other, split) is split
    none = replace(split, status=SolveStatus.INFEASIBLE)
    assert merge_split_pools(p, none) is none


def test_solve_returns_merged_pools(monkeypatch):
    """solver.solve applies merge_split_pools to what the MILP returns."""
    import solver.solve as ss

    *_, p, split = _split_prefill()
    monkeypatch.setattr(ss, "_solve", lambda problem, options=None, cache=None: split)
    assert ss.solve(p).replicas == {"pre@a": 10, "dec": 2}


def test_a_highs_solve_error_is_solved_again_by_cbc(monkeypatch):
    """HiGHS may reject its own MIP optimum ("Solve error": postsolve left a primal
    infeasibility at its tolerance, seen on an elastic re-solve); run_solver then solves
    the model with CBC instead of reporting no answer."""
    import highspy

    from solver.backend import run_solver

    p = Problem(
        classes=(ClassDemand("a", 10.0),),
        candidates=(cand("agg", "a", PoolRole.AGGREGATED, cost=2.0, cap=3.0),),
    )
    prob, v = build_model(p)
    monkeypatch.setattr(
        highspy.Highs, "getModelStatus", lambda self: highspy.HighsModelStatus.kSolveError
    )
    import solver.backend as sb

    limits: list[tuple[str, float]] = []
    real_cmd = sb._solver_cmd

    def recording(options, time_limit_s, presolve=True):
        limits.append((options.solver, time_limit_s))
        return real_cmd(options, time_limit_s, presolve)

    monkeypatch.setattr(sb, "_solver_cmd", recording)
    status, _, name, msg = run_solver(prob, SolverOptions(), 5.0)
    assert (status, name) == (SolveStatus.OPTIMAL, "cbc")
    assert "HiGHS solve error; solved by CBC" in msg
    assert v.replicas["agg"].value() == 4
    # CBC gets the time HiGHS left, not the whole limit again
    assert [s for s, _ in limits] == ["highs", "cbc"]
    assert limits[1][1] < limits[0][1] == 5.0
    # none left: an error, not a second solve
    limits.clear()
    status, _, _, msg = run_solver(prob, SolverOptions(), 0.0)
    assert status == SolveStatus.ERROR and "no time left for CBC" in msg
    assert [s for s, _ in limits] == ["highs"]


def test_gpu_type_search_carries_a_fast_class_share_to_the_next():
    """solve_by_gpu_types: the first pass (each class on every GPU type) has 0.8 of the
    time limit; each class is capped at the part not yet spent over the classes left, so
    what a fast class leaves goes to the next, and the pass never takes more than its
    0.8 (the rest is the single GPU types' and the sets')."""
    import time

    from solver.decompose import solve_by_gpu_types
    from solver.problem import Operations

    classes = tuple(ClassDemand(f"k{i}", 5.0) for i in range(3))
    cands = tuple(
        cand(f"{k.id}-{g}", k.id, PoolRole.AGGREGATED, gpu=g, cost=c, cap=1.0)
        for k in classes
        for g, c in (("g1", 1.0), ("g2", 1.1))
    )
    p = Problem(classes=classes, candidates=cands, operations=Operations(20.0, 5.0))
    limits: list[float] = []

    def recording(sub, options):
        limits.append(options.time_limit_s)
        return solve(sub, options)

    opts = SolverOptions(time_limit_s=3.0)
    got = solve_by_gpu_types(p, opts, time.perf_counter(), None, solve=recording)
    assert got is not None and got.status == SolveStatus.OPTIMAL
    first = limits[:3]
    # 0.8 x 3 s / 3 for the first; each later one at least that (what was not spent)
    assert first[0] == pytest.approx(0.8, abs=0.05)
    assert first[1] >= first[0] - 1e-9 and first[2] >= first[1] - 1e-9
    assert first[2] <= 0.8 * 3.0


def _ops_problem(budget):
    # class a: 10 rps; "x" at $1 per 1 rps, "y" at $0.9 per 1 rps on another GPU type; with
    # $5/h per GPU type, two classes on one type beat each on its cheapest
    return Problem(
        classes=(ClassDemand("a", 10.0), ClassDemand("b", 10.0)),
        candidates=(
            cand("ax", "a", PoolRole.AGGREGATED, gpu="x", cost=1.0, cap=1.0),
            cand("ay", "a", PoolRole.AGGREGATED, gpu="y", cost=0.9, cap=1.0),
            cand("bx", "b", PoolRole.AGGREGATED, gpu="x", cost=1.0, cap=1.0),
        ),
        limits=Limits(budget_usd_per_hour=budget),
        operations=Operations(usd_per_hour_per_gpu_type=5.0),
    )


def test_a_short_budget_is_answered_with_the_least_gpu_cost_it_misses():
    # the least GPU cost is $19/h (ay + bx, two GPU types), whatever operations cost: the
    # budget (GPU cost only) is short by exactly $19 - B, without the elastic re-solve
    r = solve(_ops_problem(15.0))
    assert r.status == SolveStatus.INFEASIBLE
    assert r.relaxation == {"budget": pytest.approx(4.0)}
    assert "budget short by 4" in r.message
    # a budget the least-cost fleet fits: that fleet (all on x, $20 GPUs + $5 ops), binding
    r = solve(_ops_problem(20.0))
    assert r.status == SolveStatus.OPTIMAL
    assert r.replicas == {"ax": 10, "bx": 10}
    assert "budget" in r.binding
    # between the two: the least-cost fleet ($20 GPUs) is over, the cheaper-GPU one
    # ($19 GPUs + $10 ops) fits: the model with the budget row decides
    r = solve(_ops_problem(19.5))
    assert r.status == SolveStatus.OPTIMAL
    assert r.replicas == {"ay": 10, "bx": 10}
    # far over: the same fleet as without a budget, not binding
    r = solve(_ops_problem(1000.0))
    assert r.replicas == {"ax": 10, "bx": 10} and "budget" not in r.binding


def test_max_goodput_budget_binds_when_what_is_left_buys_no_replica():
    # $6.5/h: five a1 and one b1 use $6; the $0.5 left buys no replica, b is short
    p = Problem(
        classes=(ClassDemand("a", 10.0), ClassDemand("b", 10.0)),
        candidates=(
            cand("a1", "a", PoolRole.AGGREGATED, cost=1.0, cap=2.0),
            cand("b1", "b", PoolRole.AGGREGATED, cost=1.0, cap=1.0),
        ),
        limits=Limits(budget_usd_per_hour=6.5),
        objective=Objective.MAX_GOODPUT,
    )
    r = solve(p)
    assert r.served_rps["b"] == pytest.approx(1.0, rel=1e-5)
    assert r.binding == ("budget",)
    # every class served: nothing binds
    r = solve(replace(p, limits=Limits(budget_usd_per_hour=100.0)))
    assert r.served_rps == {"a": pytest.approx(10.0), "b": pytest.approx(10.0)}
    assert r.binding == ()


def test_an_infeasible_fleet_says_how_far_each_stock_alone_must_move():
    # 10 rps; x: 1 rps per GPU, 4 in stock; y: 2 rps per GPU, 1 in stock: 6 rps at most
    p = Problem(
        classes=(ClassDemand("a", 10.0),),
        candidates=(
            cand("cx", "a", PoolRole.AGGREGATED, gpu="x", cost=1.0, cap=1.0),
            cand("cy", "a", PoolRole.AGGREGATED, gpu="y", cost=5.0, cap=2.0),
        ),
        limits=Limits(max_gpus={"x": 4, "y": 1}),
    )
    r = solve(p)
    assert r.status == SolveStatus.INFEASIBLE
    assert r.relaxation == {"stock__x": pytest.approx(4.0)}  # least relative move
    # either stock alone: 4 more x, or 2 more y
    assert r.relaxation_alone == {"stock__x": pytest.approx(4.0), "stock__y": pytest.approx(2.0)}
    # one limit: nothing more to say than the relaxation
    one = solve(replace(p, candidates=p.candidates[:1], limits=Limits(max_gpus={"x": 4})))
    assert one.status == SolveStatus.INFEASIBLE and one.relaxation_alone == {}


def test_max_goodput_budget_is_not_binding_when_something_else_stops_the_fleet():
    one = (cand("a1", "a", PoolRole.AGGREGATED, cost=1.0, cap=1.0),)
    goodput = Objective.MAX_GOODPUT
    for p in (
        # a replica cap per pool, a candidate's own cap, a class nothing can serve
        Problem((ClassDemand("a", 10.0),), one, Limits(100.0, max_replicas_per_pool=3), goodput),
        Problem(
            (ClassDemand("a", 10.0),),
            (cand("a1", "a", PoolRole.AGGREGATED, cost=1.0, cap=1.0, max_rep=4),),
            Limits(100.0),
            goodput,
        ),
        Problem((ClassDemand("a", 10.0), ClassDemand("b", 5.0)), one, Limits(100.0), goodput),
    ):
        r = solve(p)
        assert r.status == SolveStatus.OPTIMAL and "budget" not in r.binding, p.limits
