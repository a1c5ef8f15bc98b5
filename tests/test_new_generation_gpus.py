"""MI355X, B300 and GB300: measured on DeepSeek-R1 only (InferenceX), their dense-LLM
levels judged by a measured GPU (a sibling of the architecture, or the vendor's
predecessor with runs matched on both), never rated above it."""

from __future__ import annotations

from typing import Any

import pytest
from script_support import load_script

from catalog.loader import load_catalog
from planner import calibration as cb
from planner import fidelity as fd

CAT = load_catalog()
LEVELS = load_script("calibration_levels")


def _entry(gpu: str, scale: float, *, dense: bool, moe_ratio: float = 1.0) -> dict:
    prior = fd.prior_factors(CAT, gpu)
    return {
        "provenance": "scaled",
        "factors": fd.scaled_factors(CAT, prior, scale),
        "prior": prior,
        "level": fd.LevelScale(
            gpu=gpu,
            scale=scale,
            values=10,
            median_ratio=1.0,
            by_model=(("deepseek-v3", scale * moe_ratio),)
            + ((("llama-2-70b", scale),) if dense else ()),
            moe_ratio=moe_ratio,
            measured=scale,
            dense=dense,
        ),
        "points": 10,
        "sigma_log": 0.73,
        "moe_ratio": moe_ratio,
        "fp4_ratio": 1.0,
    }


def _plan(mi355x_level: float) -> dict:
    return {
        "mi300x": _entry("mi300x", 1.0, dense=True, moe_ratio=0.5),
        "mi355x": _entry("mi355x", mi355x_level, dense=False),
    }


def test_a_predecessor_caps_the_level_and_lends_no_gap():
    """MI355X (CDNA 4) has no measured sibling of its architecture: MI300X, its
    predecessor, only caps it. Its MoE level stands for dense LLMs too (MI300X's gap
    between dense and MoE kernels is not borrowed, with or without runs matched on
    both), and it is recorded as judged by MI300X."""
    fit = cb.fit_points(cb.load_reference_measurements(CAT))
    for points in ([], fit):
        plan = _plan(0.6)
        LEVELS.borrow_dense_levels(CAT, plan, points, None)
        e = plan["mi355x"]
        assert e["level"].scale == pytest.approx(0.6) and e["moe_ratio"] == 1.0
        assert e["borrowed_from"] == "predecessor" and e["dense_from"] == "mi300x"
        assert not e["held"]
        reason = LEVELS.ratio_reason(e)
        assert "its predecessor" in reason and "not borrowed" in reason


def test_moe_runs_above_the_predecessors_level_are_held_at_it():
    """MoE runs measuring above the measured GPU's own level: every LLM priced at that
    level (dense LLMs unmeasured; MoE ratio at most 1), and the reason says so."""
    plan = _plan(1.2)
    LEVELS.borrow_dense_levels(CAT, plan, [], None)
    e = plan["mi355x"]
    assert e["level"].scale == pytest.approx(1.0) and e["moe_ratio"] == 1.0 and e["held"]
    reason = LEVELS.ratio_reason(e)
    assert "measure at 1.200 (before the ceiling)" in reason and "held at 1.000" in reason


def test_a_gpu_with_nothing_to_judge_it_keeps_its_moe_level():
    """No sibling, no predecessor measured on a dense LLM: the MoE level stands, recorded
    as "self"."""
    plan = {"mi355x": _entry("mi355x", 0.7, dense=False)}
    LEVELS.borrow_dense_levels(CAT, plan, [], None)
    e = plan["mi355x"]
    assert e["dense_from"] == "self" and "borrowed" not in e and e["level"].scale == 0.7
    assert "no measured GPU judges them" in LEVELS.ratio_reason(e)


def test_shipped_new_gpus_are_never_rated_above_the_gpu_they_are_judged_by():
    """The shipped calibration: B300 and GB300 no higher than B200 (their measured
    Blackwell sibling), MI355X no higher than MI300X; each carries the analogy spread
    (one publisher's runs) and its DeepSeek runs' own check."""
    g = CAT.gpus
    for new, by in (("b300", "b200"), ("gb300-per-gpu", "b200"), ("mi355x", "mi300x")):
        eff = g[new].efficiency
        assert eff.provenance.value == "scaled" and eff.points > 0, new
        assert eff.level_scale <= g[by].efficiency.level_scale + 1e-3, new
        assert eff.prefill_mfu <= g[by].efficiency.prefill_mfu + 1e-4, new
        assert eff.decode_mbu <= g[by].efficiency.decode_mbu + 1e-4, new
        assert eff.sigma_log >= 0.73, new
        assert "deepseek-v3" in eff.own_llm_ratio, new
    assert "mi300x" in g["mi355x"].efficiency.reason
    judged = {k: g[k].efficiency.dense_level_from for k in g}
    assert judged["mi355x"] == judged["mi325x"] == "mi300x"
    assert judged["b300"] == judged["gb300-per-gpu"] == judged["gb200-per-gpu"] == "b200"
    assert judged["b200"] is None and judged["mi300x"] is None and judged["h100-sxm5-80gb"] is None


def test_a_plan_says_when_a_gpus_dense_level_is_borrowed():
    """A plan serving a dense LLM on a GPU measured on MoE LLMs only says its factors are
    borrowed (MI355X from MI300X, B300 from its architecture's measured GPU); a MoE plan,
    a GPU measured on a dense LLM, or a pool without replicas says nothing."""
    from planner.plan.assemble import borrowed_level_warnings
    from planner.plan.models import PoolPlan

    def pool(gpu: str, replicas: int = 2) -> PoolPlan:
        fields: dict[str, Any] = {"gpu": gpu, "replicas": replicas, "provenance": "scaled"}
        return PoolPlan.model_construct(**fields)

    got = borrowed_level_warnings(
        [pool("mi355x"), pool("b300"), pool("mi300x"), pool("b200"), pool("gb300-per-gpu", 0)],
        CAT,
        "llama-3.1-70b",
    )
    # B200 is measured on a dense LLM (Llama-2-70B in FP4): no warning
    assert [w.split(":")[0] for w in got] == ["b300", "mi355x"]
    assert got[0].startswith("b300: measured on mixture-of-experts LLMs only (deepseek-v3)")
    assert "borrowed from b200's measured level" in got[0]
    assert "capped at mi300x's (its predecessor's) measured level" in got[1]
    assert borrowed_level_warnings([pool("mi355x")], CAT, "deepseek-v3") == []


def test_the_reports_uncertainty_sentence_names_a_borrowed_level():
    """The report's uncertainty sentence says which GPU's factors for the planned model
    are borrowed (from the plan's warnings), beside "fitted or scaled to measurements"."""
    from planner.plan.assemble import borrowed_level_warnings
    from planner.plan.models import BORROWED_LEVEL_MARK, PoolPlan
    from planner.report.alternatives import uncertainty_sentence

    fields: dict[str, Any] = {"gpu": "mi355x", "replicas": 3, "provenance": "scaled"}
    warnings = borrowed_level_warnings([PoolPlan.model_construct(**fields)], CAT, "llama-2-70b")
    assert BORROWED_LEVEL_MARK in warnings[0]
    plan = {
        "cost_band_usd_per_hour": [1.0, 2.0],
        "risk": {"confidence": 0.8, "band_confidence": 0.9},
        "unmeasured_gpus": [],
        "warnings": ["traffic: something else", *warnings],
    }
    runs = uncertainty_sentence(plan)
    assert runs is not None
    text = "".join(r for r in runs if isinstance(r, str))
    assert "mi355x was measured on mixture-of-experts LLMs only" in text
    plan["warnings"] = ["traffic: something else"]
    runs = uncertainty_sentence(plan)
    assert runs is not None and "mixture-of-experts" not in "".join(
        r for r in runs if isinstance(r, str)
    )


def test_analyze_capacity_says_when_a_dense_level_is_borrowed():
    """`analyze capacity` of a dense LLM on MI355X names the GPU its level is judged by
    (JSON and text); a MoE LLM on it, a dense one on MI300X, or explicit factors: none."""
    from api.cli.calibrate import render_capacity
    from planner.capacity_analysis import CapacityRequest, capacity_analysis

    base: dict[str, Any] = {"tp": 8, "dtype": "fp8", "prompt_tokens": 1024, "output_tokens": 256}
    a = capacity_analysis(CAT, CapacityRequest(model="llama-3.1-70b", gpu="mi355x", **base))
    assert a.factors is not None and a.factors.dense_level_from == "mi300x"
    assert "judged by mi300x's measured level" in render_capacity(a)
    for model, gpu, extra in (
        ("deepseek-v3", "mi355x", {}),
        ("llama-3.1-70b", "mi300x", {}),
        ("llama-3.1-70b", "mi355x", {"mfu": 0.4, "mbu": 0.6}),
    ):
        b = capacity_analysis(CAT, CapacityRequest(model=model, gpu=gpu, **base, **extra))
        assert b.factors is not None and b.factors.dense_level_from is None, (model, gpu)
        assert "mixture-of-experts LLMs only" not in render_capacity(b)


def test_the_plan_texts_unmeasured_line_names_a_borrowed_level():
    """The plan text's "unmeasured GPUs" line, which counts only GPUs set by analogy,
    adds the GPUs whose factors for the model are borrowed (from the warnings)."""
    from planner.report.borrowed import borrowed_level_gpus, borrowed_level_note

    plan: dict[str, Any] = {
        "warnings": [
            "traffic.classes[1]: long prompts",
            "mi355x: measured on mixture-of-experts LLMs only (deepseek-v3); its factors ...",
            "b300: measured on mixture-of-experts LLMs only (deepseek-v3); its factors ...",
        ]
    }
    assert borrowed_level_gpus(plan) == ["mi355x", "b300"]
    note = borrowed_level_note(plan)
    assert note.startswith("; mi355x, b300 measured on mixture-of-experts LLMs only")
    assert borrowed_level_note({"warnings": ["traffic.classes[1]: long prompts"]}) == ""
    assert borrowed_level_note({}) == ""


def test_the_unmeasured_line_does_not_say_every_gpu_is_measured_beside_a_borrowed_level():
    from planner.report.text import render_plan_text

    warning = "gb200-per-gpu: measured on mixture-of-experts LLMs only (deepseek-v3); ..."
    base: dict[str, Any] = {
        "status": "optimal",
        "pools": [{"gpu": "gb200-per-gpu", "replicas": 1}],
        "risk": {"confidence": 0.8, "z": 0.842, "band_confidence": 0.9, "z_band": 1.645},
        "unmeasured_gpus": [],
    }
    line = next(
        x
        for x in render_plan_text({**base, "warnings": [warning]}).splitlines()
        if x.startswith("unmeasured GPUs")
    )
    assert line.startswith("unmeasured GPUs: none set by analogy; gb200-per-gpu measured on")
    assert "every GPU bought" not in line
    plain = render_plan_text(base)
    assert "none (every GPU bought has efficiency fitted or scaled to measurements)" in plain
