"""Levels: analogy factors scaled to measured saturated throughput
(planner.fidelity.level_scale and friends), worked on synthetic measurements whose
true level is known."""

from __future__ import annotations

import math

import pytest

from catalog.loader import load_catalog
from catalog.schema import ANALOGY_LEVEL_SCALE, Dtype
from planner import calibration as cb
from planner import fidelity as fd
from planner import risk

CAT = load_catalog()
PRIOR = (0.5, 0.7, 2.0)


def _point(gpu: str, model: str, measured: float, **load) -> cb.Measurement:
    return cb.Measurement(
        model=model,
        gpu=gpu,
        tp=1,
        dtype=Dtype.FP8,
        engine="vllm",
        isl=1000,
        osl=500,
        output_tok_s=measured,
        id=f"{gpu}-{model}-{measured:.3f}-{sorted(load.items())}",
        **load,
    )


def _predicted(gpu: str, model: str, s: float, **load) -> float:
    m = _point(gpu, model, 1.0, **load)
    out = cb.predict(m, CAT, (PRIOR[0] * s, PRIOR[1] * s, PRIOR[2])).get("output_tok_s")
    assert out is not None
    return out


def test_saturated_throughput_excludes_offered_load():
    assert fd.saturated_throughput(_point("h100-sxm5-80gb", "llama-3.1-8b", 1.0))  # offline
    assert fd.saturated_throughput(_point("h100-sxm5-80gb", "llama-3.1-8b", 1.0, concurrency=8))
    inf = _point("h100-sxm5-80gb", "llama-3.1-8b", 1.0, request_rate_rps=math.inf)
    assert fd.saturated_throughput(inf)
    # a finite rate measures the load offered, not the GPU
    rate = _point("h100-sxm5-80gb", "llama-3.1-8b", 1.0, request_rate_rps=2.0)
    assert not fd.saturated_throughput(rate)


def test_level_recovers_a_known_level():
    """Points measured at what factors x0.6 predict give level 0.6 (a fixed point:
    the step overhead does not scale, so the first ratio alone would not)."""
    g, model = "h100-sxm5-80gb", "llama-3.1-8b"
    pts = [
        _point(g, model, _predicted(g, model, 0.6, concurrency=c), concurrency=c)
        for c in (8, 32, 128)
    ]
    lv = fd.level_scale(pts, CAT, g, PRIOR)
    assert lv is not None and lv.values == 3
    assert lv.scale == pytest.approx(0.6, rel=0.01)
    assert lv.median_ratio > 0.6  # the overhead does not scale with the factors
    # finite-rate points do not count; without saturated points there is no level
    rated = [_point(g, model, 10.0, request_rate_rps=1.0)]
    assert fd.level_scale(rated, CAT, g, PRIOR) is None


def test_level_never_raises_a_guess():
    g, model = "h100-sxm5-80gb", "llama-3.1-8b"
    fast = [_point(g, model, 2 * _predicted(g, model, 1.0, concurrency=16), concurrency=16)]
    lv = fd.level_scale(fast, CAT, g, PRIOR)
    assert lv is not None and lv.scale == fd.MAX_LEVEL_SCALE == 1.0


def test_level_is_relative_to_the_reference_gpus_on_the_same_llm():
    """When the model misses an LLM on the reference GPUs too (they run at 0.5 of its
    prediction), that miss is the LLM's, not the GPU's: a GPU measured at 0.4 of its
    prediction on that LLM has level 0.8, and its throughput relative to the reference
    is then predicted as measured."""
    ref, g, model = "h100-sxm5-80gb", "h200-sxm-141gb", "llama-3.1-8b"
    ref_pts = [_point(ref, model, _predicted(ref, model, 0.5, concurrency=32), concurrency=32)]
    targets = fd.level_targets(ref_pts, CAT, {ref: PRIOR}, reference=(ref,))
    assert targets[model] == pytest.approx(
        ref_pts[0].output_tok_s / _predicted(ref, model, 1.0, concurrency=32)
    )
    pts = [_point(g, model, _predicted(g, model, 0.4, concurrency=32), concurrency=32)]
    lv = fd.level_scale(pts, CAT, g, PRIOR, targets)
    assert lv is not None
    got = _predicted(g, model, lv.scale, concurrency=32) / _predicted(
        ref, model, 1.0, concurrency=32
    )
    want = pts[0].output_tok_s / ref_pts[0].output_tok_s
    assert got == pytest.approx(want, rel=0.02)
    # an LLM without reference data is taken at its absolute level
    alone = fd.level_scale(pts, CAT, g, PRIOR, {})
    assert alone is not None and alone.scale == pytest.approx(0.4, rel=0.01)
    # each LLM counts once: the median over LLMs, not over points
    many = pts * 5 + [
        _point(
            g, "llama-3.1-70b", _predicted(g, "llama-3.1-70b", 0.9, concurrency=8), concurrency=8
        )
    ]
    mixed = fd.level_scale(many, CAT, g, PRIOR, {})
    assert mixed is not None and mixed.scale == pytest.approx((0.4 + 0.9) / 2, rel=0.02)


def test_analogy_level_never_above_a_measured_sibling():
    levels = {"b200": 0.5, "h100-sxm5-80gb": 1.0, "mi300x": 0.83}
    # GB200 is B200's Blackwell: the lower of the default and B200's level
    assert fd.analogy_level_scale("gb200-per-gpu", CAT, levels, 0.82) == 0.5
    # H100 PCIe (Hopper): the default, a sibling measured higher does not raise it
    assert fd.analogy_level_scale("h100-pcie-80gb", CAT, levels, 0.82) == 0.82
    assert fd.analogy_level_scale("gaudi3", CAT, levels, ANALOGY_LEVEL_SCALE) == (
        ANALOGY_LEVEL_SCALE
    )


def test_factor_spread_is_the_robust_log_spread():
    g, model = "h100-sxm5-80gb", "llama-3.1-8b"
    exact = _predicted(g, model, 1.0, concurrency=16)
    pts = [_point(g, model, exact * f, concurrency=16) for f in (math.exp(0.2), math.exp(-0.2))]
    got = fd.factor_spread(pts, CAT, PRIOR)
    # 1.4826 x median |log| x sqrt(n / (n - 1)), n = 2, for both spreads
    assert got.sigma_log == pytest.approx(1.4826 * 0.2 * math.sqrt(2), rel=1e-6)
    assert got.downside_sigma_log == pytest.approx(got.sigma_log)
    assert fd.factor_spread([_point(g, model, exact, concurrency=16)], CAT, PRIOR) == (
        cb.Spreads(cb.MIN_SIGMA_LOG, cb.MIN_SIGMA_LOG)
    )
    # errors that lean one way: 3 of 10 throughputs 26% under the prediction (ln 0.3),
    # 7 on it; the derate at 0.8 must be cleared by 8 of 10, so the spread is the one
    # whose derate is exp(-0.3), 0.3 / 0.8416 x sqrt(10 / 9) (one fitted level); with
    # absolute errors it would be the band's 0.3 / 1.645
    lean = [_point(g, model, exact * math.exp(-0.3), concurrency=16)] * 3
    lean += [_point(g, model, exact, concurrency=16)] * 7
    z_c = risk.z_for_confidence(risk.DEFAULT_CONFIDENCE)
    got = fd.factor_spread(lean, CAT, PRIOR)
    assert got.sigma_log == pytest.approx(0.3 / z_c * math.sqrt(10 / 9), rel=1e-6)
    assert got.downside_sigma_log == pytest.approx(got.sigma_log)
    # leaning the safe way (3 of 10 measured 35% over the prediction, ln 0.3): the band
    # must hold 9 of 10, so its spread is 0.3 / 1.645 x sqrt(10 / 9); the derates at 0.8
    # and 0.9 are cleared by every value, so the downside spread is the floor
    safe = [_point(g, model, exact * math.exp(0.3), concurrency=16)] * 3
    safe += [_point(g, model, exact, concurrency=16)] * 7
    got = fd.factor_spread(safe, CAT, PRIOR)
    assert got.sigma_log == pytest.approx(0.3 / risk.Z_BAND * math.sqrt(10 / 9), rel=1e-6)
    assert got.downside_sigma_log == cb.MIN_SIGMA_LOG


def test_source_roots_count_publishers_not_files():
    roots = fd.source_roots(
        [
            _point("gaudi3", "llama-3.1-8b", 1.0).model_copy(update={"source": src})
            for src in (
                "https://intel.com/content/www/us/en/developer/platform/gaudi/model-performance.html",
                "https://www.intel.com/other#anchor",
                "https://github.com/mlcommons/inference_results_v4.1/blob/abc/closed/AMD/x.txt",
                "https://github.com/mlcommons/inference_results_v4.1/blob/abc/closed/NV/y.txt",
                "https://github.com/dstackai/benchmarks/blob/06c/raw.json (section 2)",
                "https://www.amd.com/ja/developer/resources/rocm-hub/dev-ai/performance-results.html",
                "https://github.com/ROCm/vllm/blob/040de12/docs/dev-docker/README.md",
                None,
            )
        ]
    )
    # AMD's page and AMD's ROCm organisation on GitHub are one publisher
    assert roots == {
        "intel.com",
        "github.com/mlcommons/inference_results_v4.1",
        "github.com/dstackai/benchmarks",
        "amd.com",
    }


def _run(
    gpu: str, measured: float, concurrency: float, src: str = "https://x.org/a"
) -> cb.Measurement:
    return _point(gpu, "llama-3.1-8b", measured, concurrency=concurrency).model_copy(
        update={"source": src, "id": f"{gpu}-{concurrency}-{src}"}
    )


def test_matched_runs_pair_one_publishers_same_run_on_two_gpus():
    """Same publisher, LLM, formats, engine, parallelism, shape and load: a pair; any of
    them different (another publisher's host, another concurrency, a finite rate that
    measures the offered load): none. Each sibling run is used once."""
    a, b = "mi325x", "mi300x"
    pts = [
        _run(a, 10.0, 8),
        _run(b, 9.0, 8, "https://x.org/other-file"),  # same publisher, another file
        _run(a, 20.0, 16),
        _run(b, 18.0, 16, "https://y.org/a"),  # another publisher
        _run(a, 30.0, 32),
        _run(b, 27.0, 64),  # another load
        _point(a, "llama-3.1-8b", 5.0, request_rate_rps=2.0).model_copy(
            update={"source": "https://x.org/a"}
        ),
        _point(b, "llama-3.1-8b", 5.0, request_rate_rps=2.0).model_copy(
            update={"source": "https://x.org/a"}
        ),
    ]
    pairs = fd.matched_runs(pts, a, b)
    assert [(x.output_tok_s, y.output_tok_s) for x, y in pairs] == [(10.0, 9.0)]
    assert fd.matched_runs([*pts, _run(a, 11.0, 8)], a, b) == pairs  # b's run used once


def test_paired_level_recovers_a_known_relative_level():
    """MI325X runs measured at exactly what its factors x 0.9 predict, beside MI300X's
    same runs measured at what its factors x 0.6 predict, then both multiplied by the
    same per-run error (what a publisher's engine version does to both GPUs): MI325X's
    paired level against MI300X at 0.6 is 0.9, whatever that error."""
    plain = fd.unscaled_catalog(CAT)
    prior = (0.4, 0.6, 3.0)

    def pred(gpu: str, c: float, s: float) -> float:
        m = _run(gpu, 1.0, c)
        out = cb.predict(m, plain, (prior[0] * s, prior[1] * s, prior[2])).get("output_tok_s")
        assert out is not None
        return out

    pairs = [
        (
            _run("mi325x", pred("mi325x", c, 0.9) * e, c),
            _run("mi300x", pred("mi300x", c, 0.6) * e, c),
        )
        for c, e in ((4, 0.7), (16, 1.3), (64, 0.5))
    ]
    assert fd.paired_level(pairs, CAT, prior, prior, 0.6) == pytest.approx(0.9, rel=2e-3)
    # the sibling judged at a level its runs do not show moves the answer with it
    assert fd.paired_level(pairs, CAT, prior, prior, 0.3) < 0.9
    assert fd.paired_level([], CAT, prior, prior, 0.6) == 0.6


def test_mi325x_runs_as_mi300x_on_the_runs_published_for_both():
    """InferenceMAX's DeepSeek-V3 SGLang sweep ran on MI300X and MI325X: on the matched
    runs the measured MI325X / MI300X ratio (1.0-1.17) is what the model predicts at one
    level (its faster HBM), so MI325X's paired level is MI300X's within 10%."""
    pts = [m for m in cb.load_reference_measurements(CAT) if m.usable]
    pairs = [
        (a, b) for a, b in fd.matched_runs(pts, "mi325x", "mi300x") if a.model == "deepseek-v3"
    ]
    assert len(pairs) >= fd.MIN_MATCHED_RUNS
    prior = fd.prior_factors(CAT, "mi325x")
    assert fd.prior_factors(CAT, "mi300x") == prior
    level = fd.paired_level(pairs, CAT, prior, prior, 0.64)
    assert 0.9 < level / 0.64 < 1.1


def test_the_downside_spread_is_written_only_where_narrower():
    """scripts/calibration_levels.downside_line (used by both calibration scripts): a
    downside spread narrower than sigma_log at 3 decimals gets its line, else none."""
    from script_support import load_script

    line = load_script("calibration_levels").downside_line
    assert line(0.266, 0.264) == "  downside_sigma_log: 0.264\n"
    assert line(0.155, 0.155) == line(0.2, None) == line(0.2, 0.2002) == ""
