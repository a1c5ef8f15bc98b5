"""The measured decode attention kernel (issue 10): fitted per GPU, engine and KV dtype
from aiconfigurator's kernel database (scripts/extract_aiconfigurator.py), carried in the
catalog, assumed no faster than the slowest measured GPU of the same architecture, and
the floor it puts on a decode step's KV read
(planner.kernels.StepCoefficients.kv_read_ms_per_seq)."""

from __future__ import annotations

import math

import pytest
from script_support import aiconfigurator_kernels, load_script

from catalog.loader import load_catalog
from planner import roofline as rl
from planner.kernel_floors import (
    DECODE_ATTENTION_ASSUMED,
    DECODE_ATTENTION_BY_ARCH,
    decode_attention_rate,
)
from planner.simulate.steps import StepModel

EXTRACTED = aiconfigurator_kernels()
CAT = load_catalog()
extract = load_script("extract_aiconfigurator")


def _row(batch: int, ctx: int, kv: int, latency_ms: float, **kw: object) -> dict[str, object]:
    row: dict[str, object] = {
        "batch_size": batch,
        "isl": 1,
        "step": ctx - 1,
        "num_heads": 4 * kv,
        "num_key_value_heads": kv,
        "head_dim": 128,
        "window_size": 0,
        "kv_cache_dtype": "fp8",
        "latency": latency_ms,
    }
    row.update(kw)
    return row


def test_fit_recovers_a_known_kernel():
    # t_us = 5 + pairs x 10 ns + bytes / (2 TB/s x 0.6): the fit gives back 10 ns and 0.6
    def t_ms(batch: int, ctx: int, kv: int) -> float:
        nbytes = batch * ctx * kv * 128 * 2 * 1
        return (5.0 + batch * kv * 10e-3 + nbytes / (2.0 * 1e6 * 0.6)) / 1e3

    rows = [
        _row(b, s, kv, t_ms(b, s, kv))
        for b in (16, 64, 256)
        for s in (128, 1024, 8192)
        for kv in (4, 8)
    ]
    rows += [
        _row(1, 1024, 1, 9.9),  # 1 pair: below the 64 pairs read
        _row(64, 65536, 8, 9.9),  # beyond the contexts read
        _row(64, 1024, 8, 9.9, head_dim=64),
        _row(64, 1024, 8, 9.9, window_size=128),
        _row(64, 1024, 8, 9.9, num_heads=128),  # 16 query heads per KV head
    ]
    got = extract.decode_attention_fit(rows, 2.0)
    assert set(got) == {"fp8"}
    assert got["fp8"]["pair_ns"] == pytest.approx(10.0, abs=0.01)
    assert got["fp8"]["saturated_share"] == pytest.approx(0.6, abs=0.001)
    assert got["fp8"]["launch_us"] == pytest.approx(5.0, abs=0.1)
    assert got["fp8"]["rows"] == 18 and got["fp8"]["median_abs_error"] == pytest.approx(0.0)


def test_catalog_carries_the_extracted_fits():
    for gpu_id, entry in EXTRACTED["gpus"].items():
        table = CAT.gpus[gpu_id].decode_attention
        assert table is not None, gpu_id
        for engine, e in entry["engines"].items():
            for dtype, fit in e["decode_attention"].items():
                got = table.by_engine[engine][dtype]
                assert got.pair_ns == fit["pair_ns"], (gpu_id, engine, dtype)
                assert got.saturated_share == fit["saturated_share"], (gpu_id, engine, dtype)


def test_assumed_table_is_the_slowest_measured_of_each_architecture():
    for arch, table in DECODE_ATTENTION_BY_ARCH.items():
        measured = [g for g in CAT.gpus.values() if g.arch == arch and g.decode_attention]
        assert measured, arch
        for engine, by_dtype in table.items():
            for dtype, (pair_ns, share) in by_dtype.items():
                fits = [g.decode_attention.by_engine[engine][dtype] for g in measured]
                assert pair_ns == max(f.pair_ns for f in fits), (arch, engine, dtype)
                assert share == min(f.saturated_share for f in fits), (arch, engine, dtype)


def test_rates_measured_assumed_and_absent():
    h200, nvl = CAT.gpus["h200-sxm-141gb"], CAT.gpus["h100-nvl-94gb"]
    assert decode_attention_rate(h200, "vllm", "fp8") == (27.31, 0.645)
    # an engine the entry does not list: the slowest listed, per pair and per byte
    assert decode_attention_rate(h200, "nim", "fp8") == (27.31, 0.514)
    # H100 NVL (GH100, no kernel data) takes Hopper's slowest, never faster than a measured one
    for engine in ("vllm", "sglang", "trtllm"):
        for dtype in ("bf16", "fp8"):
            got = decode_attention_rate(nvl, engine, dtype)
            for gpu in ("h100-sxm5-80gb", "h200-sxm-141gb"):
                ref = decode_attention_rate(CAT.gpus[gpu], engine, dtype)
                assert got is not None and ref is not None
                assert got[0] >= ref[0] and got[1] <= ref[1]
    # architectures nothing measures (AMD's CDNA, Ampere) take the slowest measured kernel
    assert decode_attention_rate(CAT.gpus["mi300x"], "vllm", "fp8") == (27.31, 0.645)
    assert decode_attention_rate(CAT.gpus["a100-sxm-80gb"], "vllm", "bf16") == (16.57, 0.882)
    # Gaudi 3 borrows no GPU attention kernel: its fitted MBU prices its attention
    assert decode_attention_rate(CAT.gpus["gaudi3"], "vllm", "fp8") is None


def test_assumed_for_unmeasured_architectures_is_the_slowest_of_all():
    for engine, by_dtype in DECODE_ATTENTION_ASSUMED.items():
        for dtype, (pair_ns, share) in by_dtype.items():
            fits = [t[engine][dtype] for t in DECODE_ATTENTION_BY_ARCH.values()]
            assert pair_ns == max(f[0] for f in fits) and share == min(f[1] for f in fits)


def test_kv_read_floor_worked_example():
    # Llama-3.1-8B on one H200, vLLM, fp8 KV: 32 layers x 8 KV heads x 27.31 ns per
    # sequence, bytes at 0.645 x 4.8 TB/s; the fitted W_eff (0.7 x 4.8 TB/s) is faster
    # per byte, so the kernel binds at every context
    r = rl.build_replica(
        CAT, "llama-3.1-8b", "h200-sxm-141gb", dtype="fp8", kv_dtype="fp8", engine="vllm"
    )
    c = r.coefficients
    assert c.attn_pair_ms == pytest.approx(32 * 8 * 27.31e-6)
    assert c.w_attn_per_ms == pytest.approx(4.8e9 * 0.645)
    kv = c.kv_held_bytes(400.0)  # 400 tokens x 65,536 bytes (fp8, 32 layers x 8 heads)
    assert kv == pytest.approx(400 * 65536)
    assert c.kv_read_ms_per_seq(kv) == pytest.approx(32 * 8 * 27.31e-6 + kv / (4.8e9 * 0.645))
    assert c.kv_read_ms_per_seq(kv) > kv / c.w_per_ms
    # 512 sequences at 400 tokens: 7.9 ms of KV read instead of 4.0 at W_eff (0.7 x 4.8 TB/s)
    _, memory = c.decode_attention_parts_ms(512, 400.0)
    assert memory == pytest.approx(512 * c.kv_read_ms_per_seq(kv))
    assert memory / (512 * kv / c.w_per_ms) == pytest.approx(1.98, abs=0.01)


def test_trtllm_bf16_long_context_keeps_the_fitted_bandwidth():
    # TensorRT-LLM's BF16 kernel on H100 streams at 0.857 of the peak with 2.5 ns per
    # pair: at 4,096 tokens W_eff (0.7) is the slower, so nothing changes
    r = rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", tp=4, engine="trtllm")
    c = r.coefficients
    kv = c.kv_held_bytes(4096.0)
    assert c.kv_read_ms_per_seq(kv) == pytest.approx(kv / c.w_per_ms)


def test_mla_and_gaudi_have_no_floor():
    ds = rl.build_replica(
        CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", kv_dtype="fp8", engine="sglang"
    )
    assert ds.coefficients.attn_pair_ms == 0.0 and math.isinf(ds.coefficients.w_attn_per_ms)
    gaudi = rl.build_replica(CAT, "llama-3.1-8b", "gaudi3", dtype="fp8", kv_dtype="fp8")
    c = gaudi.coefficients
    assert c.attn_pair_ms == 0.0 and math.isinf(c.w_attn_per_ms)


def test_data_parallel_attention_ranks_share_the_per_pair_cost():
    # Mixtral (8 KV heads) at tp 8: plain, each GPU holds one KV head of every sequence;
    # with 8 attention ranks, each rank holds all 8 heads of 1/8 of the sequences, so a
    # step of B sequences pays B / 8 x 8 heads per GPU: the same per-pair time per GPU
    def pair_ms(dp: int) -> float:
        return rl.build_replica(
            CAT,
            "mixtral-8x7b",
            "h200-sxm-141gb",
            tp=8,
            dtype="fp8",
            kv_dtype="fp8",
            engine="vllm",
            dp=dp,
            ep=dp,
        ).coefficients.attn_pair_ms

    assert pair_ms(1) == pytest.approx(32 * 1 * 27.31e-6)
    assert pair_ms(8) == pytest.approx(32 * 8 * 27.31e-6 / 8)


def test_the_simulator_prices_the_same_step():
    r = rl.build_replica(
        CAT, "llama-3.1-8b", "h200-sxm-141gb", dtype="fp8", kv_dtype="fp8", engine="vllm"
    )
    sim = StepModel(r)
    for batch, ctx in ((1, 100.0), (64, 400.0), (512, 3000.0)):
        want = r.coefficients.step_ms(batch, ctx)
        assert sim.decode_ms(batch, ctx) == pytest.approx(want, rel=1e-12)
        # a second call takes the cached inline path
        assert sim.decode_ms(batch, ctx) == pytest.approx(want, rel=1e-12)
        assert sim.mixed_ms(batch, ctx, 256.0, 1000.0) == pytest.approx(
            r.coefficients.step_ms(batch, ctx, 256.0, 1000.0), rel=1e-12
        )
