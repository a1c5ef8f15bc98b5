"""The saturated rate of grouped expert GEMMs (issue 10): measured per expert width per
GPU in aiconfigurator's kernel database (scripts/extract_aiconfigurator.py), carried in
the catalog, assumed no better than the least measured GPU elsewhere, and the cap it puts
on a MoE layer's expert GEMMs (planner.kernels.StepCoefficients.grouped_time_per_flop)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from script_support import aiconfigurator_kernels, load_script

from catalog.loader import load_catalog
from planner import architecture as arch
from planner import roofline as rl
from planner.kernel_floors import GROUPED_GEMM_PEAK_SHARE_ASSUMED, grouped_gemm_peak_share
from planner.kernels import coefficients_of

EXTRACTED = aiconfigurator_kernels()
CAT = load_catalog()
extract = load_script("extract_aiconfigurator")


def _row(n: int, latency_ms: float, **kw: object) -> dict[str, object]:
    row: dict[str, object] = {
        "moe_dtype": "fp8_block",
        "hidden_size": 7168,
        "inter_size": 2048,
        "num_experts": 256,
        "topk": 8,
        "moe_tp_size": 8,
        "moe_ep_size": 1,
        "distribution": "balanced",
        "num_tokens": n,
        "latency": latency_ms,
    }
    row.update(kw)
    return row


def test_peak_share_arithmetic():
    # DeepSeek-V3's layer at tp 8 (width 256): 4,096 and 8,192 tokens put 128 and 256 on
    # each expert; 1,024 tokens (32 each) are not saturated and are left out.
    flops = 3 * 7168 * 2048 * 2 * 8 / 8  # per token per GPU
    rows = [
        _row(1024, 1.0),
        _row(4096, 4096 * flops / 400e9),  # 400 TFLOP/s
        _row(8192, 8192 * flops / 500e9),  # 500 TFLOP/s
        _row(8192, 1.0, distribution="power_law_1.2"),  # skewed routing: not read
        _row(8192, 1.0, moe_ep_size=8),  # expert parallel: not read
        _row(8192, 1.0, moe_dtype="bfloat16"),
    ]
    got = extract.grouped_gemm_peak_share(rows, 1000.0)
    assert got == {256: pytest.approx(0.45)}  # median of 0.4 and 0.5 of the 1,000 peak
    # a shape of another width is its own entry; a width off the grid is not read
    wide = [
        _row(
            n,
            n * 8 * 2 * 3 * 4096 * 14336 / 8 / 8 / 600e9,
            hidden_size=4096,
            inter_size=14336,
            num_experts=8,
            topk=2,
            moe_tp_size=8,
        )
        for n in (1024, 2048)
    ]
    got = extract.grouped_gemm_peak_share(rows + wide, 1000.0)
    assert got == {256: pytest.approx(0.45)}  # 14336 / 8 = 1792 is not a listed width
    assert extract.grouped_gemm_peak_share([_row(1024, 1.0)], 1000.0) is None


def test_catalog_shares_are_the_extracted_ones():
    for gpu, entry in EXTRACTED["gpus"].items():
        floor = CAT.gpus[gpu].moe_layer_floor
        assert floor is not None and floor.grouped_gemm_peak_share_by_engine is not None
        for engine, figures in entry["engines"].items():
            want = {int(w): v for w, v in figures["moe_grouped_gemm_peak_share_by_width"].items()}
            assert floor.grouped_gemm_peak_share_by_engine[engine] == want, (gpu, engine)


def test_assumed_share_is_the_least_measured_and_unmeasured_gpus_never_do_better():
    measured: dict[str, dict[int, list[float]]] = {}
    for gpu in CAT.gpus.values():
        floor = gpu.moe_layer_floor
        if floor is None or floor.grouped_gemm_peak_share_by_engine is None:
            continue
        for engine, table in floor.grouped_gemm_peak_share_by_engine.items():
            for w, share in table.items():
                measured.setdefault(engine, {}).setdefault(w, []).append(share)
    assert set(measured) == set(GROUPED_GEMM_PEAK_SHARE_ASSUMED)
    for engine, by_width in measured.items():
        assert GROUPED_GEMM_PEAK_SHARE_ASSUMED[engine] == {w: min(v) for w, v in by_width.items()}
    mi300x = CAT.gpus["mi300x"]
    measured_gpus = [g for g in CAT.gpus.values() if g.id in EXTRACTED["gpus"]]
    for width in (100, 256, 700, 2048, 30000):
        for engine in GROUPED_GEMM_PEAK_SHARE_ASSUMED:
            share = grouped_gemm_peak_share(mi300x, engine, width)
            assert all(share <= grouped_gemm_peak_share(g, engine, width) for g in measured_gpus)
            # an engine nothing measures is no better than any measured engine
            assert grouped_gemm_peak_share(mi300x, "atom", width) <= share
    assert grouped_gemm_peak_share(mi300x, "sglang", 256) == 0.107
    assert grouped_gemm_peak_share(mi300x, "atom", 256) == 0.063  # TensorRT-LLM's least


def test_share_is_linear_in_log_width_and_flat_beyond_the_grid():
    h200 = CAT.gpus["h200-sxm-141gb"]
    assert grouped_gemm_peak_share(h200, "sglang", 256) == 0.173
    assert grouped_gemm_peak_share(h200, "sglang", 2048) == 0.326
    # 362 = 256 x sqrt(2): halfway in log2 between 256 and 512 (0.233)
    mid = grouped_gemm_peak_share(h200, "sglang", 256 * math.sqrt(2))
    assert mid == pytest.approx((0.173 + 0.233) / 2)
    assert grouped_gemm_peak_share(h200, "sglang", 16) == 0.113
    assert grouped_gemm_peak_share(h200, "sglang", 10**6) == 0.397


def _deepseek(engine: str, ep: int = 1) -> rl.Replica:
    return rl.build_replica(
        CAT,
        "deepseek-v3",
        "h200-sxm-141gb",
        tp=8,
        dtype="fp8",
        kv_dtype="fp8",
        engine=engine,
        ep=ep,
    )


def test_a_deepseek_prefill_runs_its_experts_at_the_measured_rate():
    """DeepSeek-V3 fp8 at tp 8 on H200 with SGLang, a 7,373-token prefill: the experts are
    2,048 / 8 = 256 wide per GPU, whose grouped GEMMs measure 0.173 of the FP8 peak, so
    ``moe = 7,373 x 2 N_routed / (8 x 1,978.9 TFLOP/s x 0.173) + floors``: 111.6 ms, where
    aiconfigurator's kernel sum gives 113.8 ms and the dense rate (no cap) 55.4 ms."""
    c = coefficients_of(_deepseek("sglang"))
    routed = 2.0 * arch.routed_active_param_count(CAT.models["deepseek-v3"])
    assert c.f_grouped_per_ms == pytest.approx(8 * 1978.9e12 * 0.173 / 1e3)
    want = 7373 * routed / c.f_grouped_per_ms + c.moe_floor_ms
    assert c.moe_ms(7373) == pytest.approx(want)
    assert c.moe_ms(7373) == pytest.approx(111.6, abs=0.1)
    uncapped = dataclasses.replace(c, f_grouped_per_ms=math.inf)
    assert uncapped.moe_ms(7373) == pytest.approx(55.4, abs=0.1)
    # a decode step's experts are bound by their weight reads and tiles, not the cap
    assert c.moe_ms(4) == uncapped.moe_ms(4)
    # the chunk's pure compute carries the same cap
    assert c.chunk_compute_ms(7373, 0) > uncapped.chunk_compute_ms(7373, 0)


def test_expert_parallelism_widens_the_experts_and_lifts_the_cap():
    tp8 = coefficients_of(_deepseek("trtllm"))
    ep8 = coefficients_of(_deepseek("trtllm", ep=8))
    # TensorRT-LLM on H200: 0.068 of the peak at width 256 (tp 8), 0.271 at 2,048 (ep 8)
    assert tp8.f_grouped_per_ms == pytest.approx(8 * 1978.9e12 * 0.068 / 1e3)
    assert ep8.f_grouped_per_ms == pytest.approx(8 * 1978.9e12 * 0.271 / 1e3)


def test_dense_models_have_no_grouped_cap():
    c = coefficients_of(rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", dtype="fp8"))
    assert c.f_grouped_per_ms == math.inf and c.moe_ms(4096) == 0.0
