"""Dense GEMMs run faster per FLOP as a step's token count grows (issue 10): the rate
gain from 512 to 1,024-8,192 tokens, measured per GPU, engine and weight dtype from
aiconfigurator's kernel database (scripts/extract_aiconfigurator.py), carried in the
catalog, borrowed no faster than the slowest measured GPU of the same architecture, and
applied to a step's dense GEMM compute (planner.kernels.StepCoefficients.gemm_ms)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from script_support import aiconfigurator_kernels, load_script

from catalog.kernel_floors import GemmTokenGain
from catalog.loader import load_catalog
from planner import kernels as kn
from planner import roofline as rl
from planner.kernel_floors import (
    GEMM_GAIN_TOKENS,
    GEMM_TOKEN_GAIN_BY_ARCH,
    gain_at_tokens,
    gemm_token_gain,
)

EXTRACTED = aiconfigurator_kernels()
CAT = load_catalog()
extract = load_script("extract_aiconfigurator")
ENGINES = ("vllm", "sglang", "trtllm")


def _rows(rate_at: dict[int, float], dtype: str = "fp8", n: int = 8192, k: int = 4096):
    """GEMM rows of one weight shape whose rate (FLOP per ms) at m tokens is rate_at[m]."""
    return [
        {"gemm_dtype": dtype, "m": m, "n": n, "k": k, "latency": 2.0 * m * n * k / r}
        for m, r in rate_at.items()
    ]


def test_extraction_is_the_median_rate_ratio_over_shapes_floored_at_one():
    base = 1e12
    rows = (
        _rows({512: base, 1024: 1.2 * base, 2048: 1.3 * base, 4096: 1.4 * base, 8192: base})
        + _rows(
            {512: base, 1024: 1.4 * base, 2048: 1.5 * base, 4096: 1.6 * base, 8192: 0.9 * base},
            n=16384,
        )
        + _rows({512: base, 1024: 9 * base}, n=2048)  # weights below 4,096: not read
        + _rows({512: base, 1024: 9 * base}, dtype="int8")  # not bf16 or fp8: not read
    )
    got = extract.gemm_token_gain(rows)
    # medians of (1.2, 1.4), (1.3, 1.5), (1.4, 1.6) and (1.0, 0.9) -> 0.95 floored at 1
    assert got == {"fp8": [1.3, 1.4, 1.5, 1.0]}
    # a dtype missing a token count is left out
    assert extract.gemm_token_gain(_rows({512: base, 1024: base}, dtype="bfloat16")) == {}


def test_catalog_gains_are_the_extracted_ones():
    seen = set()
    for gpu, entry in {**EXTRACTED["gpus"], **EXTRACTED["fp8_gemm_only"]}.items():
        want = {
            e: figures["gemm_token_gain"]
            for e, figures in entry["engines"].items()
            if "gemm_token_gain" in figures
        }
        if not want:
            continue
        got = CAT.gpus[gpu].gemm_token_gain
        assert got is not None, gpu
        assert got.by_engine == want, gpu
        assert "aiconfigurator" in got.source
        seen.add(gpu)
    assert seen == {"h100-sxm5-80gb", "h200-sxm-141gb", "b200", "gb200-per-gpu", "l40s"} | {
        "a100-sxm-80gb",
        "b300",
        "gb300-per-gpu",
    }


def test_architecture_tables_are_the_least_measured_gain_of_the_architecture():
    least: dict[str, dict[str, dict[str, tuple[float, ...]]]] = {}
    for g in CAT.gpus.values():
        if g.gemm_token_gain is None:
            continue
        for engine, by_dtype in g.gemm_token_gain.by_engine.items():
            for dtype, gains in by_dtype.items():
                cur = least.setdefault(g.arch, {}).setdefault(engine, {}).get(dtype)
                least[g.arch][engine][dtype] = (
                    tuple(gains) if cur is None else tuple(map(min, cur, gains))
                )
    assert least == GEMM_TOKEN_GAIN_BY_ARCH


def test_measured_borrowed_and_unmeasured_gains():
    h100 = CAT.gpus["h100-sxm5-80gb"]
    assert gemm_token_gain(h100, "trtllm", "fp8") == (1.14, 1.213, 1.242, 1.257)
    assert gemm_token_gain(h100, "trtllm", "bf16") == (1.043, 1.08, 1.094, 1.096)
    # an engine the entry does not list: the least over the listed engines, per token count
    assert gemm_token_gain(h100, "nim", "fp8") == (1.027, 1.033, 1.023, 1.0)
    assert gemm_token_gain(h100, None, "fp8") == (1.027, 1.033, 1.023, 1.0)
    # H100 NVL (no entry) takes Hopper's least of H100 and H200
    nvl = CAT.gpus["h100-nvl-94gb"]
    assert gemm_token_gain(nvl, "trtllm", "fp8") == (1.11, 1.179, 1.227, 1.239)
    # A100 40GB takes A100 80GB's (Ampere); no FP8 measured on Ampere
    assert gemm_token_gain(CAT.gpus["a100-40gb"], "vllm", "bf16") == (1.056, 1.14, 1.162, 1.167)
    assert gemm_token_gain(CAT.gpus["a100-40gb"], "vllm", "fp8") == ()
    # nothing measures AMD, Gaudi or the A10G's GA102, nor FP4 weights off Blackwell
    for gpu in ("mi300x", "mi325x", "gaudi3", "a10g"):
        for engine in (*ENGINES, None):
            assert gemm_token_gain(CAT.gpus[gpu], engine, "fp8") == ()
            assert gemm_token_gain(CAT.gpus[gpu], engine, "bf16") == ()
    assert gemm_token_gain(CAT.gpus["h100-sxm5-80gb"], "trtllm", "fp4") == ()
    # B200's nvfp4 GEMMs: their own gain, not FP8's
    assert gemm_token_gain(CAT.gpus["b200"], "trtllm", "fp4") == (1.207, 1.478, 1.63, 1.656)


def test_an_unmeasured_gpu_never_gets_a_larger_gain_than_a_measured_one_of_its_architecture():
    for gpu in CAT.gpus.values():
        if gpu.gemm_token_gain is not None:
            continue
        mates = [g for g in CAT.gpus.values() if g.arch == gpu.arch and g.gemm_token_gain]
        for engine in (*ENGINES, "tgi", None):
            for dtype in ("bf16", "fp8", "fp4"):
                mine = gemm_token_gain(gpu, engine, dtype)
                for mate in mates:
                    theirs = gemm_token_gain(mate, engine, dtype)
                    assert all(a <= b for a, b in zip(mine, theirs, strict=True)), gpu.id
                if not mates:
                    assert mine == ()


def test_gain_between_the_measured_token_counts():
    gains = (1.1, 1.2, 1.3, 1.4)
    assert [gain_at_tokens(gains, n) for n in (1, 256, 512)] == [1.0, 1.0, 1.0]
    assert [gain_at_tokens(gains, n) for n in GEMM_GAIN_TOKENS] == pytest.approx(list(gains))
    # linear in log2(tokens): halfway between 1,024 and 2,048 in log2 is 1,448.15
    assert gain_at_tokens(gains, 1024 * 2**0.5) == pytest.approx(1.15)
    assert gain_at_tokens(gains, 724.08) == pytest.approx(1.05, abs=1e-4)
    assert gain_at_tokens(gains, 100_000) == 1.4
    assert gain_at_tokens((), 100_000) == 1.0


@given(st.floats(1, 1e6), st.floats(1, 1e6))
def test_gain_is_monotone_where_the_measured_gains_are(a: float, b: float):
    gains = (1.1, 1.2, 1.3, 1.4)
    lo, hi = sorted((a, b))
    assert 1.0 <= gain_at_tokens(gains, lo) <= gain_at_tokens(gains, hi) <= 1.4


def test_step_dense_gemm_compute_is_divided_by_the_gain():
    # Llama-3.1-8B FP8 on one H100 with TensorRT-LLM: a 2,048-token prefill chunk's FP8
    # GEMMs run 1.213x faster than at 512 tokens (the measured rate, F_gemm x lift), its
    # BF16 lm_head at the BF16 GEMMs' own gain; a 256-token step reads weights; the
    # elementwise kernels come on top of either
    r = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", dtype="fp8", engine="trtllm")
    c = r.coefficients
    assert c.gemm_gain == (1.14, 1.213, 1.242, 1.257)
    g_b = gain_at_tokens(c.wide_gain, 2048)
    assert 1.0 < g_b < 1.213  # BF16 GEMMs gain less
    flat = dataclasses.replace(c, gemm_gain=(), wide_gain=())
    compute = 2048 * c.dense_flops_per_token / (c.f_gemm_per_ms * c.dense_lift)
    wide = 2048 * c.wide_flops_per_token / (c.f_gemm_per_ms * c.dense_lift)
    ew = 2048 * c.elementwise_bytes_per_token / c.w_per_ms
    assert flat.gemm_ms(2048) == pytest.approx(compute + wide + ew)
    assert c.gemm_ms(2048) == pytest.approx(compute / 1.213 + wide / g_b + ew)
    assert c.chunk_compute_ms(2048, 0) == pytest.approx(
        flat.chunk_compute_ms(2048, 0) - compute - wide + compute / 1.213 + wide / g_b
    )
    assert c.gemm_ms(500) == flat.gemm_ms(500)  # no gain at 512 tokens or fewer
    # the step sums it: 2,048 chunk tokens and 64 decodes at a 1,000-token context
    step = c.step_ms(64, 1000.0, 2048, 0)
    assert step == pytest.approx(
        flat.step_ms(64, 1000.0, 2048, 0) - flat.gemm_ms(2112) + c.gemm_ms(2112)
    )
    assert step < flat.step_ms(64, 1000.0, 2048, 0)


def test_a_gpu_nothing_measures_is_priced_at_its_mfu_at_every_step_size():
    r = rl.build_replica(CAT, "llama-3.1-8b", "mi300x", dtype="fp8", engine="vllm")
    c = r.coefficients
    assert c.gemm_gain == () and c.dense_lift == 1.0
    ew = 8192 * c.elementwise_bytes_per_token / c.w_per_ms
    assert c.wide_gain == ()  # nor its BF16 lm_head
    flops = c.dense_flops_per_token + c.wide_flops_per_token
    assert c.gemm_ms(8192) == pytest.approx(8192 * flops / c.f_gemm_per_ms + ew)


@pytest.mark.parametrize(
    "by_engine, field",
    [
        ({"vllm": {"fp8": [0.9, 1.1, 1.2, 1.3]}}, "0"),  # a gain below 1
        ({"vllm": {"fp8": [1.1, 1.2, 1.3]}}, "fp8"),  # three token counts, not four
        ({"vllm": {"int8": [1.1, 1.2, 1.3, 1.4]}}, "int8"),  # a dtype nothing measures
        # 2,048 tokens would take less GEMM time than 1,024 (2.2 > (1 + ln 2) x 1.2)
        ({"sglang": {"bf16": [1.2, 2.2, 2.3, 2.4]}}, "sglang.bf16[1]"),
    ],
)
def test_bad_gain_entries_are_refused_naming_the_field(by_engine, field):
    with pytest.raises(ValidationError) as err:
        GemmTokenGain.model_validate({"by_engine": by_engine, "source": "a kernel benchmark"})
    assert field in str(err.value)


def test_the_analyses_say_which_gain_they_priced():
    from api.cli.calibrate import gemm_gain_text
    from planner.analyses.common import ReplicaSummary

    h200 = rl.build_replica(CAT, "llama-3.1-8b", "h200-sxm-141gb", dtype="fp8", engine="trtllm")
    summary = ReplicaSummary.of(h200)
    assert summary.gemm_gain == [1.11, 1.179, 1.227, 1.239]
    assert summary.gemm_lift == pytest.approx(h200.coefficients.dense_lift)
    assert gemm_gain_text(summary.gemm_gain, 1.326) == (
        "at x1.33 the MFU's rate at 512 tokens (measured kernels), "
        "x1.11 / x1.18 / x1.23 / x1.24 faster at 1,024 / 2,048 / 4,096 / 8,192 tokens per step "
        "than at 512"
    )
    mi300x = ReplicaSummary.of(rl.build_replica(CAT, "llama-3.1-8b", "mi300x", dtype="fp8"))
    assert mi300x.gemm_gain == []
    assert mi300x.gemm_lift == 1.0
    text = gemm_gain_text(mi300x.gemm_gain, mi300x.gemm_lift)
    assert "no measured gain" in text and "at the MFU's rate at 512 tokens" in text


def test_a_larger_step_never_takes_less_gemm_time_on_any_catalog_curve():
    curves = {
        (g.id, e, d): tuple(gains)
        for g in CAT.gpus.values()
        if g.gemm_token_gain is not None
        for e, by_dtype in g.gemm_token_gain.by_engine.items()
        for d, gains in by_dtype.items()
    }
    assert len(curves) == 57  # non-monotone ones too: H100 SGLang fp8 1.117 ... 1.0
    tokens = [256 * 1.01**i for i in range(500)]
    for key, gains in curves.items():
        times = [n / gain_at_tokens(gains, n) for n in tokens]
        assert all(b >= a for a, b in itertools.pairwise(times)), key


def test_with_data_parallel_attention_the_gain_is_a_ranks():
    # DeepSeek-V3 on 8 x H200 with 8 data-parallel attention ranks: a 4,096-token step's
    # dense GEMMs run 512 tokens per rank, where nothing is gained
    r = rl.build_replica(
        CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", engine="sglang", dp=8, ep=8
    )
    c = r.coefficients
    assert c.dp == 8 and c.gemm_gain == (1.126, 1.146, 1.145, 1.066)
    flat = dataclasses.replace(c, gemm_gain=(), wide_gain=())
    assert c.gemm_ms(4096) == flat.gemm_ms(4096)
    assert c.chunk_compute_ms(4096, 0) == flat.chunk_compute_ms(4096, 0)
    # 16,384 tokens: 2,048 per rank, gain 1.146 (the BF16 lm_head its own gain there)
    compute = 16384 * c.dense_flops_per_token / (c.f_gemm_per_ms * c.dense_lift)
    wide = 16384 * c.wide_flops_per_token / (c.f_gemm_per_ms * c.dense_lift)
    weights = 8 * c.dense_weight_bytes / c.w_weights_per_ms
    ew = 16384 * c.elementwise_bytes_per_token / c.w_per_ms
    g_b = gain_at_tokens(c.wide_gain, 2048)
    assert c.gemm_ms(16384) == pytest.approx(max(compute / 1.146 + wide / g_b, weights) + ew)
    assert c.gemm_ms(16384) < flat.gemm_ms(16384)


def test_the_gain_never_lifts_a_gemm_past_its_peak():
    # B200 fp8 with TensorRT-LLM at MFU 1: its FP8 GEMMs reach 0.731 of the FP8 peak x
    # the measured lift (below 1 on B200: its FP8 GEMMs at 512 tokens are slow), and
    # x 1.566 stays below the peak, so no gain is cut
    r = rl.build_replica(
        CAT, "llama-3.1-8b", "b200", dtype="fp8", engine="trtllm", mfu=1.0, kernel_gemm_rate=True
    )
    raw = gemm_token_gain(CAT.gpus["b200"], "trtllm", "fp8")
    assert raw == (1.285, 1.546, 1.566, 1.565)
    d = kn.fp8_gemm_efficiency(CAT.gpus["b200"], "trtllm")
    assert d == 0.731
    assert r.coefficients.dense_lift < 1
    assert d * r.coefficients.dense_lift * max(raw) < 1
    assert r.coefficients.gemm_gain == raw
    # at MFU 0.72 H100's BF16 GEMMs (lift 0.9 x 0.733 / 0.5 = 1.319) reach 0.95 of the
    # peak at 512 tokens: the gains stop at 1 / 0.95
    h72 = rl.build_replica(
        CAT, "llama-3.1-8b", "h100-sxm5-80gb", engine="trtllm", mfu=0.72, kernel_gemm_rate=True
    )
    lifted = 0.72 * h72.coefficients.dense_lift
    assert lifted == pytest.approx(0.72 * 0.9 * 0.733 / 0.5)
    first = gemm_token_gain(CAT.gpus["h100-sxm5-80gb"], "trtllm", "bf16")[0]
    assert first < 1 / lifted
    assert h72.coefficients.gemm_gain == pytest.approx((first, 1 / lifted, 1 / lifted, 1 / lifted))
    # a lift never passes the peak on its own either: H100 BF16 at MFU 0.95
    h = rl.build_replica(
        CAT, "llama-3.1-8b", "h100-sxm5-80gb", engine="trtllm", mfu=0.95, kernel_gemm_rate=True
    )
    assert h.coefficients.dense_lift == pytest.approx(1 / 0.95)
    assert h.coefficients.gemm_gain == pytest.approx((1.0, 1.0, 1.0, 1.0))
    at_peak = rl.build_replica(CAT, "llama-3.1-8b", "b200", dtype="bf16", mfu=1.0)
    assert at_peak.coefficients.gemm_gain == (1.0, 1.0, 1.0, 1.0)
