"""The planner end to end: request validation, screening, solving, the plan's promises."""

from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.loader import load_catalog
from planner import roofline as rl
from planner.candidates import ClassFigures, screen_candidates, segments_for
from planner.errors import PlanningError, UnknownEntryError
from planner.problem_build import parse_request
from planner.request import resolve_request
from planner.service import make_plan
from solver.problem import PoolRole

EXAMPLE = Path(__file__).parent.parent / "examples" / "chat-agent-80-20.yaml"
CAT = load_catalog()


def small_request(**over):
    """A fast request: 8B model, two GPU types, two classes, exact solves."""
    req = {
        "model": "llama-3.1-8b",
        "traffic": {
            "rate_rps": 20,
            "classes": [{"workload": "chat", "share": 0.7}, {"workload": "rag", "share": 0.3}],
        },
        "candidates": {"gpus": ["h100-sxm5-80gb", "l40s"], "dtypes": ["fp8"]},
        "solver": {"rel_gap": 0.0},
    }
    for k, v in over.items():
        req[k] = v
    return req


def plan(req, **kw):
    return make_plan(req, CAT, alternatives=kw.pop("alternatives", False), **kw)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.update(model="gpt-9"), "model"),
        (
            lambda r: r["traffic"]["classes"][0].update(workload="nope"),
            "traffic.classes[0].workload",
        ),
        (lambda r: r["candidates"].update(gpus=["h100-sxm5-80gb", "tpu-v9"]), "candidates.gpus[1]"),
    ],
)
def test_unknown_ids_name_the_field(mutate, field):
    req = small_request()
    mutate(req)
    with pytest.raises(UnknownEntryError) as err:
        plan(req)
    assert err.value.issues[0][0] == field


@pytest.mark.parametrize(
    ("mutate", "field_start"),
    [
        (lambda r: r["traffic"]["classes"][0].update(share=0.5), "traffic"),
        (lambda r: r["traffic"].update(rate_rps=-1), "traffic.rate_rps"),
        (lambda r: r["traffic"].update(rate_rps=float("nan")), "traffic.rate_rps"),
        (lambda r: r.update(surprise=1), "surprise"),
        (lambda r: r["candidates"].update(tp=[3]), "candidates.tp"),
        (lambda r: r.update(slo={"percentile": 120}), "slo.percentile"),
        (lambda r: r.update(objective="max_goodput"), "(root)"),
    ],
)
def test_bad_requests_are_refused_with_the_field(mutate, field_start):
    req = small_request()
    mutate(req)
    with pytest.raises(PlanningError) as err:
        parse_request(req)
    assert any(f.startswith(field_start) for f, _ in err.value.issues), err.value.issues


def test_slo_override_order_class_then_request_then_workload():
    req = parse_request(
        small_request(
            slo={"tpot_ms": 40},
            traffic={
                "rate_rps": 10,
                "classes": [
                    {"workload": "chat", "share": 0.5, "slo": {"ttft_ms": 700}},
                    {"workload": "rag", "share": 0.5},
                ],
            },
        )
    )
    res = resolve_request(req, CAT)
    chat, rag = res.classes
    assert (chat.slo.ttft_ms, chat.slo.tpot_ms) == (700, 40)
    assert rag.slo.ttft_ms == CAT.workloads["rag"].slo.ttft_ms and rag.slo.tpot_ms == 40


# --------------------------------------------------------------------------- screening


def test_decode_candidates_use_the_largest_batch_within_tpot_and_memory():
    res = resolve_request(parse_request(small_request()), CAT)
    sc = screen_candidates(res, CAT)
    decodes = [c for c in sc.candidates if c.config.role == PoolRole.DECODE]
    assert decodes
    for c in decodes:
        fig = ClassFigures.of(next(k for k in res.classes if k.name == c.class_name))
        b = c.config.max_batch
        assert rl.decode_step_ms(c.replica, b, fig.decode_context_tokens) <= c.tpot_slo_ms
        limit = rl.max_resident_batch(c.replica, fig.decode_context_tokens)
        assert (
            b == limit
            or rl.decode_step_ms(c.replica, b + 1, fig.decode_context_tokens) > c.tpot_slo_ms
        )


def test_segments_never_promise_more_than_the_queueing_curve():
    res = resolve_request(parse_request(small_request()), CAT)
    sc = screen_candidates(res, CAT)
    for c in sc.candidates:
        pc = c.to_pool_candidate()
        for n in range(1, min(pc.max_replicas, 40) + 1):
            assert pc.capacity_rps(n) <= c.capacity_rps(n) * (1 + 1e-9) + 1e-9
        assert pc.capacity_rps(pc.max_replicas) >= c.rate_rps * (1 - 1e-9)


def test_segments_are_exact_at_breakpoints_of_a_convex_curve():
    def f(n):
        return 3.0 * n - 2.0 * math.sqrt(n)

    segs = segments_for(f, 50)
    from solver.problem import PoolCandidate

    pc = PoolCandidate("x", "k", PoolRole.PREFILL, "g", 1, 1.0, 1.0, (), 50, segments=segs)
    for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 25, 32, 33):
        assert pc.capacity_rps(n) == pytest.approx(f(n))
    for n in range(1, 51):
        assert pc.capacity_rps(n) <= f(n) + 1e-9


def test_rejections_keep_their_reasons():
    req = small_request(model="llama-3.1-405b")
    req["candidates"] = {"gpus": ["l40s", "h100-sxm5-80gb"], "dtypes": ["fp8"]}
    res = resolve_request(parse_request(req), CAT)
    sc = screen_candidates(res, CAT)
    reasons = sc.rejected_by_reason()
    assert reasons.get("does_not_fit", 0) > 0  # 405B never fits an L40S
    assert all(r.detail for r in sc.rejections)


# --------------------------------------------------------------------------- plans


def test_small_plan_serves_every_class_within_its_slo():
    p = plan(small_request()).to_json_dict()
    assert p["status"] == "optimal"
    for cls in p["classes"]:
        assert cls["served_rps"] == pytest.approx(cls["rate_rps"])
        assert cls["meets_slo"] is True
        assert cls["ttft_ms"] <= cls["slo"]["ttft_ms"] * (1 + 1e-6)
        assert cls["tpot_ms"] <= cls["slo"]["tpot_ms"] * (1 + 1e-6)
    cost = sum(pool["cost_usd_per_hour"] for pool in p["pools"])
    assert p["cost_usd_per_hour"] == pytest.approx(cost)
    for pool in p["pools"]:
        assert pool["utilization"] <= 1 + 1e-6
        assert f"--tensor-parallel-size={pool['tp']}" in pool["launch"]["vllm"]


def _rates_by_class_and_role(p):
    out = {}
    for pool in p["pools"]:
        key = (pool["class"], pool["role"])
        out[key] = out.get(key, 0.0) + pool["rate_rps"]
    return out


def test_each_mode_carries_the_whole_rate():
    p = plan(small_request()).to_json_dict()
    rates = _rates_by_class_and_role(p)
    for cls in p["classes"]:
        roles = ("aggregated",) if cls["mode"] == "aggregated" else ("prefill", "decode")
        for role in roles:
            assert rates[(cls["name"], role)] == pytest.approx(cls["rate_rps"], rel=1e-6)


def test_budget_too_small_is_an_answer_with_the_shortfall():
    p = plan(small_request(constraints={"budget_usd_per_hour": 1.0})).to_json_dict()
    assert p["status"] == "infeasible"
    assert "budget" in p["relaxation"]
    assert any("short by" in r for r in p["infeasible_reasons"])
    # no GPU type "costs more" than a fleet that does not exist
    assert p["why_not"] and "more_expensive" not in {w["reason"] for w in p["why_not"]}
    priced = [w for w in p["why_not"] if w["reason"] == "no_feasible_fleet"]
    assert priced and all(w["detail"].startswith("no fleet meets") for w in priced)


def test_impossible_slo_is_an_answer_naming_the_class():
    req = small_request()
    req["traffic"]["classes"][1]["slo"] = {"ttft_ms": 1}
    p = plan(req).to_json_dict()
    assert p["status"] == "infeasible"
    assert any("class rag" in r and "TTFT" in r for r in p["infeasible_reasons"])


def test_max_goodput_spends_at_most_the_budget():
    full = plan(small_request()).to_json_dict()
    budget = full["cost_usd_per_hour"] * 0.5
    p = plan(
        small_request(objective="max_goodput", constraints={"budget_usd_per_hour": budget})
    ).to_json_dict()
    assert p["status"] in ("optimal", "feasible")
    assert p["cost_usd_per_hour"] <= budget + 1e-6
    served = sum(c["served_rps"] for c in p["classes"])
    assert 0 < served < 20


def test_stock_limit_binds_and_is_reported():
    free = plan(small_request()).to_json_dict()
    gpu = max(free["gpus_by_type"], key=free["gpus_by_type"].get)
    cap = free["gpus_by_type"][gpu] - 1
    p = plan(small_request(constraints={"max_gpus": {gpu: cap}})).to_json_dict()
    assert p["status"] == "optimal"
    assert p["gpus_by_type"].get(gpu, 0) <= cap
    # what the optimizer minimizes (GPUs + operations) cannot fall under a new limit
    assert p["total_cost_usd_per_hour"] >= free["total_cost_usd_per_hour"] - 1e-6


# --------------------------------------------------------------------------- properties

FAST = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


def _cost(req):
    p = plan(req).to_json_dict()
    assert p["status"] == "optimal", p["infeasible_reasons"]
    return p["total_cost_usd_per_hour"]  # what the optimizer minimizes: GPUs + operations


@FAST
@given(rate=st.floats(1, 60), factor=st.floats(1.05, 3.0), chat=st.floats(0.2, 0.9))
def test_more_traffic_never_costs_less(rate, factor, chat):
    def req(r):
        return small_request(
            traffic={
                "rate_rps": r,
                "classes": [
                    {"workload": "chat", "share": chat},
                    {"workload": "rag", "share": 1 - chat},
                ],
            }
        )

    assert _cost(req(rate * factor)) >= _cost(req(rate)) - 1e-6


@FAST
@given(tpot=st.floats(30, 80), tighter=st.floats(0.6, 0.95), ttft=st.floats(600, 3000))
def test_tighter_slo_never_costs_less(tpot, tighter, ttft):
    loose = small_request(slo={"tpot_ms": tpot, "ttft_ms": ttft})
    tight = small_request(slo={"tpot_ms": tpot * tighter, "ttft_ms": ttft * tighter})
    p_tight = plan(tight).to_json_dict()
    if p_tight["status"] == "infeasible":
        return  # nothing to compare: the tighter SLO cannot be met at any price
    assert p_tight["total_cost_usd_per_hour"] >= _cost(loose) - 1e-6


@FAST
@given(
    gpus=st.lists(
        st.sampled_from(["h100-sxm5-80gb", "l40s", "h200-sxm-141gb", "a100-sxm-80gb", "l4"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    extra=st.sampled_from(["mi300x", "b200", "l40s", "h100-pcie-80gb"]),
)
def test_more_gpu_types_never_cost_more(gpus, extra):
    base = small_request(candidates={"gpus": gpus, "dtypes": ["fp8", "bf16"]})
    more = small_request(candidates={"gpus": sorted({*gpus, extra}), "dtypes": ["fp8", "bf16"]})
    p_base = plan(base).to_json_dict()
    p_more = plan(more).to_json_dict()
    if p_base["status"] == "infeasible":
        return
    assert p_more["cost_usd_per_hour"] <= p_base["cost_usd_per_hour"] + 1e-6


@pytest.mark.parametrize("mode", ["aggregated", "disaggregated"])
def test_allowing_both_modes_never_costs_more(mode):
    one = small_request(candidates={"gpus": ["h100-sxm5-80gb", "l40s"], "modes": [mode]})
    both = small_request()
    assert _cost(both) <= _cost(one) + 1e-6


@FAST
@given(rate=st.floats(2, 80), pct=st.sampled_from([50, 90, 99]))
def test_every_pool_meets_the_slos_of_its_class(rate, pct):
    req = small_request(slo={"percentile": pct})
    req["traffic"]["rate_rps"] = rate
    p = plan(req).to_json_dict()
    if p["status"] == "infeasible":
        return
    slo = {c["name"]: c["slo"] for c in p["classes"]}
    for pool in p["pools"]:
        s = slo[pool["class"]]
        if pool["predicted_ttft_ms"] is not None:
            assert pool["predicted_ttft_ms"] <= s["ttft_ms"] * (1 + 1e-6)
        if pool["predicted_tpot_ms"] is not None:
            assert pool["predicted_tpot_ms"] <= s["tpot_ms"] * (1 + 1e-6)
    rates = _rates_by_class_and_role(p)
    for cls in p["classes"]:
        roles = ("aggregated",) if cls["mode"] == "aggregated" else ("prefill", "decode")
        for role in roles:
            assert rates[(cls["name"], role)] == pytest.approx(
                rate * (0.7 if cls["name"] == "chat" else 0.3), rel=1e-6
            )


# --------------------------------------------------------------------------- the 80/20 fleet


@pytest.fixture(scope="module")
def example():
    return yaml.safe_load(EXAMPLE.read_text())


@pytest.fixture(scope="module")
def example_plan(example):
    return make_plan(example, CAT).to_json_dict()


def test_80_20_plan_is_optimal_and_explains_itself(example_plan):
    p = example_plan
    assert p["status"] == "optimal"
    assert p["solver"]["gap"] <= 0.001 + 1e-9
    by = {c["name"]: c for c in p["classes"]}
    assert all(c["meets_slo"] for c in by.values())
    # Agents need far more prefill per request than chat, even with 92% prefix hits.
    assert by["agent"]["prefill_gpu_s_per_request"] > 5 * by["chat"]["prefill_gpu_s_per_request"]
    # ...and, at a fifth of the requests, most of the fleet's prefill load.
    assert by["agent"]["prefill_load_share"] > 0.5
    for c in by.values():
        assert c["mode_reason"].startswith(c["mode"])
    names = {a["name"] for a in p["alternatives"]}
    assert "aggregated only" in names or "disaggregated only" in names


def test_80_20_without_prefix_hits_needs_a_bigger_fleet(example, example_plan):
    req = copy.deepcopy(example)
    req["traffic"]["classes"][1]["prefix_hit_rate"] = 0.0
    req["solver"] = {**req.get("solver", {}), "time_limit_s": 120}  # a big fleet: prove it
    p = make_plan(req, CAT, alternatives=False).to_json_dict()
    assert p["status"] == "optimal"
    assert p["cost_usd_per_hour"] > example_plan["cost_usd_per_hour"]
    assert p["gpus_total"] > example_plan["gpus_total"]

    # Without prefix caching the agent's prefill dominates: its pools grow. (Whether
    # they are split off depends on prices and levels: since aggregated batches
    # maximize capacity, a small-batch aggregated pool can carry the prefill cheaper.)
    def agent_gpus(plan):
        return sum(q["gpus"] for q in plan["pools"] if q["class"] == "agent")

    assert agent_gpus(p) > agent_gpus(example_plan)


@pytest.mark.parametrize("gpu", ["h100-sxm5-80gb", "h200-sxm-141gb", "mi300x"])
def test_80_20_on_one_gpu_type_costs_at_least_as_much(example, example_plan, gpu):
    req = copy.deepcopy(example)
    req["candidates"]["gpus"] = [gpu]
    p = make_plan(req, CAT, alternatives=False).to_json_dict()
    assert p["status"] == "optimal"
    tolerance = example_plan["cost_usd_per_hour"] * 0.001  # the solver's gap
    assert p["cost_usd_per_hour"] >= example_plan["cost_usd_per_hour"] - tolerance
    assert set(p["gpus_by_type"]) == {gpu}


# --------------------------------------------------------------------------- aggregated batch


def test_capacity_maximizing_batch_is_where_decode_meets_prefill():
    from planner.candidates import capacity_maximizing_batch

    # decode grows as B / step, prefill falls as 1 / step; step = 10 + 0.1 B ms
    def step(b: int) -> float:
        return 10.0 + 0.1 * b

    def decode(b: int) -> float:
        return b / (200 * step(b) / 1000)

    def prefill(b: int) -> float:
        return 1000 / (4 * step(b))

    best = capacity_maximizing_batch(500, decode, prefill)
    # they cross at B = 200 / 4 = 50, whatever the step
    assert best == 50
    brute = max(range(1, 501), key=lambda b: min(decode(b), prefill(b)))
    assert min(decode(best), prefill(best)) == pytest.approx(min(decode(brute), prefill(brute)))
    # a TPOT limit below the crossing: the largest batch it allows
    assert capacity_maximizing_batch(30, decode, prefill) == 30
    assert capacity_maximizing_batch(1, decode, prefill) == 1
    # the capacity at the chosen batch never falls as the limit grows
    caps = [
        min(decode(b), prefill(b))
        for b in (capacity_maximizing_batch(m, decode, prefill) for m in range(1, 300))
    ]
    assert caps == sorted(caps)


def test_looser_tpot_never_shrinks_an_aggregated_candidate():
    """The case of the known bug (chat, 1024-token chunks): with the largest batch its
    TPOT allowed, B 357 at TPOT 47.5 ms carried 12.3 req/s on 2 replicas and B 138 at
    30 ms 19.4. Now the batch maximizes capacity, so loosening the SLO never costs. (FP8
    GEMMs priced at their measured share of the peak make 30 ms unreachable with a
    1,024-token chunk: the sweep starts at 35 ms.)"""
    caps = []
    for tpot in (35.0, 40.0, 47.5, 60.0):
        req = small_request(
            slo={"tpot_ms": tpot, "ttft_ms": 2000},
            candidates={
                "gpus": ["h100-sxm5-80gb"],
                "dtypes": ["fp8"],
                "tp": [1],
                "chunk_budgets": [1024],
                "modes": ["aggregated"],
            },
        )
        sc = screen_candidates(resolve_request(parse_request(req), CAT), CAT)
        chat = [c for c in sc.candidates if c.class_name == "chat"]
        assert len(chat) == 1
        caps.append(chat[0].capacity_rps(2))
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(caps)), caps


def test_littles_law_operating_point_is_the_fixed_point_of_the_step():
    """A decode replica fed 0.5 output tokens per ms at TPOT 10 + b ms holds L = 0.5 x
    (10 + L): L = 10 sequences (not 0.5 x 40 = 20 at the step of its max batch 30); fed
    2 per ms it saturates at its max batch; fed nothing it holds none. The percentile
    batch built on it never exceeds the one at the max batch's step."""
    from planner.plan.figures import littles_law_operating_point

    assert littles_law_operating_point(0.5, lambda b: 10.0 + b, 30) == pytest.approx(10.0)
    assert littles_law_operating_point(2.0, lambda b: 10.0 + b, 30) == 30
    assert littles_law_operating_point(0.0, lambda b: 10.0 + b, 30) == 0.0
    # a constant step: Little's law as it was (L = 0.5 x 12)
    assert littles_law_operating_point(0.5, lambda b: 12.0, 30) == pytest.approx(6.0)
