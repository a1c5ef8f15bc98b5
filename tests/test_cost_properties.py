"""Properties of the cost model that must hold for every input (hypothesis)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.loader import load_catalog
from catalog.schema import Dtype, Mla, Model, Moe, ReferenceFigures, SlidingWindow
from planner import architecture as arch
from planner import roofline as rl
from planner import sizing as sz

PROPS = settings(max_examples=60, deadline=None)

CAT = load_catalog()
H100 = CAT.gpus["h100-sxm5-80gb"]
LLAMA = CAT.models["llama-2-7b"]

_REF = ReferenceFigures(total_params_b=1.0, active_params_b=1.0, kv_bytes_per_token_bf16=1.0)
MOE_WINDOWED = Model(
    id="t-moe-window",
    name="test MoE with sliding windows",
    num_layers=24,
    hidden_size=2048,
    num_attention_heads=32,
    num_kv_heads=4,
    head_dim=64,
    intermediate_size=2048,
    vocab_size=100_000,
    max_context_tokens=131_072,
    moe=Moe(num_experts=32, experts_per_token=4, expert_intermediate_size=1024),
    sliding_window=SlidingWindow(window_tokens=512, windowed_layers=12),
    reference=_REF,
    sources=["test"],
)
MLA = Model(
    id="t-mla",
    name="test MLA",
    num_layers=16,
    hidden_size=2048,
    num_attention_heads=16,
    num_kv_heads=16,
    head_dim=None,
    intermediate_size=8192,
    vocab_size=50_000,
    max_context_tokens=131_072,
    mla=Mla(
        q_lora_rank=512, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64
    ),
    reference=_REF,
    sources=["test"],
)
BASE = rl.build_replica(CAT, "llama-2-7b", "h100-sxm5-80gb")
NVLINK = CAT.links[H100.scale_up_link] if H100.scale_up_link else None


@st.composite
def replicas(draw: st.DrawFn) -> rl.Replica:
    model = draw(st.sampled_from([LLAMA, MOE_WINDOWED, MLA]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    return dataclasses.replace(
        BASE,
        model=model,
        tp=tp,
        scale_up_link=NVLINK if tp > 1 else None,
        weight_dtype=draw(st.sampled_from([Dtype.BF16, Dtype.FP8])),
        kv_dtype=draw(st.sampled_from([Dtype.BF16, Dtype.FP8])),
        prefill_mfu=draw(st.floats(0.05, 1.0)),
        decode_mbu=draw(st.floats(0.05, 1.0)),
        step_overhead_ms=draw(st.floats(0.0, 5.0)),
        overlap_factor=draw(st.floats(0.0, 1.0)),
    )


tokens = st.integers(1, 200_000)
contexts = st.integers(0, 200_000)
batches = st.integers(1, 4096)


@PROPS
@given(replicas(), tokens, st.floats(0.0, 0.99))
def test_prefill_never_beats_the_roofline(r: rl.Replica, prompt: int, hit: float) -> None:
    cached = prompt * hit
    new = prompt - cached
    ideal_compute = arch.prefill_flops(r.model, new, cached) / rl.peak_flops(r) * 1e3
    ideal_memory = rl.weight_bytes_read_per_step(r, new) / rl.peak_bandwidth_bytes_per_s(r) * 1e3
    t = rl.prefill_ms(r, prompt, cached)
    assert t >= ideal_compute * (1 - 1e-9)
    assert t >= ideal_memory * (1 - 1e-9)


@PROPS
@given(replicas(), batches, contexts)
def test_decode_never_beats_the_roofline(r: rl.Replica, batch: int, context: int) -> None:
    kv = batch * arch.kv_bytes_for_sequence(r.model, context, r.kv_dtype)
    ideal_memory = (rl.weight_bytes_read_per_step(r, batch) + kv) / rl.peak_bandwidth_bytes_per_s(r)
    ideal_compute = batch * arch.flops_per_token(r.model, context) / rl.peak_flops(r)
    t = rl.decode_step_ms(r, batch, context)
    assert t >= ideal_memory * 1e3 * (1 - 1e-9)
    assert t >= ideal_compute * 1e3 * (1 - 1e-9)


@PROPS
@given(replicas(), tokens, st.integers(1, 50_000), contexts)
def test_prefill_grows_with_prompt(r: rl.Replica, prompt: int, extra: int, cached: int) -> None:
    cached = min(cached, prompt)
    assert rl.prefill_ms(r, prompt + extra, cached) >= rl.prefill_ms(r, prompt, cached)


@PROPS
@given(replicas(), batches, st.integers(1, 512), contexts, st.integers(1, 50_000))
def test_decode_grows_with_batch_and_context(
    r: rl.Replica, batch: int, more: int, context: int, longer: int
) -> None:
    t = rl.decode_step_ms(r, batch, context)
    assert rl.decode_step_ms(r, batch + more, context) >= t
    assert rl.decode_step_ms(r, batch, context + longer) >= t


@PROPS
@given(replicas(), st.floats(1.0, 200.0), contexts, st.integers(1, 50_000))
def test_free_chunk_falls_as_context_grows(
    r: rl.Replica, budget: float, context: int, longer: int
) -> None:
    assert rl.max_free_chunk_tokens(r, budget, context + longer) <= rl.max_free_chunk_tokens(
        r, budget, context
    )


@PROPS
@given(replicas(), tokens, st.floats(0.0, 0.99), st.floats(0.0, 0.99))
def test_more_prefix_hits_never_cost_more(r: rl.Replica, prompt: int, h1: float, h2: float) -> None:
    low, high = sorted((h1, h2))
    assert sz.prefill_gpu_s(r, prompt, high) <= sz.prefill_gpu_s(r, prompt, low) * (1 + 1e-12)


@PROPS
@given(
    st.floats(0.0, 1e12),
    st.floats(1.0, 1e12),
    st.floats(1.0, 1000.0),
    st.floats(1.0, 1000.0),
    st.floats(0.0, 100.0),
)
def test_kv_transfer_grows_with_bytes_and_shrinks_with_bandwidth(
    kv: float, more: float, bw: float, faster: float, latency: float
) -> None:
    t = rl.kv_transfer_ms(kv, bw, latency)
    assert rl.kv_transfer_ms(kv + more, bw, latency) >= t
    assert rl.kv_transfer_ms(kv, bw + faster, latency) <= t


@PROPS
@given(
    st.floats(0.0, 1e4),
    st.floats(0.0, 1e4),
    st.floats(0.0, 1.0),
    st.integers(1, 200),
)
def test_exposed_transfer_is_bounded(
    transfer: float, prefill: float, overlap: float, layers: int
) -> None:
    exposed = rl.exposed_transfer_ms(transfer, prefill, overlap, layers)
    assert 0.0 <= exposed <= transfer


@PROPS
@given(replicas(), st.integers(1, 20_000), st.floats(5.0, 200.0), st.integers(0, 10_000))
def test_shrinking_schedule_covers_the_prompt(
    r: rl.Replica, prompt: int, budget: float, cached: int
) -> None:
    cached = min(cached, prompt)
    chunks = rl.shrinking_chunk_schedule(r, prompt, budget, cached)
    assert sum(chunks) == prompt - cached
    assert all(t >= 1 for t in chunks)
    assert chunks[:-1] == sorted(chunks[:-1], reverse=True)
