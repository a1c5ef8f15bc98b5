"""Latency SLOs at the plan's confidence (planner.candidates.confidence,
planner.plan.latency_risk): the first-order slow GPU of the capacity derate, the
warnings a plan carries by default, and ``risk.hold_latency``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from catalog.loader import load_catalog
from catalog.schema import Slo
from planner.candidates.confidence import class_at_confidence, slo_at_confidence_ms
from planner.errors import PlanningError
from planner.plan.latency_risk import latency_at_confidence_ms, latency_risk_warnings
from planner.report import render_plan_text
from planner.request import PlanRequest, RiskSpec, resolve_request
from planner.service import make_plan

CAT = load_catalog()
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _doc(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def test_worked_values() -> None:
    # 1,000 ms held at a derate of 0.8 (a GPU 1.25x slower than predicted): 800 ms
    assert slo_at_confidence_ms(1000.0, 0.8) == pytest.approx(800.0)
    assert latency_at_confidence_ms(800.0, 0.8) == pytest.approx(1000.0)
    # GB200's analogy spread 0.73 at 0.8 (z 0.8416): d = exp(-0.614) = 0.541
    d = 0.5411
    assert slo_at_confidence_ms(800.0, d) == pytest.approx(432.9, abs=0.1)
    assert latency_at_confidence_ms(642.0, d) == pytest.approx(1186.5, abs=0.5)
    for bad in (0.0, -0.1, 1.01):
        with pytest.raises(ValueError):
            slo_at_confidence_ms(1000.0, bad)
        with pytest.raises(ValueError):
            latency_at_confidence_ms(1000.0, bad)


def test_a_class_is_held_only_when_asked() -> None:
    req = resolve_request(PlanRequest.model_validate(_doc("chat-agent-80-20.yaml")), CAT)
    cls = req.classes[0]
    assert class_at_confidence(cls, 0.8, RiskSpec()) is cls  # hold_latency off
    held = class_at_confidence(cls, 0.8, RiskSpec(hold_latency=True))
    assert held.slo.ttft_ms == pytest.approx(0.8 * cls.slo.ttft_ms)
    assert held.slo.tpot_ms == pytest.approx(0.8 * cls.slo.tpot_ms)
    assert held.slo.percentile == cls.slo.percentile
    assert replace(held, slo=cls.slo) == cls  # nothing else changes
    assert class_at_confidence(cls, 1.0, RiskSpec(hold_latency=True)) is cls


def test_a_plan_warns_where_a_latency_misses_its_slo_at_the_confidence() -> None:
    plan = make_plan(_doc("three-class-70b.yaml"), CAT, alternatives=False, verify=False)
    warned = [w for w in plan.warnings if "risk.hold_latency" in w]
    assert len(warned) == 2
    assert warned[0].startswith(
        "class coding-agent: prefill pool on gb200-per-gpu, p90 TTFT 642.0 ms would be "
    )
    assert "over its 800 ms SLO" in warned[0] and "(x1.85, derate sigma 0.73)" in warned[0]
    assert warned[1].startswith("class rag: decode pool on mi300x, p90 TPOT 34.6 ms")
    for w in warned:
        assert w in render_plan_text(plan.to_json_dict())
    # each warned latency does pass its SLO at the pool's own derate
    slos = {c.name: c.slo for c in plan.classes}
    for p in plan.pools:
        if p.class_name == "coding-agent" and p.role.value == "prefill":
            assert p.capacity_derate is not None and p.predicted_ttft_ms is not None
            assert p.predicted_ttft_ms / p.capacity_derate > slos["coding-agent"].ttft_ms


def test_no_warning_at_the_nominal_confidence_or_when_held() -> None:
    pools = make_plan(_doc("three-class-70b.yaml"), CAT, alternatives=False, verify=False).pools
    slos = {"coding-agent": Slo(ttft_ms=800, tpot_ms=40), "rag": Slo(ttft_ms=800, tpot_ms=40)}
    assert latency_risk_warnings(pools, slos, RiskSpec(hold_latency=True)) == []
    nominal = [p.model_copy(update={"capacity_derate": 1.0}) for p in pools]
    assert latency_risk_warnings(nominal, slos, RiskSpec()) == []
    assert len(latency_risk_warnings(pools, slos, RiskSpec())) == 2


def test_held_latencies_cost_at_least_as_much_and_are_said() -> None:
    doc = _doc("chat-agent-80-20.yaml")
    base = make_plan(doc, CAT, alternatives=False, verify=False)
    held_doc = {**doc, "risk": {"hold_latency": True}}
    held = make_plan(held_doc, CAT, alternatives=False, verify=False)
    assert held.cost_usd_per_hour is not None and base.cost_usd_per_hour is not None
    # the base plan's pools pass the per-pool check already: only screening the held
    # SLOs (each GPU's candidates against SLO x its derate) buys more
    assert not [w for w in base.warnings if "risk.hold_latency" in w]
    assert base.cost_usd_per_hour == pytest.approx(2869.36)
    assert held.cost_usd_per_hour == pytest.approx(3045.58)
    assert held.risk is not None and base.risk is not None
    assert held.risk.hold_latency and not base.risk.hold_latency
    assert "TTFT/TPOT SLOs held at it too" in render_plan_text(held.to_json_dict())
    # every pool of the held plan meets its SLOs on a GPU as slow as its derate assumes
    slos = {c.name: c.slo for c in held.classes}
    for p in held.pools:
        d = p.capacity_derate or 1.0
        if p.predicted_ttft_ms is not None:
            assert p.predicted_ttft_ms / d <= slos[p.class_name].ttft_ms * (1 + 1e-6)
        if p.predicted_tpot_ms is not None:
            assert p.predicted_tpot_ms / d <= slos[p.class_name].tpot_ms * (1 + 1e-6)


@pytest.mark.parametrize("confidences", [(0.5, 0.7, 0.8, 0.9)])
def test_held_plans_never_get_cheaper_as_the_confidence_rises(confidences) -> None:
    doc = _doc("chat-agent-80-20.yaml")
    costs, unheld = [], []
    for c in confidences:
        plan = make_plan(
            {**doc, "risk": {"confidence": c, "hold_latency": True}},
            CAT,
            alternatives=False,
            verify=False,
        )
        costs.append(plan.cost_usd_per_hour or float("inf"))
        free = make_plan({**doc, "risk": {"confidence": c}}, CAT, alternatives=False, verify=False)
        unheld.append(free.cost_usd_per_hour or float("inf"))
    assert costs == sorted(costs)
    assert all(h >= u for h, u in zip(costs, unheld, strict=True))
    assert costs[-1] > unheld[-1]  # at 0.9 holding the latencies costs more
    nominal = make_plan({**doc, "risk": {"confidence": 0.5}}, CAT, alternatives=False, verify=False)
    assert costs[0] == nominal.cost_usd_per_hour  # at 0.5 holding changes nothing


def test_an_infeasible_held_plan_says_the_slos_were_held() -> None:
    doc = {**_doc("three-class-70b.yaml"), "risk": {"hold_latency": True}}
    plan = make_plan(doc, CAT, alternatives=False, verify=False)
    assert plan.status.value == "infeasible"
    reason = plan.infeasible_reasons[0]
    assert reason.startswith("class coding-agent (p90 TTFT 800 ms, TPOT 40 ms) cannot be")
    assert "over the TTFT SLO 432.779 ms" in reason
    assert reason.endswith(
        "(SLOs held at 80% confidence, risk.hold_latency: each GPU was screened against each "
        "SLO x its capacity derate, the lower limits named above; hold_latency false or a "
        "lower confidence checks latencies as predicted)"
    )


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_hold_latency_is_a_strict_bool(bad) -> None:
    doc = {**_doc("code-completion-8b.yaml"), "risk": {"hold_latency": bad}}
    with pytest.raises((PlanningError, ValueError)) as e:
        make_plan(doc, CAT, alternatives=False, verify=False)
    assert "hold_latency" in str(e.value)


def test_a_class_refused_for_memory_alone_does_not_blame_the_held_slos() -> None:
    doc = {
        "model": "llama-3.1-405b",
        "traffic": {"rate_rps": 1, "classes": [{"workload": "chat", "share": 1.0}]},
        "slo": {"ttft_ms": 5000, "tpot_ms": 200, "percentile": 90},
        "candidates": {"gpus": ["l4"], "dtypes": ["bf16"], "tp": [1], "pp": [1]},
        "risk": {"hold_latency": True},
    }
    plan = make_plan(doc, CAT, alternatives=False, verify=False)
    assert plan.status.value == "infeasible"
    assert all("SLOs held at" not in r for r in plan.infeasible_reasons)


def test_warned_slos_of_ten_seconds_or_more_print_whole() -> None:
    pools = make_plan(_doc("three-class-70b.yaml"), CAT, alternatives=False, verify=False).pools
    slos = {"coding-agent": Slo(ttft_ms=800, tpot_ms=40), "rag": Slo(ttft_ms=10_000, tpot_ms=40)}
    pools = [
        p.model_copy(update={"predicted_ttft_ms": 9_000.0})
        if p.class_name == "rag" and p.role.value == "prefill"
        else p
        for p in pools
    ]
    warned = latency_risk_warnings(pools, slos, RiskSpec())
    assert any("over its 10,000 ms SLO" in w for w in warned)


def test_the_report_says_which_latencies_may_miss_at_the_confidence() -> None:
    from planner.report.render import render_plan_report

    doc = _doc("three-class-70b.yaml")
    plan = make_plan(doc, CAT, alternatives=False, verify=False).to_json_dict()
    md, _ = render_plan_report({"plan": plan, "request": doc}, "md", CAT)
    assert isinstance(md, str)
    assert (
        "Every class meets its p90 TTFT and TPOT objectives (predicted by the queueing model); "
        "at 80% confidence 2 may not (see the warnings)."
    ) in md
    held = make_plan(
        {**_doc("code-completion-8b.yaml"), "risk": {"hold_latency": True}},
        CAT,
        alternatives=False,
        verify=False,
    ).to_json_dict()
    md, _ = render_plan_report({"plan": held, "request": doc}, "md", CAT)
    assert isinstance(md, str)
    assert "objectives (predicted by the queueing model), held at 80% confidence." in md
