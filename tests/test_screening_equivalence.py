"""Fast screening equals the scalar reference, float for float (issue 14, "Fast plans").

Screening was sped up without changing a number: each prompt's chunks are priced once
per configuration instead of once per batch tried
(:func:`planner.candidates.chunked_prompt`; the mixed steps once per batch), the TPOT
search shares the batch search's cached steps, the queueing root search evaluates the
G/G/c wait without re-validating its input, and a capacity curve is tabulated once per
replica count. These tests recompute each piece the way screening did before (the
references below are the former code) and require exact equality, not a tolerance.
"""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from catalog.loader import load_catalog
from planner import kernels as kn
from planner import queueing as q
from planner import roofline as rl
from planner.candidates import (
    ClassFigures,
    capacity_maximizing_batch,
    chunked_prompt,
    chunked_ttft_ms,
    fast_chunked_ttft_ms,
    screen_candidates,
    segments_for,
)
from planner.candidates.chunking import _expect
from planner.capacity import decode_slots, largest_batch
from planner.problem_build import parse_request
from planner.request import resolve_request
from solver.problem import PoolRole

CAT = load_catalog()
REPLICAS = [
    rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", tp=1, dtype="fp8", kv_dtype="fp8"),
    rl.build_replica(CAT, "llama-3.1-70b", "h200-sxm-141gb", tp=2, dtype="fp8", kv_dtype="fp8"),
    rl.build_replica(CAT, "llama-3.1-70b", "l40s", tp=8, dtype="fp8", kv_dtype="fp8"),
]


def reference_chunked_ttft_ms(
    replica: rl.Replica,
    prompt_tokens: float,
    budget_tokens: int,
    batch: int,
    context_tokens: float,
    cached: float,
) -> float:
    """The chunked prefill as the simulator runs it, chunk by chunk: the mixed step of
    ``batch`` decodes carrying each chunk in turn (``roofline.mixed_step_ms``)."""
    new = max(prompt_tokens - cached, 0.0)
    if new <= 0:
        return 0.0
    k = math.ceil(new / budget_tokens)
    total = 0.0
    for i in range(k):
        t = budget_tokens if i < k - 1 else new - (k - 1) * budget_tokens
        total += rl.mixed_step_ms(replica, batch, context_tokens, t, cached + i * budget_tokens)
    return total


def reference_max_utilization(
    servers: int,
    service_s: float,
    quantile: float,
    wait_budget_s: float,
    service_cv2: float = 1.0,
    arrival_cv2: float = 1.0,
) -> float:
    """queueing.max_utilization_for_wait as it was: brentq over mgc_wait_quantile_s."""

    def wait_at(rho: float) -> float:
        return q.mgc_wait_quantile_s(
            rho * servers / service_s, service_s, servers, quantile, service_cv2, arrival_cv2
        )

    if wait_at(q._RHO_MAX) <= wait_budget_s:
        return q._RHO_MAX
    if wait_budget_s == 0.0:
        return float(
            brentq(
                lambda rho: q.erlang_c_wait_probability(servers, rho * servers) - (1 - quantile),
                0.0,
                q._RHO_MAX,
                xtol=1e-12,
            )
        )
    return float(brentq(lambda rho: wait_at(rho) - wait_budget_s, 0.0, q._RHO_MAX, xtol=1e-12))


@settings(max_examples=300, deadline=None)
@given(
    replica=st.sampled_from(REPLICAS),
    prompt=st.floats(1.0, 200_000.0),
    hit=st.floats(0.0, 1.0),
    budget=st.sampled_from([16, 256, 512, 1000, 2048, 8192]),
    batch=st.integers(1, 500),
    context=st.floats(0.0, 100_000.0),
)
def test_chunked_prompt_is_the_per_call_chunked_ttft(
    replica, prompt, hit, budget, batch, context
) -> None:
    """Pricing a prompt's chunks once (chunked_prompt) and the steps once per batch
    (MixedSteps) gives the per-call figure to the float, and the per-chunk loop to
    rounding (its closed form sums in another order)."""
    fast = fast_chunked_ttft_ms(replica, prompt, budget, batch, context, prompt * hit)
    steps = rl.MixedSteps(replica, batch, context)
    assert chunked_ttft_ms(chunked_prompt(replica, prompt, budget, prompt * hit), steps) == fast
    expected = reference_chunked_ttft_ms(replica, prompt, budget, batch, context, prompt * hit)
    assert fast == pytest.approx(expected, rel=1e-10)


@settings(max_examples=300, deadline=None)
@given(
    servers=st.sampled_from([1, 2, 3, 7, 16, 32, 33, 64, 250, 1500]),
    service_s=st.floats(1e-3, 20.0),
    quantile=st.sampled_from([0.5, 0.9, 0.95, 0.99]),
    budget_s=st.one_of(st.just(0.0), st.floats(1e-4, 30.0)),
    cv2=st.floats(0.0, 4.0),
    arrival_cv2=st.sampled_from([0.5, 1.0, 4.0]),
)
def test_max_utilization_is_the_reference_root(
    servers, service_s, quantile, budget_s, cv2, arrival_cv2
) -> None:
    got = q.max_utilization_for_wait(servers, service_s, quantile, budget_s, cv2, arrival_cv2)
    assert got == reference_max_utilization(
        servers, service_s, quantile, budget_s, cv2, arrival_cv2
    )


def _request() -> dict:
    return {
        "model": "llama-3.1-8b",
        "traffic": {
            "rate_rps": 30,
            "classes": [
                {"workload": "chat", "share": 0.6},
                {"workload": "rag", "share": 0.4},
            ],
        },
        "candidates": {
            "gpus": ["h100-sxm5-80gb", "l40s", "a100-sxm-80gb"],
            "dtypes": ["fp8", "bf16"],
            "chunk_budgets": [256, 1024, 4096],
        },
    }


@pytest.fixture(scope="module")
def screened():
    req = resolve_request(parse_request(_request()), CAT)
    # every aggregated configuration screened (none skipped by its floor:
    # tests/test_screening_bounds.py), so all their figures are checked
    return req, screen_candidates(req, CAT, skip_by_floor=False)


def test_aggregated_batch_and_service_equal_the_scalar_screening(screened) -> None:
    """Every aggregated candidate's batch, step and service figures, recomputed the way
    screening did before (decode_slots, then capacity_maximizing_batch over
    fast_chunked_ttft_ms per prompt node and batch, each call pricing its chunks and
    steps afresh), are equal to the float."""
    req, sc = screened
    classes = {c.name: c for c in req.classes}
    checked = 0
    for cand in sc.candidates + sc.pruned:
        if cand.config.role != PoolRole.AGGREGATED:
            continue
        cls = classes[cand.class_name]
        fig = ClassFigures.of(cls)
        replica, budget, h = cand.replica, cand.config.chunk_budget_tokens, fig.prefix_hit_rate
        assert budget is not None
        a = kn.tokens_per_verification_step(replica.speculative)

        @functools.cache
        def step_at(b: int, replica=replica, budget=budget, fig=fig) -> float:
            return rl.mixed_step_ms(
                replica, b, fig.decode_context_tokens, budget, fig.chunk_context_tokens
            )

        best = decode_slots(
            replica,
            fig.decode_context_tokens,
            cls.slo.tpot_ms,
            chunk_tokens=budget,
            chunk_context_tokens=fig.chunk_context_tokens,
        )
        assert best is not None

        def service_at(
            b: int, p: float, replica=replica, budget=budget, h=h, ctx=fig.decode_context_tokens
        ) -> float:
            return fast_chunked_ttft_ms(replica, p, budget, b, ctx, p * h)

        def decode_rps(b: int, fig=fig, a=a) -> float:
            return kn.decode_tokens_per_s(b, step_at(b), a) / fig.output_mean_tokens

        def prefill_rps(b: int, fig=fig, service_at=service_at) -> float:
            return 1000.0 / _expect(fig, lambda p: service_at(b, p))[0]

        def q_service_at(b: int, fig=fig, service_at=service_at) -> float:
            return service_at(b, fig.prompt_q_tokens)

        b = capacity_maximizing_batch(best[0], decode_rps, prefill_rps)
        if cls.slo.ttft_ms - q_service_at(b) <= 0:
            fits = largest_batch(b, q_service_at, cls.slo.ttft_ms)
            b = fits[0] if fits is not None else 1
        mean, cv2 = _expect(fig, lambda p, b=b, service_at=service_at: service_at(b, p))
        assert cand.config.max_batch == b
        assert cand.step_ms == kn.effective_tpot_ms(step_at(b), a)
        assert (cand.service_mean_ms, cand.service_cv2) == (mean, cv2)
        assert cand.service_q_ms == q_service_at(b)
        # and the percentile prompt's chunks are the simulator's mixed steps at b
        p_q = fig.prompt_q_tokens
        assert cand.service_q_ms == pytest.approx(
            reference_chunked_ttft_ms(replica, p_q, budget, b, fig.decode_context_tokens, p_q * h),
            rel=1e-10,
        )
        checked += 1
    assert checked >= 20


def test_capacity_segments_equal_the_scalar_curve(screened, monkeypatch) -> None:
    """The MILP rows of every candidate in the model equal segments_for over the
    un-tabulated curve with the former root search."""
    _, sc = screened
    monkeypatch.setattr(q, "max_utilization_for_wait", reference_max_utilization)
    assert sc.candidates
    for cand in sc.candidates:
        role = cand.config.role
        raw = cand.decode_capacity_rps if role == PoolRole.DECODE else cand.prefill_capacity_rps
        assert cand.segments == segments_for(cand.with_margin(raw), cand.max_replicas)
