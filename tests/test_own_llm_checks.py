"""A GPU's own runs of one LLM against its factors (catalog efficiency.own_llm_ratio):
computed by calibration, validated by the catalog, warned about in plans."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from statistics import NormalDist, median

import pytest
import yaml
from pydantic import ValidationError
from script_support import load_script

from catalog.loader import DATA_DIR, CatalogError, load_catalog
from catalog.schema import Dtype, OwnLlmCheck
from planner import calibration as cb
from planner import fidelity as fd
from planner.plan.assemble import OWN_LLM_WARN_RATIO, own_llm_cover, own_llm_warnings
from planner.plan.models import PoolPlan

CAT = load_catalog()
POINTS = [m for m in cb.fit_points(cb.load_reference_measurements(CAT)) if m.usable]
LEVELS = load_script("calibration_levels")


def factors(gpu: str) -> tuple[float, float, float]:
    e = CAT.gpus[gpu].efficiency
    return (e.prefill_mfu, e.decode_mbu, e.step_overhead_ms)


def targets() -> dict[str, float]:
    return fd.level_targets(POINTS, CAT, {g: factors(g) for g in fd.LEVEL_REFERENCE_GPUS})


def test_own_ratio_is_the_median_measured_over_predicted_over_the_reference_target():
    """MI300X's Llama-3.1-70B fit runs (AMD's table): the median of measured / predicted
    with its shipped factors, over the reference GPUs' median on Llama-3.1-70B."""
    tg = targets()
    own = fd.own_llm_ratios(POINTS, CAT, "mi300x", factors("mi300x"), tg)
    mine = [
        m
        for m in POINTS
        if m.gpu == "mi300x" and m.model == "llama-3.1-70b" and fd.saturated_throughput(m)
    ]
    assert len(mine) == 12  # AMD's throughput table (2) and its vLLM latency table (10)
    by_hand = median(
        m.output_tok_s / cb.predict(m, CAT, factors("mi300x")).get("output_tok_s") for m in mine
    )
    ratio, n, publishers = own["llama-3.1-70b"]
    assert (n, publishers) == (12, 1)  # AMD's page and AMD's ROCm/vllm tables: one publisher
    assert ratio == pytest.approx(by_hand / tg["llama-3.1-70b"], rel=1e-12)
    # priced as measured since the layer floor fitted to the latency table (0.80 before)
    assert OWN_LLM_WARN_RATIO < ratio < 1.1
    # without targets the ratio is absolute (the reference GPUs' own)
    absolute = fd.own_llm_ratios(POINTS, CAT, "mi300x", factors("mi300x"))
    assert absolute["llama-3.1-70b"][0] == pytest.approx(by_hand, rel=1e-12)


def test_fp4_runs_and_other_gpus_runs_do_not_count():
    own = fd.own_llm_ratios(POINTS, CAT, "b200", factors("b200"), targets())
    non_fp4 = [
        m
        for m in POINTS
        if m.gpu == "b200"
        and m.model == "deepseek-v3"
        and m.dtype != Dtype.FP4
        and fd.saturated_throughput(m)
    ]
    assert own["deepseek-v3"][1] == len(non_fp4)
    assert "llama-2-70b" not in own  # B200's Llama-2-70B runs are FP4 only
    assert fd.own_llm_ratios(POINTS, CAT, "no-such-gpu", factors("b200")) == {}


def test_the_shipped_checks_are_what_calibration_computes():
    """The catalog carries what `make calibrate-defaults` writes: each measured GPU's own
    ratios, relative for every GPU but the reference pair (3 decimals)."""
    tg = targets()
    for gpu, spec in CAT.gpus.items():
        if spec.efficiency.provenance.value != "scaled":
            assert spec.efficiency.own_llm_ratio == {}
            continue
        want = fd.own_llm_ratios(
            POINTS,
            CAT,
            gpu,
            factors(gpu),
            None if gpu in fd.LEVEL_REFERENCE_GPUS else tg,
        )
        got = {
            k: (v.ratio, v.points, v.publishers) for k, v in spec.efficiency.own_llm_ratio.items()
        }
        assert set(got) == set(want), gpu
        for llm, (r, n, k) in want.items():
            assert got[llm][1:] == (n, k), (gpu, llm)
            assert got[llm][0] == pytest.approx(r, abs=0.002), (gpu, llm)


def test_own_llm_block_writes_one_flow_mapping_per_llm():
    block = LEVELS.own_llm_block({"llama-3.1-70b": (0.79712, 2, 1), "deepseek-v3": (1.0, 11, 2)})
    assert block == (
        "  own_llm_ratio:\n"
        "    deepseek-v3: {ratio: 1.000, points: 11, publishers: 2}\n"
        "    llama-3.1-70b: {ratio: 0.797, points: 2, publishers: 1}\n"
    )
    parsed = yaml.safe_load("efficiency:\n" + block)["efficiency"]["own_llm_ratio"]
    assert OwnLlmCheck(**parsed["llama-3.1-70b"]).ratio == 0.797
    assert LEVELS.own_llm_block({}) == ""


@pytest.mark.parametrize(
    "bad",
    [
        {"ratio": 0.0, "points": 2},
        {"ratio": 0.8, "points": 0},
        {"ratio": float("nan"), "points": 1},
        {"ratio": 0.8, "points": 2, "publishers": 3},
        {"ratio": 0.8, "points": 2, "publishers": 0},
    ],
)
def test_a_bad_check_is_refused(bad):
    with pytest.raises(ValidationError):
        OwnLlmCheck(**bad)


def test_a_check_for_an_unknown_llm_is_named(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data)
    path = data / "gpus" / "l40s.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["efficiency"]["own_llm_ratio"] = {"no-such-llm": {"ratio": 0.5, "points": 3}}
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(data)
    assert [f for f, _ in info.value.issues] == ["gpus.l40s.efficiency.own_llm_ratio.no-such-llm"]
    assert "unknown model 'no-such-llm'" in str(info.value)


def pool(gpu: str, **update) -> PoolPlan:
    fields = {"gpu": gpu, "replicas": 3, "provenance": "scaled", "dtype": "fp8", **update}
    return PoolPlan.model_construct(**fields)


def catalog_with(gpu: str, llm: str, ratio: float, points: int = 2, publishers: int = 1):
    spec = CAT.gpus[gpu]
    eff = spec.efficiency.model_copy(
        update={
            "own_llm_ratio": {llm: OwnLlmCheck(ratio=ratio, points=points, publishers=publishers)}
        }
    )
    gpus = {**CAT.gpus, gpu: spec.model_copy(update={"efficiency": eff})}
    return CAT.model_copy(update={"gpus": gpus})


def test_a_pool_on_an_llm_its_gpu_measured_well_below_its_factors_is_warned_about():
    cat = catalog_with("mi300x", "llama-3.1-70b", 0.797)
    (text,) = own_llm_warnings([pool("mi300x"), pool("mi300x")], cat, "llama-3.1-70b")
    assert text.startswith(
        "mi300x: its own 2 measured run(s) of llama-3.1-70b from 1 publisher (fit split) reach "
        "0.80x what "
        "its factors predict, relative to the reference GPUs on this LLM"
    )
    assert "may serve about 20% less than planned" in text
    # a reference GPU's ratio is absolute
    cat = catalog_with("h100-sxm5-80gb", "llama-3.1-405b", 0.539, 7, publishers=2)
    (text,) = own_llm_warnings([pool("h100-sxm5-80gb")], cat, "llama-3.1-405b")
    assert "7 measured run(s) of llama-3.1-405b from 2 publishers (fit split)" in text
    assert "reach 0.54x what its factors predict;" in text


@pytest.mark.parametrize(
    "why, pools, llm",
    [
        ("just above the threshold", [pool("mi300x")], "llama-3.1-70b"),
        ("another LLM", [pool("mi300x")], "llama-3.1-8b"),
        ("an FP4 pool", [pool("mi300x", dtype="fp4")], "llama-3.1-70b"),
        ("no replicas", [pool("mi300x", replicas=0)], "llama-3.1-70b"),
        ("factors a calibration fitted", [pool("mi300x", provenance="fitted")], "llama-3.1-70b"),
    ],
)
def test_no_warning_where_the_check_does_not_apply(why, pools, llm):
    ratio = OWN_LLM_WARN_RATIO + 0.001 if why == "just above the threshold" else 0.5
    assert own_llm_warnings(pools, catalog_with("mi300x", "llama-3.1-70b", ratio), llm) == [], why


def test_the_warning_says_whether_the_plans_derate_covers_the_shortfall():
    """MI300X's Llama-3.1-70B runs at 0.717x: pools derated to 0.66x (sigma 0.498 at 80%
    confidence) already count on less, so the warning says it is covered; at the nominal
    plan (no derate) they may serve 28% less, and the confidence whose derate reaches 0.717
    is Phi(ln(1 / 0.717) / 0.498) = 0.748, shown rounded up as 0.75."""
    cat = catalog_with("mi300x", "llama-3.1-70b", 0.717)
    derated = pool("mi300x", capacity_derate=0.658, sigma_log=0.498)
    (text,) = own_llm_warnings([derated], cat, "llama-3.1-70b", 0.8)
    assert "sized at 0.66x of that capacity (the risk derate at the plan's 80% confidence)" in text
    assert "which covers it" in text and "less than planned" not in text
    nominal = pool("mi300x", capacity_derate=1.0, sigma_log=0.498)
    (text,) = own_llm_warnings([nominal], cat, "llama-3.1-70b", 0.5)
    assert "may serve about 28% less than planned" in text
    needed = NormalDist().cdf(math.log(1 / 0.717) / 0.498)
    assert needed == pytest.approx(0.7479, abs=1e-4)
    assert text.endswith("or raise risk.confidence to 0.75")
    # the smallest derate of the GPU's pools is the one that must cover it
    (text,) = own_llm_warnings([nominal, derated], cat, "llama-3.1-70b", 0.8)
    assert "which covers it" in text


def test_the_confidence_asked_for_is_rounded_up_and_never_past_the_limit():
    # a shortfall near the limit: three decimals, rounded up (never "1.00")
    text = own_llm_cover(0.54, 0.84, 0.25, 0.8)
    needed = NormalDist().cdf(math.log(1 / 0.54) / 0.25)
    assert 0.99 < needed <= 0.999
    assert text.endswith(f"or raise risk.confidence to {math.ceil(needed * 1000) / 1000:.3f}")
    # beyond MAX_CONFIDENCE no confidence covers it: only the alternatives are offered
    text = own_llm_cover(0.3, 0.9, 0.2, 0.8)
    assert text.endswith("compare the plan without it (alternatives)")
    assert "risk.confidence" not in text
    # without a derate (a plan made before derates) the capacity counts as 1x
    assert "sized at 1.00x" in own_llm_cover(0.8, None, None, None)
