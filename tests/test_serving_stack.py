"""The serving stack's TTFT latency (planner.serving_stack): held to the public data it
is read from, priced in every TTFT the planner predicts (capacity analysis, candidate
wait budgets, pool TTFT, the simulator) and never in GPU time."""

from __future__ import annotations

import statistics

import pytest

from catalog.loader import load_catalog
from planner import calibration as cb
from planner import fidelity as fd
from planner import roofline as rl
from planner.capacity import replica_capacity
from planner.serving_stack import (
    MLA_STACK_TTFT_MS_AMD,
    MLA_STACK_TTFT_MS_NVIDIA,
    serving_stack_ttft_ms,
)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _excess_without_stack(cat, vendor: str) -> list[float]:
    """InferenceX's DeepSeek runs at 1-8 users: measured TTFT - (predicted - stack)."""
    got = fd.ttft_excess_at_low_load(
        cb.load_reference_measurements(cat), cat, fd.shipped_factors(cat)
    )
    out = []
    for x in got:
        gpu = cat.gpus[x.gpu]
        if "InferenceX" in x.source and gpu.vendor.upper() == vendor:
            stack = serving_stack_ttft_ms(cat.models["deepseek-v3"], gpu)
            out.append(x.measured_ms - (x.predicted_ms - stack))
    return out


@pytest.mark.parametrize(
    ("vendor", "constant"), [("NVIDIA", MLA_STACK_TTFT_MS_NVIDIA), ("AMD", MLA_STACK_TTFT_MS_AMD)]
)
def test_the_mla_stack_latency_is_the_median_measured_excess(cat, vendor, constant):
    """Each constant is the median of what its vendor's low-load DeepSeek runs measured
    beyond queue + prefill as priced, rounded down (within 5%); 12 or more runs each."""
    xs = _excess_without_stack(cat, vendor)
    assert len(xs) >= 12
    med = statistics.median(xs)
    assert 0.95 * med <= constant <= med


def test_only_mla_models_carry_it_and_an_unmeasured_vendor_takes_the_larger(cat):
    ds, llama = cat.models["deepseek-v3"], cat.models["llama-3.1-70b"]
    assert serving_stack_ttft_ms(ds, cat.gpus["h200-sxm-141gb"]) == MLA_STACK_TTFT_MS_NVIDIA
    assert serving_stack_ttft_ms(ds, cat.gpus["mi300x"]) == MLA_STACK_TTFT_MS_AMD
    assert serving_stack_ttft_ms(ds, cat.gpus["gaudi3"]) == MLA_STACK_TTFT_MS_AMD
    assert MLA_STACK_TTFT_MS_AMD >= MLA_STACK_TTFT_MS_NVIDIA
    for gpu in cat.gpus.values():
        assert serving_stack_ttft_ms(llama, gpu) == 0.0


def test_it_adds_to_ttft_and_takes_no_gpu_time(cat, monkeypatch):
    """The same replica priced with and without the stack: the same maximum throughput
    and decode steps; every TTFT longer by exactly the stack's latency; a closed loop of
    users, who wait through it too, a little slower (Little's law)."""
    from planner.roofline import replica as replica_mod

    def priced(stack_ms: float):
        monkeypatch.setattr(replica_mod, "serving_stack_ttft_ms", lambda m, g: stack_ms)
        r = rl.build_replica(
            cat, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", kv_dtype="fp8"
        )
        assert r.stack_ttft_ms == stack_ms
        return (
            replica_capacity(r, 1000, 500),
            replica_capacity(r, 1000, 500, request_rate_rps=0.5),
            replica_capacity(r, 1000, 500, concurrency=4),
        )

    (top0, open0, loop0), (top1, open1, loop1) = priced(0.0), priced(150.0)
    assert top1.output_tokens_per_s == pytest.approx(top0.output_tokens_per_s)
    assert open1.tpot_ms == pytest.approx(open0.tpot_ms)
    assert open1.ttft_ms == pytest.approx(open0.ttft_ms + 150.0)
    assert loop1.ttft_ms == pytest.approx(loop0.ttft_ms + 150.0, rel=0.05)
    assert loop1.output_tokens_per_s < loop0.output_tokens_per_s


DEEPSEEK_H200: dict = {
    "name": "deepseek on h200",
    "model": "deepseek-v3",
    "traffic": {"rate_rps": 10, "classes": [{"workload": "chat", "share": 1.0}]},
    "slo": {"ttft_ms": 2000, "tpot_ms": 80, "percentile": 90},
    "candidates": {"gpus": ["h200-sxm-141gb"], "dtypes": ["fp8"]},
    "objective": "min_cost",
}


def test_a_plan_prices_the_stack_in_its_ttft_and_in_the_simulation(cat, monkeypatch):
    """The same DeepSeek plan with and without the stack: the same pools and cost (an
    SLO of 2 s leaves room), its class TTFT longer by the stack's 150 ms, and the
    simulated TTFT with it."""
    from planner.roofline import replica as replica_mod
    from planner.service import make_plan

    with_stack = make_plan(DEEPSEEK_H200, cat, alternatives=False, verify=True)
    monkeypatch.setattr(replica_mod, "serving_stack_ttft_ms", lambda m, g: 0.0)
    without = make_plan(DEEPSEEK_H200, cat, alternatives=False, verify=True)
    assert with_stack.cost_usd_per_hour == pytest.approx(without.cost_usd_per_hour)
    (c1,), (c0,) = with_stack.classes, without.classes
    assert c1.ttft_ms == pytest.approx(c0.ttft_ms + MLA_STACK_TTFT_MS_NVIDIA)
    v1, v0 = with_stack.verification, without.verification
    assert v1 is not None and v0 is not None
    t1 = v1.classes[0].ttft_ms
    t0 = v0.classes[0].ttft_ms
    assert t1 is not None and t0 is not None
    assert t1 == pytest.approx(t0 + MLA_STACK_TTFT_MS_NVIDIA, rel=0.05)


def test_a_ttft_slo_the_stack_leaves_no_room_for_is_refused_with_the_reason(cat):
    """An SLO the prefill alone would meet but prefill + stack would not: infeasible,
    and the reason names the serving stack."""
    from planner.service import make_plan

    tight = {**DEEPSEEK_H200, "slo": {"ttft_ms": 140, "tpot_ms": 80, "percentile": 90}}
    plan = make_plan(tight, cat, alternatives=False, verify=False)
    assert plan.status != "optimal"
    text = " ".join(str(r) for r in plan.infeasible_reasons)
    assert "serving stack" in text
