"""Screening prices a chunked prefill as the simulator runs it: one mixed step per chunk.

``planner.candidates.chunked_ttft_ms`` (closed form over the chunks' attention, chunks
priced once per prompt, steps once per batch) against the per-chunk loop
``planner.roofline.chunked_prefill_ttft_ms`` (``mixed_step_ms`` of every chunk) and the
simulator's own chunk steps (``StepModel.chunk_steps_ms``), for dense, MoE, MLA,
sliding-window, pipelined and speculative replicas; and one chunked TTFT by hand.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from catalog.loader import load_catalog
from planner import roofline as rl
from planner.candidates import (
    chunked_prompt,
    chunked_ttft_floor_ms,
    chunked_ttft_ms,
    fast_chunked_ttft_ms,
)
from planner.candidates.chunking import full_chunks_attention_ms
from planner.simulate.steps import StepModel, chunk_count

CAT = load_catalog()
EAGLE3: dict[str, Any] = {"method": "eagle3", "draft_tokens": 3, "acceptance_length": 2.5}


def _replicas() -> dict[str, rl.Replica]:
    b = rl.build_replica
    return {
        "dense": b(CAT, "llama-3.1-8b", "h100-sxm5-80gb", tp=1, dtype="fp8", kv_dtype="fp8"),
        "dense-tp": b(CAT, "llama-3.1-70b", "mi300x", tp=8, dtype="fp8", kv_dtype="fp8"),
        "moe": b(CAT, "mixtral-8x7b", "h100-sxm5-80gb", tp=2, dtype="bf16"),
        "moe-window": b(CAT, "gpt-oss-120b", "b200", tp=2, dtype="fp8", kv_dtype="fp8"),
        "window": b(CAT, "mistral-7b-v0.1", "a100-sxm-80gb", tp=1, dtype="bf16"),
        "mla-ep": b(
            CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", kv_dtype="fp8", dp=8, ep=8
        ),
        "pp": b(CAT, "llama-3.1-405b", "h100-sxm5-80gb", tp=8, dtype="bf16", pp=2),
        "eagle3": rl.with_speculation(
            CAT,
            b(CAT, "llama-3.1-70b", "h100-sxm5-80gb", tp=8, dtype="fp8", kv_dtype="fp8"),
            **EAGLE3,
        ),
    }


REPLICAS = _replicas()


def loop_ttft_ms(
    replica: rl.Replica, prompt: float, budget: int, batch: int, ctx: float, cached: float
) -> float:
    """The exact loop over real-valued chunks: mixed_step_ms of every chunk in turn."""
    new = max(prompt - cached, 0.0)
    if new <= 0:
        return 0.0
    k = math.ceil(new / budget)
    total = 0.0
    for i in range(k):
        t = budget if i < k - 1 else new - (k - 1) * budget
        total += rl.mixed_step_ms(replica, batch, ctx, t, cached + i * budget)
    return total


@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_mixed_steps_split_equals_the_cost_model(name: str) -> None:
    replica = REPLICAS[name]
    for batch in (0, 1, 7, 64, 300):
        steps = rl.MixedSteps(replica, batch, 3_000.0)
        for t, s in ((512, 0.0), (137.5, 4_000.0), (2048, 20_000.0), (1, 100_000.0)):
            assert steps.step_ms(t, s) == pytest.approx(
                rl.mixed_step_ms(replica, batch, 3_000.0, t, s), rel=1e-12
            )


@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_chunked_ttft_equals_the_loop_and_the_simulator(name: str) -> None:
    replica = REPLICAS[name]
    model = StepModel(replica)
    for prompt, cached, budget, batch, ctx in (
        (4096, 0, 512, 32, 2_000.0),
        (60_000, 12_000, 2048, 1, 20_000.0),
        (100_000, 0, 256, 128, 50_000.0),
        (300, 0, 512, 8, 1_000.0),
        (8192, 4096, 1024, 0, 0.0),
    ):
        got = fast_chunked_ttft_ms(replica, prompt, budget, batch, ctx, cached)
        loop = rl.chunked_prefill_ttft_ms(replica, prompt, budget, batch, ctx, cached)
        assert got == pytest.approx(loop, rel=1e-12)
        count, last = chunk_count(prompt - cached, budget)
        sim = sum(model.chunk_steps_ms(batch, ctx, budget, count, last, cached))
        assert got == pytest.approx(sim, rel=1e-12)


@settings(max_examples=600, deadline=None)
@given(
    name=st.sampled_from(sorted(REPLICAS)),
    prompt=st.floats(1.0, 200_000.0),
    hit=st.floats(0.0, 1.0),
    budget=st.sampled_from([16, 256, 512, 1000, 2048, 8192]),
    batch=st.integers(0, 600),
    ctx=st.floats(0.0, 100_000.0),
)
def test_closed_form_is_the_per_chunk_loop(name, prompt, hit, budget, batch, ctx) -> None:
    replica = REPLICAS[name]
    got = chunked_ttft_ms(
        chunked_prompt(replica, prompt, budget, prompt * hit), rl.MixedSteps(replica, batch, ctx)
    )
    assert got == pytest.approx(
        loop_ttft_ms(replica, prompt, budget, batch, ctx, prompt * hit), rel=1e-10
    )


def test_both_branches_of_the_closed_form_are_taken_and_exact() -> None:
    """Bandwidth-bound decode attention (GQA) takes the closed form, compute-bound
    (MLA's absorbed decode, where the dc + cc floor binds) the sum of upper envelopes of
    lines; both equal the sum over the chunk arrays."""
    dense = REPLICAS["dense-tp"]
    mla = REPLICAS["mla-ep"]
    for replica, closed in ((dense, True), (mla, False)):
        prompt = chunked_prompt(replica, 50_000.0, 1024, 3_000.0)
        assert prompt is not None and prompt.linear is not None
        cc, a = prompt.full_arrays()
        for batch in (1, 16, 256):
            steps = rl.MixedSteps(replica, batch, 20_000.0)
            a_d, dc = steps.decode_attention_ms, steps.decode_compute_ms
            attn = np.maximum(a_d, a) + steps.one_minus_overlap * np.minimum(a_d, a)
            exact = float(np.maximum(attn, dc + cc).sum())
            assert full_chunks_attention_ms(prompt, steps) == pytest.approx(exact, rel=1e-12)
            assert bool((dc + cc > attn).any()) is not closed


@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_chunk_attention_lines_and_arrays(name: str) -> None:
    """Without sliding windows a chunk's attention parts are lines in its start, and a
    prompt's counts and sums over its full chunks are closed forms; with windows,
    arrays. Either way they are the per-chunk parts."""
    replica = REPLICAS[name]
    c = replica.coefficients
    line = rl.chunk_attention_linear_ms(replica, 512)
    assert (line is None) == bool(c.windowed_layers or c.kv_windowed_held or c.draft)
    prompt = chunked_prompt(replica, 30_000.0, 512, 1_000.0)
    assert prompt is not None and (prompt.linear is None) == (line is None)
    m = prompt.chunks - 1
    parts = [rl.chunk_attention_parts_ms(replica, 512, 1_000.0 + 512 * i) for i in range(m)]
    if line is not None:
        for s in (0.0, 777.0, 100_000.0):
            cc, cm = rl.chunk_attention_parts_ms(replica, 512, s)
            assert line[0] + s * line[1] == pytest.approx(cc, rel=1e-12)
            assert line[2] + s * line[3] == pytest.approx(cm, rel=1e-12)
    a = [max(cc, cm) for cc, cm in parts]
    for lo, hi in ((0, m), (0, 1), (3, 17), (m - 1, m), (5, 5)):
        assert prompt.attention_sum_ms(lo, hi) == pytest.approx(sum(a[lo:hi]), rel=1e-12)
    for i in (0, 7, m - 1):
        assert prompt.compute_at_ms(i) == pytest.approx(parts[i][0], rel=1e-12)
        assert prompt.below(a[i] * (1 + 1e-9)) == sum(x < a[i] * (1 + 1e-9) for x in a)
    assert prompt.below(0.0) == 0 and prompt.below(1e9) == m


def test_chunked_ttft_by_hand() -> None:
    """llama-3.1-8b fp8 on one H100, 1,200 tokens in chunks of 512 under 16 decodes at
    context 2,000: three mixed steps (512 at 0, 512 at 512, 176 at 1,024), each the sum
    of its kernels at tp 1 (no collectives): GEMMs ``max(n x 2 N / (F x lift),
    weights / W)`` and their elementwise kernels over ``n = 16 + T`` tokens, attention
    ``max(a_d, a_c) + (1 - o) min(a_d, a_c)`` (at least the two computes), the step
    overhead; ``F`` with H100's measured GEMM gain at ``n``
    tokens (vLLM, fp8: 1.027 at 1,024, linear in log2 from 1 at 512), the BF16 lm_head's
    FLOPs (``wide_flops_per_token``, in FP8 FLOPs) at the BF16 gain (1.043 at 1,024)."""
    replica = REPLICAS["dense"]
    c = replica.coefficients
    o = replica.overlap_factor
    assert c.tp == 1 and c.num_experts == 0 and not c.windowed_layers
    assert c.gemm_gain[0] == 1.027 and c.wide_gain[0] == 1.043

    def by_hand(t: float, s: float) -> float:
        n = 16 + t
        gain = 1.0 + 0.027 * max(0.0, math.log2(n / 512))  # n <= 1,024 here
        wide_gain = 1.0 + 0.043 * max(0.0, math.log2(n / 512))
        rate = c.f_gemm_per_ms * c.dense_lift
        gemm = (
            max(
                n * (c.dense_flops_per_token / gain + c.wide_flops_per_token / wide_gain) / rate,
                c.dense_weight_bytes / c.w_weights_per_ms,
            )
            + n * c.elementwise_bytes_per_token / c.w_per_ms
        )
        dc = 16 * c.decode_attn_per_ctx * c.full_layers * 2000 / c.f_attn_per_ms
        dm = 16 * c.kv_full_held * 2000 / c.w_per_ms
        cc = c.prefill_attn_per_ctx * c.full_layers * ((s + t) ** 2 - s**2) / 2 / c.f_attn_per_ms
        cm = c.kv_full_held * (s + t) / c.w_per_ms
        a_d, a_c = max(dc, dm), max(cc, cm)
        attn = max(max(a_d, a_c) + (1 - o) * min(a_d, a_c), dc + cc)
        return gemm + attn + replica.step_overhead_ms

    expected = by_hand(512, 0) + by_hand(512, 512) + by_hand(176, 1024)
    assert fast_chunked_ttft_ms(replica, 1200, 512, 16, 2000.0, 0.0) == pytest.approx(
        expected, rel=1e-12
    )
    # the chunks ride steps that read the weights once for decodes and chunk together:
    # never cheaper than three decode steps, never dearer than decodes plus bare chunks
    decode = rl.decode_step_ms(replica, 16, 2000)
    assert 3 * decode < expected
    computes = sum(
        rl.chunk_compute_ms(replica, t, s) for t, s in ((512, 0), (512, 512), (176, 1024))
    )
    assert expected < 3 * decode + computes


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(REPLICAS)),
    new=st.floats(1.0, 150_000.0),
    more=st.floats(0.0, 50_000.0),
    cached=st.floats(0.0, 50_000.0),
    budget=st.sampled_from([16, 256, 512, 1000, 2048, 8192]),
    batch=st.integers(1, 400),
    ctx=st.floats(0.0, 50_000.0),
)
def test_floor_is_below_every_chunked_ttft(name, new, more, cached, budget, batch, ctx) -> None:
    """The screening floor (planner.candidates.bounds) of N new tokens at batch 1 is below
    the chunked TTFT of N or more new tokens at any batch and after any cached prefix."""
    replica = REPLICAS[name]
    floor = chunked_ttft_floor_ms(rl.MixedSteps(replica, 1, ctx), new, budget)
    assert floor > 0
    for tokens in (new, new + more):
        got = fast_chunked_ttft_ms(replica, cached + tokens, budget, batch, ctx, cached)
        assert floor <= got * (1 + 1e-12)
    assert floor <= chunked_ttft_floor_ms(rl.MixedSteps(replica, 1, ctx), new + more, budget) * (
        1 + 1e-12
    )


def test_floor_is_tight_for_a_bandwidth_bound_batch_of_one() -> None:
    """From context 0 at batch 1, a prompt's floor misses its TTFT only by the chunks'
    attention above max(a_d, cc) (a share of the smaller, and the KV reads)."""
    replica = REPLICAS["dense-tp"]
    steps = rl.MixedSteps(replica, 1, 2_000.0)
    for new in (300.0, 5_000.0, 40_000.0):
        got = fast_chunked_ttft_ms(replica, new, 1024, 1, 2_000.0, 0.0)
        assert 0.97 * got < chunked_ttft_floor_ms(steps, new, 1024) <= got


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.tuples(st.floats(-100.0, 100.0), st.floats(-5.0, 5.0)), min_size=1, max_size=3
    ),
    lo=st.integers(0, 50),
    n=st.integers(0, 80),
)
@example(lines=[(0.0, 5e-324), (1.0, 0.0)], lo=0, n=10)  # nearly parallel: crossing at inf
def test_sum_of_the_upper_envelope_of_lines(lines, lo, n) -> None:
    """The closed form behind the compute-bound branch: a sum over an integer range of
    the largest of a few lines, against the brute-force sum."""
    from planner.candidates.chunking import _sum_max_lines

    brute = sum(max(f + i * s for f, s in lines) for i in range(lo, lo + n))
    got = _sum_max_lines(tuple(lines), lo, lo + n)
    assert got == pytest.approx(brute, rel=1e-9, abs=1e-9)
