"""Skipping aggregated configurations by their floor leaves every plan as it was
(issue 14, "Fast plans"; the proof: planner.candidates.bounds).

The proof rests on the cost model's monotonicity (a step grows with the batch, the
chunk and the chunk's context; a mixed step is no shorter than a decode step;
``b / decode_step(b)`` grows): held here by hypothesis on catalog replicas. Then the
floor is checked against every aggregated candidate of fully screened requests, and
screening with and without skipping must hand the MILP the same candidates, in the
same order, with the same figures, and so the same plan (examples and random small
instances, solved both ways).
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.loader import load_catalog
from planner import queueing as q
from planner import roofline as rl
from planner.candidates import (
    ClassFigures,
    attach_capacities,
    attach_capacity,
    screen_candidates,
    speculative_replica,
)
from planner.candidates.bounds import aggregated_usd_per_rps_floor
from planner.candidates.links import replica_cost_usd_per_hour
from planner.candidates.prune import BATCH_MIN_CANDIDATES
from planner.capacity import decode_slots
from planner.problem_build import build_problem, parse_request
from planner.request import resolve_request
from solver.problem import PoolRole, SolverOptions
from solver.solve import solve

CAT = load_catalog()
ROOT = Path(__file__).resolve().parent.parent
REPLICAS = [
    rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", tp=1, dtype="fp8", kv_dtype="fp8"),
    rl.build_replica(CAT, "llama-3.1-8b", "l40s", tp=2, dtype="bf16", kv_dtype="bf16"),
    rl.build_replica(CAT, "llama-3.1-70b", "h200-sxm-141gb", tp=2, dtype="fp8", kv_dtype="fp8"),
    rl.build_replica(CAT, "llama-3.1-70b", "l40s", tp=8, dtype="fp8", kv_dtype="fp8"),
]


@settings(max_examples=300, deadline=None)
@given(
    replica=st.sampled_from(REPLICAS),
    b=st.integers(1, 512),
    db=st.integers(0, 512),
    ctx=st.floats(10.0, 30_000.0),
    chunk=st.sampled_from([0, 64, 256, 512, 1024, 2048, 4096, 8192]),
    dchunk=st.sampled_from([0, 64, 512, 4096]),
    cctx=st.floats(0.0, 30_000.0),
    dcctx=st.floats(0.0, 30_000.0),
)
def test_steps_are_monotone_as_the_floor_assumes(
    replica, b, db, ctx, chunk, dchunk, cctx, dcctx
) -> None:
    step = rl.mixed_step_ms(replica, b, ctx, chunk, cctx)
    tol = 1e-12 * step
    assert rl.mixed_step_ms(replica, b + db, ctx, chunk, cctx) >= step - tol
    assert rl.mixed_step_ms(replica, b, ctx, chunk + dchunk, cctx) >= step - tol
    assert rl.mixed_step_ms(replica, b, ctx, chunk, cctx + dcctx) >= step - tol
    assert step >= rl.decode_step_ms(replica, b, ctx) * (1 - 1e-12)
    # decode requests/s per replica grow with the batch: b / step(b), decode and mixed
    d1, d2 = rl.decode_step_ms(replica, b, ctx), rl.decode_step_ms(replica, b + db, ctx)
    assert (b + db) / d2 >= b / d1 * (1 - 1e-12)
    m2 = rl.mixed_step_ms(replica, b + db, ctx, chunk, cctx)
    assert (b + db) / m2 >= b / step * (1 - 1e-12)


def _examples() -> list[dict]:
    docs = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        doc = doc.get("base", doc)
        if doc.get("scenarios") or path.name == "robust-mix-shift.yaml":
            continue
        docs.append(doc)
    return docs


def _fingerprint(c) -> tuple:
    return (
        c.id,
        c.config,
        c.step_ms,
        c.service_mean_ms,
        c.service_cv2,
        c.service_q_ms,
        c.transfer_exposed_ms,
        c.max_replicas,
        c.segments,
        c.cuts,
        c.effective_prefix_hit_rate,
        c.host_hit_share,
        c.risk_derate,
    )


@pytest.fixture(scope="module")
def both_ways():
    """(request, screening with skipping, without) for every example."""
    out = []
    for doc in _examples():
        req = resolve_request(parse_request(doc), CAT)
        out.append(
            (req, screen_candidates(req, CAT), screen_candidates(req, CAT, skip_by_floor=False))
        )
    return out


def test_floor_is_below_every_aggregated_candidate(both_ways) -> None:
    checked = 0
    for req, _, full in both_ways:
        classes = {c.name: c for c in req.classes}
        for c in full.candidates + full.pruned:
            if c.config.role != PoolRole.AGGREGATED:
                continue
            cls = classes[c.class_name]
            fig = ClassFigures.of(cls)
            base = rl.build_replica(
                CAT,
                req.model_id,
                c.config.gpu,
                tp=c.config.tp,
                dtype=c.config.dtype,
                kv_dtype=c.config.kv_dtype,
                mfu=req.request.efficiency.prefill_mfu,
                mbu=req.request.efficiency.decode_mbu,
                overlap_factor=req.request.efficiency.overlap_factor,
                pp=c.config.pp,
                dp=c.config.dp,
                ep=c.config.ep,
            )
            replica = speculative_replica(CAT, cls, base)
            for mixed_slots in (False, True):
                floor = aggregated_usd_per_rps_floor(
                    cls,
                    fig,
                    replica,
                    c.config.chunk_budget_tokens,
                    decode_slots(replica, fig.decode_context_tokens, cls.slo.tpot_ms),
                    replica_cost_usd_per_hour(CAT, c.config.gpu, replica.gpus),
                    c.risk_derate,
                    mixed_slots=mixed_slots,
                )
                assert floor is not None
                assert floor <= c.usd_per_rps * (1 + 1e-9), (c.id, mixed_slots)
            checked += 1
    assert checked > 100


def test_skipping_hands_the_milp_the_same_candidates(both_ways) -> None:
    skipped = 0
    for _, fast, full in both_ways:
        assert [_fingerprint(c) for c in fast.candidates] == [
            _fingerprint(c) for c in full.candidates
        ]
        assert [_fingerprint(c) for c in fast.cross_dominated] == [
            _fingerprint(c) for c in full.cross_dominated
        ]
        assert fast.considered == full.considered
        # a skipped configuration is recorded as dominated, with its floor and the
        # kept configurations that beat it; what was not skipped is as before
        new = [r for r in fast.rejections if r not in full.rejections]
        assert all(r.reason == "dominated" and "at least $" in r.detail for r in new)
        full_pruned = {c.id for c in full.pruned}
        assert {c.id for c in fast.pruned} <= full_pruned
        # rejected for TPOT at batch 1 without screening: the screening's rejections
        tpot = [r for r in full.rejections if r.reason == "tpot_unreachable"]
        assert [r for r in fast.rejections if r.reason == "tpot_unreachable"] == tpot
        skipped += len(new)
    assert skipped > 0


GPUS = ["h100-sxm5-80gb", "l40s", "a100-sxm-80gb", "h200-sxm-141gb", "mi300x"]


def _random_request(seed: int) -> dict:
    rng = random.Random(seed)
    workloads = rng.sample(["chat", "rag", "code-completion", "summarization", "agent"], 2)
    shares = [rng.uniform(0.2, 0.8)]
    return {
        "model": "llama-3.1-8b",
        "traffic": {
            "rate_rps": round(rng.uniform(2.0, 60.0), 1),
            "classes": [
                {"workload": workloads[0], "share": shares[0]},
                {"workload": workloads[1], "share": 1.0 - shares[0]},
            ],
        },
        "candidates": {
            "gpus": rng.sample(
                ["h100-sxm5-80gb", "l40s", "a100-sxm-80gb", "h200-sxm-141gb", "mi300x"], 3
            ),
            "dtypes": rng.sample(["fp8", "bf16"], rng.randint(1, 2)),
            "chunk_budgets": sorted(rng.sample([256, 512, 1024, 2048, 4096], 3)),
        },
    }


@pytest.mark.parametrize("seed", range(6))
def test_a_skipped_configuration_is_never_in_an_optimal_plan(seed) -> None:
    """Random small instances, solved on both screenings: the same optimum and pools."""
    req = resolve_request(parse_request(_random_request(seed)), CAT)
    fast = screen_candidates(req, CAT)
    full = screen_candidates(req, CAT, skip_by_floor=False)
    opts = SolverOptions(time_limit_s=30, rel_gap=0.0)
    a, b = solve(build_problem(req, fast), opts), solve(build_problem(req, full), opts)
    assert a.status == b.status
    assert a.objective == pytest.approx(b.objective, rel=1e-9)
    assert {k: v for k, v in a.replicas.items() if v} == {k: v for k, v in b.replicas.items() if v}
    # no configuration left unscreened is in the optimal plan of the full screening
    skipped = {r for r in fast.rejections if r.reason == "dominated"}
    used = {
        (
            c.class_name,
            c.config.gpu,
            c.config.tp,
            c.config.dtype.value,
            c.config.chunk_budget_tokens,
        )
        for c in full.candidates
        if b.replicas.get(c.id, 0) > 0 and c.config.role == PoolRole.AGGREGATED
    }
    assert not {(r.class_name, r.gpu, r.tp, r.dtype, r.chunk_budget_tokens) for r in skipped} & used


# ------------------------------------------------- batched queueing root searches


@settings(max_examples=200, deadline=None)
@given(
    servers=st.lists(st.integers(1, 3000), min_size=1, max_size=40),
    service_s=st.floats(1e-3, 10.0),
    quantile=st.sampled_from([0.5, 0.9, 0.95, 0.99, 0.999]),
    budget_s=st.floats(1e-4, 30.0),
    cs2=st.floats(0.0, 4.0),
    ca2=st.floats(0.05, 4.0),
)
def test_batched_root_search_agrees_with_brentq(
    servers, service_s, quantile, budget_s, cs2, ca2
) -> None:
    """max_utilization_for_wait_batch is the scalar brentq's root within 2e-12 (brentq's
    own absolute tolerance, 1e-12, plus the bisection's width)."""
    k = len(servers)
    got = q.max_utilization_for_wait_batch(
        np.array(servers, dtype=float),
        np.full(k, service_s),
        np.full(k, quantile),
        np.full(k, budget_s),
        np.full(k, cs2),
        np.full(k, ca2),
    )
    for n, rho in zip(servers, got.tolist(), strict=True):
        ref = q.max_utilization_for_wait(n, service_s, quantile, budget_s, cs2, ca2)
        assert abs(rho - ref) <= 2e-12, (n, rho, ref)


def test_batched_capacity_rows_equal_the_scalar_ones() -> None:
    """attach_capacities (batched) gives every candidate the replica cap, segments and
    cuts attach_capacity (scalar) does, within 1e-9 relative."""
    req = resolve_request(parse_request(_random_request(3)), CAT)
    sc = screen_candidates(req, CAT, cross_gpu_prune=False)
    cands = sc.candidates + [c for c in sc.pruned if c.segments]
    scalar = [copy.copy(c) for c in cands]
    batched = [copy.copy(c) for c in cands]
    want = [attach_capacity(c) for c in scalar]
    got = attach_capacities(batched * (1 + BATCH_MIN_CANDIDATES // max(len(batched), 1)))
    assert [type(g) for g in got[: len(want)]] == [type(w) for w in want]
    for a, b in zip(scalar, batched, strict=True):
        assert a.max_replicas == b.max_replicas
        assert len(a.segments) == len(b.segments)
        for x, y in zip(a.segments, b.segments, strict=True):
            # the rows' capacities (requests/s) at each segment's ends
            assert (x.start_replicas, x.end_replicas) == (y.start_replicas, y.end_replicas)
            for n in (x.start_replicas, x.end_replicas):
                want_rps = x.intercept_rps + x.slope_rps_per_replica * n
                got_rps = y.intercept_rps + y.slope_rps_per_replica * n
                assert got_rps == pytest.approx(want_rps, rel=1e-9, abs=1e-9)
        assert a.cuts == b.cuts  # decode slots: closed form, no root search
