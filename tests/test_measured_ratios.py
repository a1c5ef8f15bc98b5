"""Measured levels past a guess, and the measured ratios of a GPU's MoE LLMs and FP4 runs
to its level (planner.fidelity.level_ceiling / level_scale, catalog
``efficiency.moe_level_ratio`` / ``fp4_level_ratio``, planner.roofline.moe_level_ratio,
planner.kernel_floors.weight_dtype_derates), worked on synthetic measurements whose
true levels are known and on the shipped catalog."""

from __future__ import annotations

import statistics

import pytest
from pydantic import ValidationError

from catalog.loader import load_catalog
from catalog.schema import Dtype, Efficiency
from planner import calibration as cb
from planner import fidelity as fd
from planner import kernel_floors as kf
from planner import roofline as rl
from planner.calibration.predict import base_replica, with_factors

CAT = load_catalog()
PLAIN = fd.unscaled_catalog(CAT)
MI300X_PRIOR = (0.4, 0.6, 3.0)
B200_PRIOR = (0.45, 0.65, 2.0)


def _point(gpu: str, model: str, measured: float, dtype: Dtype = Dtype.FP8) -> cb.Measurement:
    return cb.Measurement(
        model=model,
        gpu=gpu,
        tp=8,
        dtype=dtype,
        engine="vllm",
        isl=1000,
        osl=500,
        output_tok_s=measured,
        concurrency=64,
        id=f"{gpu}-{model}-{dtype.value}-{measured:.3f}",
    )


def _predicted(gpu: str, model: str, prior, s: float, dtype: Dtype = Dtype.FP8) -> float:
    """Output tokens/s predicted on the unscaled catalog with MFU and MBU x ``s``."""
    m = _point(gpu, model, 1.0, dtype)
    out = cb.predict(m, PLAIN, (prior[0] * s, prior[1] * s, prior[2])).get("output_tok_s")
    assert out is not None
    return out


def _with_efficiency(gpu: str, **update):
    g = CAT.gpus[gpu]
    g = g.model_copy(update={"efficiency": g.efficiency.model_copy(update=update)})
    return CAT.model_copy(update={"gpus": {**CAT.gpus, gpu: g}})


# --------------------------------------------------------------------------- ceiling


def test_level_ceiling_lifts_a_guess_to_the_reference_factors_never_past():
    # H100/H200's analogy factors are 0.5 / 0.7: their own ceiling is 1
    assert fd.level_ceiling(CAT, (0.5, 0.7)) == 1.0
    assert fd.factor_caps(CAT, (0.5, 0.7)) == (0.5, 0.7)
    # MI300X's guess 0.4 / 0.6: measured runs may lift each factor to the reference's,
    # MFU to 0.5 (level 1.25) and MBU to 0.7 (reached at 1.167, held there past it)
    assert fd.factor_caps(CAT, (0.4, 0.6)) == (0.5, 0.7)
    assert fd.level_ceiling(CAT, (0.4, 0.6)) == pytest.approx(0.5 / 0.4)
    assert fd.scaled_factors(CAT, (0.4, 0.6, 3.0), 1.25) == pytest.approx((0.5, 0.7, 3.0))
    assert fd.scaled_factors(CAT, (0.4, 0.6, 3.0), 1.1) == pytest.approx((0.44, 0.66, 3.0))
    assert fd.capped(CAT, (0.4, 0.6), 1.2) and not fd.capped(CAT, (0.4, 0.6), 1.1)
    # a guess at or above the reference's is never lifted (A100 80GB's MFU 0.55)
    assert fd.level_ceiling(CAT, (0.55, 0.7)) == fd.MAX_LEVEL_SCALE == 1.0
    assert fd.factor_caps(CAT, (0.55, 0.7)) == (0.55, 0.7)
    assert fd.scaled_factors(CAT, (0.55, 0.7, 2.0), 1.0) == (0.55, 0.7, 2.0)
    # every factor below its cap at every level up to 1: the analogy's split times it
    for prior in {tuple(fd.prior_factors(CAT, g)) for g in CAT.gpus}:
        for level in (0.5, 0.8, 1.0):
            mfu, mbu, _ = fd.scaled_factors(CAT, prior, level)
            assert (mfu, mbu) == pytest.approx((prior[0] * level, prior[1] * level))


def test_a_level_above_the_guess_stops_at_the_ceiling():
    g, model = "mi300x", "llama-2-70b"
    pts = [_point(g, model, _predicted(g, model, MI300X_PRIOR, 1.4))]
    lv = fd.level_scale(pts, CAT, g, MI300X_PRIOR, {})
    assert lv is not None
    # (the fixed point nears 1.4 from below: the step overhead does not scale)
    assert lv.measured == pytest.approx(1.4, rel=0.05)
    assert lv.scale == pytest.approx(0.5 / 0.4)
    assert lv.scale < lv.measured
    # the scaled factors are the reference GPUs' MFU and MBU, no more
    assert fd.scaled_factors(CAT, MI300X_PRIOR, lv.scale) == pytest.approx((0.5, 0.7, 3.0))


def test_a_capped_level_keeps_the_moe_llms_where_they_measured():
    """Llama-2-70B measured at 1.4 (capped: MFU 0.5, MBU 0.7 where the analogy's split
    would give 0.5 / 0.75), DeepSeek-V3 at 0.6. The MoE ratio is measured against the
    capped factors (not 0.6 / 1.25), so DeepSeek is predicted as at its own level."""
    g = "mi300x"
    pts = [
        _point(g, "llama-2-70b", _predicted(g, "llama-2-70b", MI300X_PRIOR, 1.4)),
        _point(g, "deepseek-v3", _predicted(g, "deepseek-v3", MI300X_PRIOR, 0.6)),
    ]
    lv = fd.level_scale(pts, CAT, g, MI300X_PRIOR, {})
    assert lv is not None and lv.scale == pytest.approx(1.25)
    capped = fd.scaled_factors(CAT, MI300X_PRIOR, lv.scale)
    priced = (capped[0] * lv.moe_ratio, capped[1] * lv.moe_ratio, capped[2])
    m = _point(g, "deepseek-v3", 1.0)
    got = cb.predict(m, PLAIN, priced).get("output_tok_s")
    assert got == pytest.approx(_predicted(g, "deepseek-v3", MI300X_PRIOR, 0.6), rel=0.01)
    # the plain ratio would misprice it: MBU x 0.6 / 1.25 on 0.7 is 0.336, not 0.36
    assert lv.moe_ratio != pytest.approx(0.6 / 1.25, rel=0.005)
    assert fd.moe_ratio_capped(pts, CAT, g, MI300X_PRIOR, lv.scale, {}) == lv.moe_ratio
    # below the caps there is nothing to correct
    assert fd.moe_ratio_capped(pts, CAT, g, MI300X_PRIOR, 1.1, {}) is None


# --------------------------------------------------------------------------- MoE ratio


def test_moe_ratio_is_the_moe_llms_level_over_the_gpus():
    """Dense LLMs measured at 1.1, DeepSeek-V3 at 0.6: the level is the median over the
    three LLMs (1.1) and the MoE ratio 0.6 / 1.1, so DeepSeek is priced at its own 0.6."""
    g = "mi300x"
    pts = [
        _point(g, "llama-2-70b", _predicted(g, "llama-2-70b", MI300X_PRIOR, 1.1)),
        _point(g, "llama-3.1-70b", _predicted(g, "llama-3.1-70b", MI300X_PRIOR, 1.1)),
        _point(g, "deepseek-v3", _predicted(g, "deepseek-v3", MI300X_PRIOR, 0.6)),
    ]
    lv = fd.level_scale(pts, CAT, g, MI300X_PRIOR, {})
    assert lv is not None
    assert lv.scale == pytest.approx(1.1, rel=0.02)
    assert lv.moe_ratio == pytest.approx(0.6 / 1.1, rel=0.03)
    assert lv.fp4_ratio == 1.0
    assert dict(lv.by_model)["deepseek-v3"] == pytest.approx(0.6, rel=0.02)


def test_moe_ratio_never_lifts_and_needs_dense_llms():
    g = "mi300x"
    faster = [
        _point(g, "llama-2-70b", _predicted(g, "llama-2-70b", MI300X_PRIOR, 0.8)),
        _point(g, "deepseek-v3", _predicted(g, "deepseek-v3", MI300X_PRIOR, 1.0)),
    ]
    lv = fd.level_scale(faster, CAT, g, MI300X_PRIOR, {})
    assert lv is not None and lv.moe_ratio == 1.0
    only_moe = [_point(g, "deepseek-v3", _predicted(g, "deepseek-v3", MI300X_PRIOR, 0.6))]
    lv = fd.level_scale(only_moe, CAT, g, MI300X_PRIOR, {})
    assert lv is not None
    assert lv.scale == pytest.approx(0.6, rel=0.02) and lv.moe_ratio == 1.0


def test_moe_llms_below_the_dense_ones_do_not_pull_the_dense_level_down():
    """Llama-2-70B measured at 1.1, DeepSeek-V3 at 0.6 and Mixtral at 0.7: the median over
    the three LLMs (0.7) would price Llama 36% low; the level is the dense median (1.1)
    and the MoE ratio prices the MoE LLMs at theirs (0.65 / 1.1). MoE LLMs measured above
    the dense ones count in the median (1.0 and 1.3: 1.15), the ratio being at most 1."""
    g = "mi300x"
    below = [
        _point(g, "llama-2-70b", _predicted(g, "llama-2-70b", MI300X_PRIOR, 1.1)),
        _point(g, "deepseek-v3", _predicted(g, "deepseek-v3", MI300X_PRIOR, 0.6)),
        _point(g, "mixtral-8x7b", _predicted(g, "mixtral-8x7b", MI300X_PRIOR, 0.7)),
    ]
    lv = fd.level_scale(below, CAT, g, MI300X_PRIOR, {})
    assert lv is not None
    assert lv.scale == pytest.approx(1.1, rel=0.02)
    assert lv.moe_ratio == pytest.approx(0.65 / 1.1, rel=0.03)
    above = [
        _point(g, "llama-2-70b", _predicted(g, "llama-2-70b", MI300X_PRIOR, 1.0)),
        _point(g, "deepseek-v3", _predicted(g, "deepseek-v3", MI300X_PRIOR, 1.3)),
    ]
    lv = fd.level_scale(above, CAT, g, MI300X_PRIOR, {})
    assert lv is not None
    assert lv.scale == pytest.approx(1.15, rel=0.02) and lv.moe_ratio == 1.0


def test_the_moe_ratio_prices_moe_models_only():
    cat = _with_efficiency("mi300x", moe_level_ratio=0.5)
    eff = cat.gpus["mi300x"].efficiency
    moe = rl.build_replica(cat, "deepseek-v3", "mi300x", tp=8, dtype="fp8")
    dense = rl.build_replica(cat, "llama-3.1-70b", "mi300x", tp=8, dtype="fp8")
    assert moe.prefill_mfu == pytest.approx(eff.prefill_mfu * 0.5)
    assert moe.decode_mbu == pytest.approx(eff.decode_mbu * 0.5)
    assert (dense.prefill_mfu, dense.decode_mbu) == (eff.prefill_mfu, eff.decode_mbu)
    # factors a user sets are taken as they are
    mine = rl.build_replica(cat, "deepseek-v3", "mi300x", tp=8, dtype="fp8", mfu=0.3, mbu=0.6)
    assert (mine.prefill_mfu, mine.decode_mbu) == (0.3, 0.6)
    # the calibration prices a GPU's factors the way plans are priced
    m = _point("mi300x", "deepseek-v3", 1.0)
    r = with_factors(base_replica(m, cat), (0.4, 0.6, 3.0))
    assert (r.prefill_mfu, r.decode_mbu) == pytest.approx((0.2, 0.3))


def test_unscaled_catalog_drops_every_measured_ratio():
    cat = _with_efficiency("mi300x", moe_level_ratio=0.5, fp4_level_ratio=1.4)
    plain = fd.unscaled_catalog(cat)
    for g in plain.gpus.values():
        assert (g.efficiency.moe_level_ratio, g.efficiency.fp4_level_ratio) == (1.0, 1.0)
    assert plain.gpus["mi300x"].efficiency.prefill_mfu == cat.gpus["mi300x"].efficiency.prefill_mfu


# --------------------------------------------------------------------------- FP4 ratio


def test_fp4_runs_are_their_own_group_and_give_the_fp4_ratio():
    """FP8 runs at level 0.9, FP4 runs at 1.3 (what the assumed FP4 derates predict x
    1.3/0.9): the level is the FP8 one, the FP4 ratio 1.3 / 0.9."""
    g, model = "b200", "deepseek-v3"
    pts = [
        _point(g, model, _predicted(g, model, B200_PRIOR, 0.9)),
        _point(g, model, _predicted(g, model, B200_PRIOR, 1.3, Dtype.FP4), Dtype.FP4),
    ]
    lv = fd.level_scale(pts, CAT, g, B200_PRIOR, {})
    assert lv is not None
    assert lv.scale == pytest.approx(0.9, rel=0.02)
    assert lv.fp4_ratio == pytest.approx(1.3 / 0.9, rel=0.03)
    assert {name for name, _ in lv.by_model} == {"deepseek-v3", "deepseek-v3 fp4"}


def test_the_fp4_ratio_lifts_the_fp4_derates_up_to_the_peak_ratio_and_the_best_read_share():
    gpu = CAT.gpus["b200"]
    fp8 = kf.fp8_gemm_efficiency(gpu, "trtllm")
    # B200's FP4 GEMMs are measured: 0.239 of the FP4 peak against 0.314 of the FP8 one
    q = kf.fp4_gemm_ratio(gpu, "trtllm")
    assert q == pytest.approx(0.239 / 0.314)
    plain = fd.unscaled_catalog(CAT).gpus["b200"]
    assert kf.weight_dtype_derates(plain, Dtype.FP4, "trtllm") == pytest.approx(
        (q * fp8, kf.FP4_WEIGHT_READ_DERATE)
    )
    lifted = _with_efficiency("b200", fp4_level_ratio=1.1).gpus["b200"]
    assert kf.weight_dtype_derates(lifted, Dtype.FP4, "trtllm") == pytest.approx(
        (q * 1.1 * fp8, kf.FP4_WEIGHT_READ_DERATE * 1.1)
    )
    # never past the FP4 peak ratio (GEMM) nor, reading, past the best-measured GPUs'
    # share of peak bandwidth: B200's MBU 0.5713 reads FP4 at most at 0.7 / 0.5713
    assert gpu.efficiency.decode_mbu == 0.5713 and kf.MAX_WEIGHT_READ_MBU == 0.7
    high = _with_efficiency("b200", fp4_level_ratio=1.9).gpus["b200"]
    assert kf.weight_dtype_derates(high, Dtype.FP4, "trtllm") == pytest.approx((fp8, 0.7 / 0.5713))
    # past 1 below that share: its measured FP4 runs read faster than its level says
    # (0.85 x 1.332 = 1.132, 0.647 of peak)
    shipped = kf.weight_dtype_derates(gpu, Dtype.FP4, "trtllm")
    assert gpu.efficiency.fp4_level_ratio == 1.332
    assert shipped == pytest.approx((min(1.0, q * 1.332) * fp8, 0.85 * 1.332))
    assert gpu.efficiency.decode_mbu * shipped[1] == pytest.approx(0.6468, abs=1e-4)
    # a ratio below 1 (FP4 measured slower than assumed) derates further
    low = _with_efficiency("b200", fp4_level_ratio=0.8).gpus["b200"]
    assert kf.weight_dtype_derates(low, Dtype.FP4, "trtllm")[1] == pytest.approx(0.68)


# --------------------------------------------------------------------------- catalog


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("moe_level_ratio", 1.2),
        ("moe_level_ratio", 0.0),
        ("fp4_level_ratio", 2.5),
        ("fp4_level_ratio", -1.0),
        ("fp4_level_ratio", float("nan")),
        ("level_scale", 2.5),
    ],
)
def test_the_catalog_refuses_ratios_out_of_range(field, value):
    data = CAT.gpus["mi300x"].efficiency.model_dump()
    data[field] = value
    with pytest.raises(ValidationError, match=field):
        Efficiency(**data)


def test_shipped_ratios_are_what_the_measurements_show():
    """The shipped catalog (make calibrate-defaults): MI300X's DeepSeek-V3 below its
    Llama level, B200's FP4 runs above the assumed FP4 derates; the reference GPUs and
    GPUs without such measurements carry no ratio."""
    mi = CAT.gpus["mi300x"].efficiency
    assert mi.moe_level_ratio < 0.8 and mi.level_scale > 1.0
    assert CAT.gpus["b200"].efficiency.fp4_level_ratio > 1.0
    for g in ("h100-sxm5-80gb", "a100-sxm-80gb", "l40s", "gaudi3"):
        eff = CAT.gpus[g].efficiency
        assert (eff.moe_level_ratio, eff.fp4_level_ratio) == (1.0, 1.0), g
    for g in CAT.gpus.values():
        assert g.efficiency.level_scale <= fd.level_ceiling(CAT, fd.prior_factors(CAT, g.id)) + 1e-3


def test_a_gpu_measured_on_moe_only_borrows_its_siblings_dense_gap():
    """MI325X measured on DeepSeek-V3 alone at 0.57; MI300X (same die) serves DeepSeek at
    0.54 of its Llama level 1.167: MI325X's Llama level is 0.57 / 0.54 = 1.06, taken at 1
    (no dense run lifts its guess), its MoE ratio undoing that on MoE models; never above
    the sibling's level nor the ceiling, never below what was measured."""
    dense, ratio = fd.borrowed_dense_level(0.572, 1.167, 0.538, 7 / 6)
    assert dense == 1.0
    assert dense * ratio == pytest.approx(0.572)  # MoE LLMs where they were measured
    assert fd.borrowed_dense_level(0.5, 1.2, 0.8, 1.2) == pytest.approx((0.625, 0.8))
    assert fd.borrowed_dense_level(0.5, 0.55, 0.8, 1.2) == pytest.approx((0.55, 0.5 / 0.55))
    assert fd.borrowed_dense_level(0.9, 1.5, 0.5, 0.95) == pytest.approx((0.95, 0.9 / 0.95))
    # MoE runs above the sibling's own level: held at the sibling's level on every LLM
    # (the unmeasured dense LLMs never above the measured sibling; MoE ratio at most 1)
    assert fd.borrowed_dense_level(0.9, 0.6, 0.5, 1.2) == pytest.approx((0.6, 1.0))
    assert fd.borrowed_dense_level(0.9, 0.6, 0.5, 1.2, matched_ratio=1.4) == pytest.approx(
        (0.6, 1.0)
    )
    assert fd.borrowed_dense_level(1.3, 1.4, 0.5, 1.25) == pytest.approx((1.25, 1.0))


def test_a_gpu_matched_run_for_run_with_its_sibling_takes_the_siblings_dense_level():
    """Matched runs (the same sweep on both GPUs) put MI325X at 0.96 of MI300X's level:
    its Llama level is MI300X's measured 1.167 x 0.96 = 1.12, past the guess's 1 (the
    sibling's dense runs measured the stack), never past the sibling's own level or the
    ceiling, never below what it was measured at; its MoE ratio keeps DeepSeek where it
    was measured."""
    dense, ratio = fd.borrowed_dense_level(0.569, 7 / 6, 0.549, 7 / 6, matched_ratio=0.96)
    assert dense == pytest.approx(7 / 6 * 0.96)
    assert dense * ratio == pytest.approx(0.569)
    assert fd.borrowed_dense_level(0.5, 1.2, 0.8, 1.2, matched_ratio=1.3) == pytest.approx(
        (1.2, 0.5 / 1.2)
    )
    assert fd.borrowed_dense_level(0.5, 1.2, 0.8, 1.1, matched_ratio=0.95)[0] == pytest.approx(1.1)
    assert fd.borrowed_dense_level(0.5, 1.2, 0.8, 1.2, matched_ratio=0.3) == pytest.approx(
        (0.5, 1.0)
    )


def test_mi325x_is_rated_on_dense_llms_by_its_measured_sibling():
    """The shipped catalog: MI325X (DeepSeek-V3 runs only) prices DeepSeek at its measured
    level and Llama at MI300X's measured share of peak times its level relative to MI300X
    on InferenceMAX's runs of both (0.96): not above MI300X's, not at the guess's 1 (which
    rated the same die with faster HBM 11% below MI300X per GPU on Llama-2-70B)."""
    m3, m2 = CAT.gpus["mi325x"].efficiency, CAT.gpus["mi300x"].efficiency
    assert 1.0 < m3.level_scale < m2.level_scale
    assert m3.level_scale == pytest.approx(m2.level_scale * 0.96, abs=0.01)
    # MBU at the reference GPUs' 0.7 on both (planner.fidelity.factor_caps), MFU below
    assert m3.prefill_mfu < m2.prefill_mfu and m3.decode_mbu <= m2.decode_mbu <= 0.7
    # DeepSeek-V3 priced as at its measured level (0.522 of the analogy factors): the
    # capped factors times its MoE ratio predict its runs as the analogy at 0.522 does
    prior = fd.prior_factors(CAT, "mi325x")
    moe = (m3.prefill_mfu * m3.moe_level_ratio, m3.decode_mbu * m3.moe_level_ratio, prior[2])
    runs = [
        m
        for m in cb.load_reference_measurements(CAT)
        if m.gpu == "mi325x" and m.in_fit and fd.saturated_throughput(m)
    ]
    assert len(runs) >= 5
    ratios = []
    for m in runs:
        a = cb.predict(m, PLAIN, moe).get("output_tok_s")
        b = cb.predict(m, PLAIN, (prior[0] * 0.522, prior[1] * 0.522, prior[2])).get("output_tok_s")
        assert a and b
        ratios.append(a / b)
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.03)


def test_fp4_runs_alone_give_no_level():
    g = "b200"
    pts = [
        _point(
            g, "deepseek-v3", _predicted(g, "deepseek-v3", B200_PRIOR, 1.2, Dtype.FP4), Dtype.FP4
        )
    ]
    assert fd.level_scale(pts, CAT, g, B200_PRIOR, {}) is None


def test_an_llm_run_in_fp4_only_counts_at_its_level_over_the_fp4_ratio():
    """B200's shape: DeepSeek-V3 measured in FP8 (0.8) and FP4 (1.0), Llama-2-70B in FP4
    only (1.5). The FP4 ratio is DeepSeek's pair, 1.25; Llama counts at 1.5 / 1.25 = 1.2;
    the level is its dense LLMs' (Llama's 1.2, not the median with DeepSeek's 0.8, which
    MoE LLMs measured below the dense ones never pull it down to) and DeepSeek, an MoE
    LLM, keeps its 0.8 through the MoE ratio."""
    g = "b200"
    pts = [
        _point(g, "deepseek-v3", _predicted(g, "deepseek-v3", B200_PRIOR, 0.8)),
        _point(
            g, "deepseek-v3", _predicted(g, "deepseek-v3", B200_PRIOR, 1.0, Dtype.FP4), Dtype.FP4
        ),
        _point(
            g, "llama-2-70b", _predicted(g, "llama-2-70b", B200_PRIOR, 1.5, Dtype.FP4), Dtype.FP4
        ),
    ]
    lv = fd.level_scale(pts, CAT, g, B200_PRIOR, {})
    assert lv is not None and lv.dense
    assert lv.fp4_ratio == pytest.approx(1.25, rel=0.03)
    assert lv.measured == pytest.approx(1.5 / 1.25, rel=0.03)
    # B200's ceiling: its MFU 0.45 reaches the reference's 0.5 at 1.111 (MBU capped at 0.7)
    assert fd.level_ceiling(CAT, B200_PRIOR) == pytest.approx(0.5 / 0.45)
    assert lv.scale == pytest.approx(min(lv.measured, 0.5 / 0.45))
    # DeepSeek keeps its 0.8: the capped factors (MFU 0.5, MBU 0.7) x the MoE ratio
    # predict it as the analogy's split at 0.8 does
    f = fd.scaled_factors(CAT, B200_PRIOR, lv.scale)
    m = _point(g, "deepseek-v3", 1.0)
    got = cb.predict(m, PLAIN, (f[0] * lv.moe_ratio, f[1] * lv.moe_ratio, f[2]))
    assert got.get("output_tok_s") == pytest.approx(
        _predicted(g, "deepseek-v3", B200_PRIOR, 0.8), rel=0.03
    )


def _run(gpu: str, model: str, measured: float, c: int) -> cb.Measurement:
    return cb.Measurement(
        model=model, gpu=gpu, tp=8, dtype=Dtype.FP8, engine="vllm", isl=1000, osl=500,
        output_tok_s=measured, concurrency=c, id=f"user-{gpu}-{model}-{c}",
    )  # fmt: skip


def test_a_users_calibration_on_moe_runs_prices_them_without_the_public_ratio():
    """A user's MI300X DeepSeek-V3 runs, measured at what MFU 0.35 / MBU 0.6 predict
    without any ratio: the calibration fits about those factors (not "dense-equivalent"
    ones past the peak), and applied, prices DeepSeek as measured: the public MoE ratio
    no longer multiplies them. A calibration on dense runs keeps the public ratio for MoE
    models, which it did not measure."""
    from planner.calibration import apply_calibration, fit_calibration

    g, moe = "mi300x", "deepseek-v3"
    runs = []
    for c in (8, 32, 128):
        m = _run(g, moe, 1.0, c)
        got = cb.predict(m, PLAIN, (0.35, 0.6, 3.0)).output_tok_s
        runs.append(_run(g, moe, got, c))
    cal = fit_calibration("user-moe", runs, CAT)
    (fit,) = cal.factors
    assert fit.decode_mbu < 0.9
    applied = apply_calibration(CAT, cal)
    assert applied.gpus[g].efficiency.moe_level_ratio == 1.0
    for m in runs:
        assert cb.predict(m, applied).output_tok_s == pytest.approx(m.output_tok_s, rel=0.05)
    dense = "llama-3.1-70b"
    runs = []
    for c in (8, 32, 128):
        m = _run(g, dense, 1.0, c)
        runs.append(_run(g, dense, cb.predict(m, PLAIN, (0.4, 0.65, 3.0)).output_tok_s, c))
    applied = apply_calibration(CAT, fit_calibration("user-dense", runs, CAT))
    ratio = applied.gpus[g].efficiency.moe_level_ratio
    assert ratio == CAT.gpus[g].efficiency.moe_level_ratio < 1.0


def test_the_report_says_which_moe_ratio_priced_a_gpu():
    from planner.report.text import factors_text

    gpu = {"provenance": "scaled", "points": 28, "sigma_log": 0.697, "level_scale": 1.167}
    assert factors_text(gpu) == "scaled x1.17 to 28 pts, sigma 0.70"
    moe = {**gpu, "moe_level_ratio": 0.537}
    assert factors_text(moe) == "scaled x1.17 to 28 pts (MoE x0.54), sigma 0.70"
    # a plan's assumptions carry the ratio that priced each GPU for its model
    from planner.service import make_plan

    req = {
        "model": "deepseek-v3",
        "traffic": {"rate_rps": 5, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": ["mi300x"], "dtypes": ["fp8"]},
    }
    plan = make_plan(req, CAT, alternatives=False, verify=False)
    got = plan.assumptions["gpus"]["mi300x"]
    assert got["moe_level_ratio"] == CAT.gpus["mi300x"].efficiency.moe_level_ratio < 1.0
    assert got["decode_mbu"] == pytest.approx(0.7 * got["moe_level_ratio"])


def test_no_gpu_borrowing_a_measured_gemm_share_is_capped():
    """planner.kernel_floors.dense_gemm_lift recovers a share-borrowing GPU's analogy MFU
    as prefill_mfu / level_scale, which holds only where scaled_factors did not cap its
    MFU (H100 NVL, H100 PCIe, A100 40GB, L4: levels at most 1)."""
    for gpu in CAT.gpus.values():
        if gpu.gemm_peak_share is not None or kf.gemm_peak_share(gpu, "vllm", "bf16") is None:
            continue
        prior = fd.prior_factors(CAT, gpu.id)
        assert not fd.capped(CAT, prior, gpu.efficiency.level_scale), gpu.id
        mfu_a = gpu.efficiency.prefill_mfu / gpu.efficiency.level_scale
        assert mfu_a == pytest.approx(prior[0], abs=1e-3), gpu.id


def test_a_lifted_fp4_read_never_runs_past_the_best_read_share_of_peak():
    """B200's FP4 reads at r = 1.332 run at 0.85 x 1.332 = 1.132 of its MBU 0.5713 (0.647
    of peak); a hand-set MBU of 0.9 keeps its own share (x1, not x1.132: 1.02 of peak)."""
    import planner.roofline as rl

    gpu = CAT.gpus["b200"]
    peak_per_ms = gpu.mem_bw_tbps * 1e12 / 1e3
    shipped = rl.build_replica(CAT, "llama-3.1-70b", "b200", 1, "fp4", check_fit=False)
    c = shipped.coefficients
    assert c.w_weights_per_ms / c.w_per_ms == pytest.approx(0.85 * 1.332)
    assert c.w_weights_per_ms / peak_per_ms == pytest.approx(0.5713 * 0.85 * 1.332, rel=1e-6)
    hand = rl.build_replica(CAT, "llama-3.1-70b", "b200", 1, "fp4", mbu=0.9, check_fit=False)
    h = hand.coefficients
    assert h.w_weights_per_ms / peak_per_ms == pytest.approx(0.9)
    assert h.w_weights_per_ms <= peak_per_ms
