"""Data-parallel attention measured per GPU (``efficiency.dp_attention_level_ratio``).

MI355X's disaggregated DeepSeek runs with data-parallel attention and wide expert
parallelism (InferenceX, 512-4,096 users) measured well below what its level predicts,
while NVIDIA's (B200, GB200, GB300, H200) measured at or above theirs. Calibration
measures the level of each GPU's data-parallel-attention runs over its factors, never
above 1, and plans price replicas with ``dp > 1`` at it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from catalog.loader import load_catalog
from catalog.schema import Efficiency
from planner import calibration as cb
from planner import fidelity as fd
from planner import roofline as rl
from planner.calibration.predict import base_replica, with_factors, with_measured_ratios
from planner.service import make_plan

CAT = load_catalog()
POINTS = cb.load_reference_measurements(CAT)


def _with_ratio(gpu: str, ratio: float):
    g = CAT.gpus[gpu]
    eff = g.efficiency.model_copy(update={"dp_attention_level_ratio": ratio})
    return CAT.model_copy(
        update={"gpus": {**CAT.gpus, gpu: g.model_copy(update={"efficiency": eff})}}
    )


def _without_dp_ratios(cat):
    """``cat`` with every GPU's MoE and FP4 ratios as shipped, no data-parallel one."""
    return with_measured_ratios(
        cat,
        {
            g: (gpu.efficiency.moe_level_ratio, gpu.efficiency.fp4_level_ratio)
            for g, gpu in cat.gpus.items()
        },
    )


def _dp_points(gpu: str, split: str | None = None):
    pts = {None: POINTS, "fit": cb.fit_points(POINTS), "holdout": cb.holdout_points(POINTS)}
    return [
        m
        for m in pts[split]
        if m.gpu == gpu and fd.uses_dp_attention(m) and fd.saturated_throughput(m)
    ]


def test_the_ratio_prices_only_replicas_with_data_parallel_attention():
    cat = _with_ratio("mi355x", 0.5)
    eff = cat.gpus["mi355x"].efficiency
    moe = cat.gpus["mi355x"].efficiency.moe_level_ratio
    wide = rl.build_replica(cat, "deepseek-v3", "mi355x", tp=8, dtype="fp8", dp=8, ep=8)
    plain = rl.build_replica(cat, "deepseek-v3", "mi355x", tp=8, dtype="fp8", ep=8)
    assert wide.prefill_mfu == pytest.approx(eff.prefill_mfu * moe * 0.5)
    assert wide.decode_mbu == pytest.approx(eff.decode_mbu * moe * 0.5)
    assert (plain.prefill_mfu, plain.decode_mbu) == pytest.approx(
        (eff.prefill_mfu * moe, eff.decode_mbu * moe)
    )
    assert rl.dp_level_ratio(cat.gpus["mi355x"], 1) == 1.0
    assert rl.dp_level_ratio(cat.gpus["mi355x"], 2) == 0.5
    # factors a user sets are taken as they are
    mine = rl.build_replica(
        cat, "deepseek-v3", "mi355x", tp=8, dtype="fp8", dp=8, ep=8, mfu=0.3, mbu=0.6
    )
    assert (mine.prefill_mfu, mine.decode_mbu) == (0.3, 0.6)
    # the calibration prices a run's factors the way plans are priced
    m = next(p for p in POINTS if p.gpu == "mi355x" and p.dp_attention)
    r = with_factors(base_replica(m, cat), (0.4, 0.6, 3.0))
    assert (r.prefill_mfu, r.decode_mbu) == pytest.approx((0.4 * moe * 0.5, 0.6 * moe * 0.5))


@pytest.mark.parametrize("value", [1.2, 0.0, -0.5, float("nan")])
def test_the_catalog_refuses_a_ratio_out_of_range(value):
    data = CAT.gpus["mi355x"].efficiency.model_dump()
    data["dp_attention_level_ratio"] = value
    with pytest.raises(ValidationError, match="dp_attention_level_ratio"):
        Efficiency(**data)


def test_unscaled_and_partial_ratio_catalogs_drop_the_ratio():
    cat = _with_ratio("mi355x", 0.5)
    assert fd.unscaled_catalog(cat).gpus["mi355x"].efficiency.dp_attention_level_ratio == 1.0
    assert _without_dp_ratios(cat).gpus["mi355x"].efficiency.dp_attention_level_ratio == 1.0
    three = with_measured_ratios(cat, {"mi355x": (0.9, 1.1, 0.7)})
    eff = three.gpus["mi355x"].efficiency
    assert (eff.moe_level_ratio, eff.fp4_level_ratio, eff.dp_attention_level_ratio) == (
        0.9,
        1.1,
        0.7,
    )


def test_shipped_ratios_are_what_the_runs_show():
    """MI355X: its two fit runs at 4,096 users measured at 0.64 and 0.78 of what its
    factors predict, and with two runs the one over-rated most sets the ratio; NVIDIA's
    data-parallel-attention runs at or above theirs: no ratio. AMD's GPUs without such
    runs take MI355X's (the same ROCm serving stack); other vendors' carry none."""
    mi355x = CAT.gpus["mi355x"].efficiency
    assert 0.4 < mi355x.dp_attention_level_ratio < 0.6
    for g in ("b200", "gb200-per-gpu", "gb300-per-gpu", "h200-sxm-141gb"):
        assert len(_dp_points(g)) >= 2, g
        assert CAT.gpus[g].efficiency.dp_attention_level_ratio == 1.0, g
    for g, gpu in CAT.gpus.items():
        if _dp_points(g):
            continue
        want = mi355x.dp_attention_level_ratio if gpu.vendor == "AMD" else 1.0
        assert gpu.efficiency.dp_attention_level_ratio == want, g
    assert "it takes mi355x's measured" in " ".join(CAT.gpus["mi300x"].efficiency.reason.split())


def test_the_ratio_is_where_the_fit_runs_are_predicted_as_measured():
    plain = _without_dp_ratios(CAT)
    factors = fd.shipped_factors(CAT)["mi355x"]
    fit = cb.fit_points(POINTS)
    ratio, n = fd.dp_attention_ratio(fit, plain, "mi355x", factors)
    assert n == 2
    assert ratio == pytest.approx(CAT.gpus["mi355x"].efficiency.dp_attention_level_ratio, abs=6e-4)
    # two runs: the one the model over-rates most is predicted as measured, none above
    over = [cb.predict(m, CAT).output_tok_s / m.output_tok_s for m in _dp_points("mi355x", "fit")]
    assert max(over) == pytest.approx(1.0, abs=0.01)
    # NVIDIA's measure above their factors: the ratio would lift them, so it is 1
    b200, runs = fd.dp_attention_ratio(fit, plain, "b200", fd.shipped_factors(CAT)["b200"])
    assert b200 == 1.0 and runs == len(_dp_points("b200", "fit")) >= 2
    # one run is not enough to lower a GPU's factors
    one = _dp_points("mi355x", "fit")[:1]
    assert fd.dp_attention_ratio(one, plain, "mi355x", factors) == (1.0, 1)


def test_a_median_of_three_runs_sets_the_ratio():
    """Three MI355X runs (its two fit runs and the held-out one, over-rated 1.29-1.69x
    without a ratio): the ratio at which their median is predicted as measured lies
    between the runs' own levels."""
    plain = _without_dp_ratios(CAT)
    factors = fd.shipped_factors(CAT)["mi355x"]
    three = _dp_points("mi355x")
    assert len(three) == 3
    ratio, n = fd.dp_attention_ratio(three, plain, "mi355x", factors)
    singles = [fd.dp_attention_ratio([m, m], plain, "mi355x", factors)[0] for m in three]
    assert n == 3 and min(singles) < ratio < max(singles)
    got = sorted(
        m.output_tok_s / cb.predict(m, _with_ratio("mi355x", ratio), factors).output_tok_s
        for m in three
    )
    assert got[1] == pytest.approx(1.0, abs=0.01)


def test_the_held_out_run_is_predicted_closer():
    """MI355X's held-out run with data-parallel attention (7,373 / 922 tokens, 512 users),
    not used for the ratio: predicted at 1.69x measured without it, closer with it."""
    (held,) = _dp_points("mi355x", "holdout")
    without = cb.predict(held, _without_dp_ratios(CAT)).output_tok_s / held.output_tok_s
    shipped = cb.predict(held, CAT).output_tok_s / held.output_tok_s
    assert without > 1.5
    assert abs(shipped - 1) < abs(without - 1)


def test_a_deepseek_plan_on_mi355x_prices_its_wide_layouts_at_the_ratio():
    request = {
        "model": "deepseek-v3",
        "traffic": {"rate_rps": 30, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": ["mi355x"], "dtypes": ["fp4"]},
    }
    shipped = make_plan(request, CAT, alternatives=False, verify=False)
    unrated = make_plan(request, _with_ratio("mi355x", 1.0), alternatives=False, verify=False)
    assert shipped.status.value == unrated.status.value == "optimal"
    assert shipped.cost_usd_per_hour > unrated.cost_usd_per_hour
    assert shipped.assumptions["gpus"]["mi355x"]["dp_attention_level_ratio"] == (
        CAT.gpus["mi355x"].efficiency.dp_attention_level_ratio
    )
    eff = CAT.gpus["mi355x"].efficiency
    for pool in unrated.pools:
        if pool.dp > 1:  # the same layout, priced at the ratio in the shipped catalog
            wide = rl.build_replica(
                CAT, "deepseek-v3", "mi355x", tp=pool.tp, dtype="fp4", dp=pool.dp, ep=pool.ep
            )
            assert wide.decode_mbu == pytest.approx(
                eff.decode_mbu * eff.moe_level_ratio * eff.dp_attention_level_ratio
            )


def test_a_draft_model_runs_without_its_targets_ratios_and_keeps_a_users_factors():
    """Mixtral at dp 8 on MI355X drafting with Mistral-7B: the draft (dp 1, dense) runs at
    the GPU's catalog factors, without the target's MoE and data-parallel ratios; factors
    the user set are the draft's too, never lifted past them (MBU 0.6 / 0.498 would be 1.2)."""
    from planner.roofline.speculative import _draft_factors

    gpu = CAT.gpus["mi355x"]
    eff = gpu.efficiency_for("fp8")
    target = rl.build_replica(CAT, "mixtral-8x7b", "mi355x", tp=8, dtype="fp8", dp=8, ep=8)
    draft = CAT.models["mistral-7b-v0.1"]
    assert _draft_factors(target, draft) == pytest.approx((eff.prefill_mfu, eff.decode_mbu))
    mine = rl.build_replica(
        CAT, "mixtral-8x7b", "mi355x", tp=8, dtype="fp8", dp=8, ep=8, mfu=0.35, mbu=0.6
    )
    assert _draft_factors(mine, draft) == (0.35, 0.6)
    spec = rl.with_speculation(
        CAT, mine, "draft_model", draft_tokens=3, acceptance_length=2.0, draft_model=draft.id
    )
    assert spec.speculative is not None


def test_a_users_calibration_on_dp_runs_replaces_the_public_ratio():
    """Applied, a calibration whose runs used data-parallel attention on MI355X prices them
    by its own fit (the public 0.498 would count their shortfall twice); one stored before
    runs recorded it (dp_attention None) is read the same way; runs without it keep it."""
    from planner.calibration import apply_calibration, fit_calibration

    runs = _dp_points("mi355x", "fit")
    cal = fit_calibration("user-dp", runs, CAT)
    assert all(r.dp_attention for r in cal.residuals)
    assert apply_calibration(CAT, cal).gpus["mi355x"].efficiency.dp_attention_level_ratio == 1.0
    stored = cal.model_validate_json(
        cal.model_dump_json().replace('"dp_attention":true', '"dp_attention":null')
    )
    assert all(r.dp_attention is None for r in stored.residuals)
    assert apply_calibration(CAT, stored).gpus["mi355x"].efficiency.dp_attention_level_ratio == 1.0
    plain = [m for m in cb.fit_points(POINTS) if m.gpu == "mi355x" and not fd.uses_dp_attention(m)]
    kept = apply_calibration(CAT, fit_calibration("user-plain", plain[:6], CAT))
    assert kept.gpus["mi355x"].efficiency.dp_attention_level_ratio == (
        CAT.gpus["mi355x"].efficiency.dp_attention_level_ratio
    )


def test_dp_copies_of_the_dense_weights_take_the_checkpoints_width():
    """DeepSeek-V3 MXFP4 at dp 8 on MI355X: every attention rank holds its own copy of the
    non-expert weights as the checkpoint holds them: its quantized layers at 4.25 bits, its
    attention, embeddings, norms and routers in BF16."""
    from planner import architecture as arch

    model = CAT.models["deepseek-v3"]
    wide = rl.build_replica(CAT, "deepseek-v3", "mi355x", tp=8, dtype="fp4", dp=8, ep=8)
    layers = wide.bf16_layers
    assert layers == ("attention",)
    bf16 = arch.bf16_param_count(model, layers)
    dense = (arch.dense_weight_param_count(model) - bf16) * 4.25 / 8 + bf16 * 2
    total = (arch.total_param_count(model) - bf16) * 4.25 / 8 + bf16 * 2
    assert arch.dense_weight_bytes(model, "fp4", "mxfp4", layers) == pytest.approx(dense)
    assert rl.replica_weight_bytes(wide) == pytest.approx(total + 7 * dense)
