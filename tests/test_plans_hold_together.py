"""Issue 11: links that exist, headroom and spares, the cost of variety, honest
infeasibility and bad input explained."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from api_support import api_client, small

from catalog.loader import load_catalog
from planner import queueing
from planner.candidates import (
    kv_link_for,
    kv_pair_link,
    prefill_link_options,
    screen_candidates,
)
from planner.errors import PlanningError
from planner.plan import gpus_per_node, launch_settings, nodes_per_replica, relaxation_text
from planner.plan.launch import sglang_launch_share
from planner.problem_build import parse_request
from planner.request import LOGNORMAL_MAX_P90_RATIO, resolve_request
from planner.roofline import gpu_memory_bytes
from planner.service import make_plan
from planner.validation import field_path
from solver.problem import (
    CapacityCut,
    ClassDemand,
    Limits,
    Mode,
    Operations,
    PoolCandidate,
    PoolRole,
    Problem,
    SolverOptions,
    SolveStatus,
)
from solver.solve import solve

CAT = load_catalog()
ROOT = Path(__file__).resolve().parent.parent


def request(**changes):
    base = {
        "model": "llama-3.1-70b",
        "traffic": {"rate_rps": 20, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": ["h100-sxm5-80gb"], "dtypes": ["fp8"]},
        "verify": {"enabled": False},
    }
    for key, value in changes.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return base


# --------------------------------------------------------------------------- item 2: links


def test_pair_link_nvlink_only_within_one_rack_scale_domain_of_one_gpu_type():
    assert kv_pair_link(CAT, "gb200-per-gpu", "gb200-per-gpu").id == "nvlink5"
    # another vendor or GPU type: the network, never NVLink
    cross = kv_pair_link(CAT, "gb200-per-gpu", "mi300x")
    assert cross.kind.value == "network"
    # the slower of the two sides' network links
    a = CAT.links[CAT.gpus["gb200-per-gpu"].network_link]
    b = CAT.links[CAT.gpus["mi300x"].network_link]
    assert cross.bandwidth_gb_per_s == min(a.bandwidth_gb_per_s, b.bandwidth_gb_per_s)
    # an 8-GPU server is not a shared domain for a fleet: H100 to H100 is the network
    assert kv_link_for(CAT, "h100-sxm5-80gb").kind.value == "network"
    slow = kv_pair_link(CAT, "h100-sxm5-80gb", "l4")
    assert slow.bandwidth_gb_per_s == CAT.links[CAT.gpus["l4"].network_link].bandwidth_gb_per_s


def test_prefill_link_options_nvlink_variant_pairs_only_with_its_own_type():
    opts = prefill_link_options(CAT, "gb200-per-gpu", ["gb200-per-gpu", "mi300x"])
    by_link = {link.id: reach for link, reach in opts}
    assert by_link["nvlink5"] == frozenset({"gb200-per-gpu"})
    net = [reach for link, reach in opts if link.kind.value == "network"]
    # the network variant pairs with any decode GPU type (of its vendor: screening's
    # restrict_prefill_links narrows it where another vendor's decode pools are screened)
    assert net == [None]


def _cand(cid, cls, role, gpu, cost, cap, pairs_with=None):
    return PoolCandidate(
        id=cid,
        class_id=cls,
        role=role,
        gpu=gpu,
        gpus_per_replica=1,
        cost_usd_per_hour_per_replica=cost,
        power_kw_per_replica=1.0,
        cuts=(CapacityCut(0.0, cap),),
        max_replicas=50,
        config_key=cid,
        pairs_with=pairs_with,
    )


def test_milp_never_pairs_an_nvlink_priced_prefill_with_another_gpu_type():
    cands = (
        # cheap prefill priced on NVLink (pairs only with decode on "a")
        _cand("pre-nv", "k", PoolRole.PREFILL, "a", 1.0, 10.0, frozenset({"a"})),
        # dearer prefill priced on the network (pairs with anything)
        _cand("pre-net", "k", PoolRole.PREFILL, "a", 1.5, 10.0, None),
        _cand("dec-a", "k", PoolRole.DECODE, "a", 3.0, 10.0),
        _cand("dec-b", "k", PoolRole.DECODE, "b", 1.0, 10.0),
    )
    p = Problem(classes=(ClassDemand("k", 10.0),), candidates=cands)
    r = solve(p)
    assert r.status == SolveStatus.OPTIMAL
    # without the pairing rows the optimum would be pre-nv + dec-b = $2/h
    assert not ({"pre-nv", "dec-b"} <= set(r.replicas))
    assert r.objective == pytest.approx(2.5)  # pre-net + dec-b


# --------------------------------------------------------------------------- item 3: margins


def test_allen_cunneen_scales_with_arrival_variability():
    base = queueing.mgc_wait_quantile_s(3.0, 1.0, 4, 0.9, 0.5)
    bursty = queueing.mgc_wait_quantile_s(3.0, 1.0, 4, 0.9, 0.5, arrival_cv2=4.0)
    assert bursty == pytest.approx(base * (4.0 + 0.5) / (1.0 + 0.5))
    assert queueing.resident_peakedness(1.0) == 1.0
    assert queueing.resident_peakedness(4.0) == 2.5


def _chat_candidates(**constraints):
    req = parse_request(request(constraints=constraints))
    return screen_candidates(resolve_request(req, CAT), CAT).candidates


def test_max_utilization_and_spares_shape_the_capacity_rows():
    plain = {c.id: c for c in _chat_candidates(max_utilization=1.0)}
    cands = _chat_candidates(max_utilization=0.8, spare_replicas_per_pool=1)
    assert cands
    for c in cands:
        assert c.max_utilization == 0.8 and c.spare_replicas == 1
        pc = c.to_pool_candidate()
        assert pc.capacity_rps(1) == 0.0  # one replica, one down: nothing left
        for n in (2, 3, 5):
            if n <= pc.max_replicas:
                # the rows never promise more than 80% of the SLO capacity with a replica down
                assert pc.capacity_rps(n) <= 0.8 * c.capacity_rps(n - 1) * (1 + 1e-9)
        assert c.max_replicas >= plain[c.id].max_replicas


def test_burst_cv_lowers_capacity():
    smooth = {c.id: c for c in _chat_candidates()}
    req = parse_request(request(traffic={"burst_cv": 2.0}))
    assert req.verify.burst_cv == 2.0  # the simulation sees the same arrivals
    bursty = screen_candidates(resolve_request(req, CAT), CAT).candidates
    checked = 0
    for c in bursty:
        if c.id in smooth:
            assert c.arrival_cv2 == 4.0
            assert c.capacity_rps(4) < smooth[c.id].capacity_rps(4)
            checked += 1
    assert checked
    # an explicit verify.burst_cv wins
    assert (
        parse_request(request(traffic={"burst_cv": 2.0}, verify={"burst_cv": 1.5})).verify.burst_cv
        == 1.5
    )


def test_plan_reports_its_margins_and_respects_max_utilization():
    plan = make_plan(request(constraints={"spare_replicas_per_pool": 1}), CAT, alternatives=False)
    assert plan.status == SolveStatus.OPTIMAL
    assert plan.margins is not None
    assert plan.margins.max_utilization == 0.85 and plan.margins.spare_replicas_per_pool == 1
    for p in plan.pools:
        assert p.utilization <= 0.85 + 1e-6
        assert p.capacity_with_spares_down_rps is not None
        assert p.rate_rps <= 0.85 * p.capacity_with_spares_down_rps * (1 + 1e-6)
    assert plan.margins.max_pool_load == pytest.approx(max(p.utilization for p in plan.pools))
    from planner.report.text import render_plan_text

    text = render_plan_text(plan.to_json_dict())
    assert "margins" in text and "N+1" in text


# --------------------------------------------------------------------------- item 4: variety


def _two_class_two_types(**ops):
    # class x is cheapest on gpu "a", class y on gpu "b"; both can run on either.
    cands = (
        _cand("x-a", "x", PoolRole.AGGREGATED, "a", 1.0, 10.0),
        _cand("x-b", "x", PoolRole.AGGREGATED, "b", 1.2, 10.0),
        _cand("y-a", "y", PoolRole.AGGREGATED, "a", 1.2, 10.0),
        _cand("y-b", "y", PoolRole.AGGREGATED, "b", 1.0, 10.0),
    )
    classes = (ClassDemand("x", 50.0), ClassDemand("y", 50.0))
    return Problem(classes=classes, candidates=cands, operations=Operations(**ops))


def test_operations_cost_consolidates_gpu_types():
    free = solve(_two_class_two_types())
    assert set(free.replicas) == {"x-a", "y-b"} and free.objective == pytest.approx(10.0)
    priced = solve(_two_class_two_types(usd_per_hour_per_gpu_type=20.0))
    assert priced.status == SolveStatus.OPTIMAL
    assert len({k.split("-")[1] for k in priced.replicas}) == 1
    # 5 x $1 + 5 x $1.2 + one GPU type at $20
    assert priced.objective == pytest.approx(11.0 + 20.0)
    small_ops = solve(_two_class_two_types(usd_per_hour_per_gpu_type=0.5))
    assert set(small_ops.replicas) == {"x-a", "y-b"}  # $1 saved beats $0.50 of variety


def test_max_gpu_types_caps_the_fleet():
    p = _two_class_two_types()
    from dataclasses import replace

    r = solve(replace(p, limits=Limits(max_gpu_types=1)))
    assert r.status == SolveStatus.OPTIMAL
    assert len({k.split("-")[1] for k in r.replicas}) == 1
    assert "max_gpu_types" in r.binding


def test_plan_reports_operations_cost_apart_from_gpu_cost():
    plan = make_plan(request(), CAT, alternatives=False)
    ops = plan.operations
    assert ops is not None and ops.gpu_types == 1
    assert ops.cost_usd_per_hour == pytest.approx(20.0 * 1 + 5.0 * ops.configurations)
    assert plan.total_cost_usd_per_hour == pytest.approx(
        plan.cost_usd_per_hour + ops.cost_usd_per_hour
    )
    assert plan.cost_usd_per_hour == pytest.approx(sum(p.cost_usd_per_hour for p in plan.pools))


def test_multi_node_replicas_get_one_command_per_node():
    gb200 = CAT.gpus["gb200-per-gpu"]
    assert gpus_per_node(gb200) == 4
    assert nodes_per_replica(16, 4) == 4 and nodes_per_replica(4, 4) == 1
    assert nodes_per_replica(8, gpus_per_node(CAT.gpus["h100-sxm5-80gb"])) == 1
    req = parse_request(
        request(candidates={"gpus": ["gb200-per-gpu"], "tp": [8], "modes": ["aggregated"]})
    )
    cands = screen_candidates(resolve_request(req, CAT), CAT).candidates
    assert cands
    launch = launch_settings(cands[0], "llama-3.1-70b")
    assert launch.nodes_per_replica == 2
    assert [n.node_rank for n in launch.per_node] == [0, 1]
    assert "--node-rank=1" in launch.per_node[1].sglang
    assert "--nnodes=2" in launch.per_node[1].sglang
    assert "--distributed-executor-backend=ray" in launch.per_node[0].vllm
    assert launch.per_node[1].vllm == [] and launch.per_node[1].ray[:2] == ["ray", "start"]


def test_sglang_is_launched_with_the_memory_the_plan_gives_weights_and_kv():
    """The plan sizes its KV cache at vLLM's share less vLLM's activation reserve; the
    SGLang command passes that as ``--mem-fraction-static`` (SGLang keeps activations
    outside its share), not vLLM's own 0.92."""
    req = parse_request(
        request(candidates={"gpus": ["h100-sxm5-80gb"], "tp": [1, 2], "modes": ["aggregated"]})
    )
    cands = screen_candidates(resolve_request(req, CAT), CAT).candidates
    assert cands
    for cand in cands[:4]:
        r = cand.replica
        launch = launch_settings(cand, "llama-3.1-70b")
        assert f"--gpu-memory-utilization={r.memory_utilization}" in launch.vllm
        (flag,) = [a for a in launch.sglang if a.startswith("--mem-fraction-static=")]
        share = float(flag.split("=")[1])
        assert share == sglang_launch_share(cand) < r.memory_utilization
        device_gb = gpu_memory_bytes(r.gpu) / 1e9
        planned_gb = r.memory_utilization * device_gb - r.activation_reserve_gb
        assert 0 <= planned_gb - share * device_gb < 0.001 * device_gb


# --------------------------------------------------------------------------- item 5: infeasible


def test_configuration_cap_is_named_with_the_value_it_needs():
    # three classes, each needing its own pool, at most 2 configurations
    cands = tuple(_cand(f"{k}-a", k, PoolRole.AGGREGATED, "a", 1.0, 10.0) for k in ("x", "y", "z"))
    p = Problem(
        classes=tuple(ClassDemand(k, 10.0) for k in ("x", "y", "z")),
        candidates=cands,
        limits=Limits(max_configurations=2),
    )
    r = solve(p)
    assert r.status == SolveStatus.INFEASIBLE
    assert r.relaxation == {"max_configurations": pytest.approx(1.0)}
    assert "even with every fleet limit relaxed" not in r.message


def test_replica_cap_is_named():
    p = Problem(
        classes=(ClassDemand("x", 30.0),),
        candidates=(_cand("x-a", "x", PoolRole.AGGREGATED, "a", 1.0, 10.0),),
        limits=Limits(max_replicas_per_pool=2),
    )
    r = solve(p, SolverOptions(time_limit_s=5))
    assert r.status == SolveStatus.INFEASIBLE
    assert r.relaxation == {"max_replicas_per_pool": pytest.approx(1.0)}


def test_no_fleet_only_when_true():
    p = Problem(
        classes=(ClassDemand("x", 30.0),),
        candidates=(_cand("x-a", "x", PoolRole.AGGREGATED, "a", 1.0, 10.0),),
        limits=Limits(max_configurations=1),
    )
    # feasible: one configuration suffices
    assert solve(p).status == SolveStatus.OPTIMAL


def test_relaxation_texts_say_what_to_move_and_how_far():
    req = resolve_request(
        parse_request(request(constraints={"max_configurations": 3, "max_replicas_per_pool": 2})),
        CAT,
    )
    assert relaxation_text("max_configurations", 1.6, req).startswith(
        "raise max_configurations from 3 to 5"
    )
    assert relaxation_text("max_replicas_per_pool", 2.0, req).startswith(
        "allow 4 replicas per pool instead of 2"
    )
    stock = resolve_request(
        parse_request(request(constraints={"max_gpus": {"h100-sxm5-80gb": 1}})), CAT
    )
    # a fractional slack is whole GPUs, rounded up; one GPU is not "GPUs"
    assert relaxation_text("stock__h100_sxm5_80gb", 0.4, stock) == (
        "h100-sxm5-80gb stock of 1 GPU is short by 1 GPU"
    )
    assert relaxation_text("stock__h100_sxm5_80gb", 10.2, stock).endswith("short by 11 GPUs")


def test_plan_infeasible_by_configuration_cap_names_it():
    body = request(
        traffic={
            "rate_rps": 20,
            "classes": [{"workload": "chat", "share": 0.5}, {"workload": "rag", "share": 0.5}],
        },
        constraints={"max_configurations": 1},
    )
    plan = make_plan(body, CAT, alternatives=False)
    assert plan.status == SolveStatus.INFEASIBLE
    assert any("raise max_configurations from 1 to" in r for r in plan.infeasible_reasons)
    assert not any("no fleet meets the SLOs" in r for r in plan.infeasible_reasons)


# --------------------------------------------------------------------------- item 6: bad input


def _issues(body):
    with pytest.raises(PlanningError) as err:
        parse_request(body)
    return dict(err.value.issues), err.value.message


def test_field_path_brackets_list_indices():
    assert field_path(("traffic", "classes", 2, "prompt_tokens", "p90_tokens")) == (
        "traffic.classes[2].prompt_tokens.p90_tokens"
    )


def test_validation_messages_say_the_shape_and_hint_fractions():
    classes = [
        {"workload": "chat", "share": 0.5, "prefix_hit_rate": 60},
        {"workload": "rag", "share": 0.3, "prompt_tokens": 8000},
        {"workload": "agent", "share": 0.2, "prompt_tokens": {"mean_tokens": 10, "p90_tokens": -1}},
    ]
    issues, text = _issues(request(traffic={"rate_rps": 5, "classes": classes}))
    assert "did you mean 0.6?" in issues["traffic.classes[0].prefix_hit_rate"]
    assert issues["traffic.classes[1].prompt_tokens"] == (
        "expected {mean_tokens, p90_tokens}, got 8000"
    )
    assert "traffic.classes[2].prompt_tokens.p90_tokens" in issues
    for bad in ("input_type", "errors.pydantic.dev", "[type=", "Input should"):
        assert bad not in text
    issues, _ = _issues(request(constraints={"max_utilisation": 0.8}))
    assert "expected one of" in issues["constraints.max_utilisation"]
    assert "max_utilization" in issues["constraints.max_utilisation"]


def test_heavy_tailed_lengths_are_accepted_with_a_warning():
    cls = {
        "workload": "chat",
        "share": 1.0,
        "prompt_tokens": {"mean_tokens": 1000, "p90_tokens": 4000},
    }
    req = resolve_request(parse_request(request(traffic={"rate_rps": 5, "classes": [cls]})), CAT)
    prompt = req.classes[0].prompt
    assert prompt.p90_tokens == 4000
    assert prompt.mean_tokens == pytest.approx(4000 / LOGNORMAL_MAX_P90_RATIO, rel=1e-5)
    assert any("traffic.classes[0].prompt_tokens" in w and "overstates" in w for w in req.warnings)
    cls["prompt_tokens"] = {"mean_tokens": 1000, "p90_tokens": 12000}
    with pytest.raises(PlanningError) as err:
        resolve_request(parse_request(request(traffic={"rate_rps": 5, "classes": [cls]})), CAT)
    assert err.value.issues[0][0] == "traffic.classes[0].prompt_tokens.p90_tokens"
    assert not math.isnan(prompt.sigma)


def test_api_422_body_is_explained(migrated_sqlite_url):
    body = small(
        traffic={
            "rate_rps": 5,
            "classes": [
                {"workload": "chat", "share": 0.5, "prefix_hit_rate": 60},
                {"workload": "rag", "share": 0.5, "prompt_tokens": 8000},
            ],
        }
    )
    with api_client(migrated_sqlite_url) as client:
        resp = client.post("/plans", json=body)
    assert resp.status_code == 422
    raw = resp.text
    for bad in ("input_type", "errors.pydantic.dev", "[type="):
        assert bad not in raw
    issues = {i["field"]: i["message"] for i in resp.json()["issues"]}
    assert "did you mean 0.6?" in issues["traffic.classes[0].prefix_hit_rate"]
    assert issues["traffic.classes[1].prompt_tokens"].startswith(
        "expected {mean_tokens, p90_tokens}"
    )


def test_cheap_class_bound_never_exceeds_the_class_optimum():
    from solver.solve import class_lower_bound

    p = _two_class_two_types(usd_per_hour_per_configuration=5.0)
    for cls in p.classes:
        cands = [c for c in p.candidates if c.class_id == cls.id]
        sub = Problem(classes=(cls,), candidates=tuple(cands), operations=p.operations)
        opt = solve(sub).objective
        lb = class_lower_bound(cls, cands, p.operations, {})
        assert lb <= opt + 1e-9
        assert lb == pytest.approx(5 * 1.0 + 5.0)  # 50 rps at $1 per 10 rps, one configuration


def test_prefill_link_options_price_a_fleet_of_one_type_on_its_own_nic():
    # H100 NVL prefill (eth-100g) offered L4 (eth-25g) and H200 (ib-ndr-400) decode too
    opts = prefill_link_options(CAT, "h100-nvl-94gb", ["h100-nvl-94gb", "l4", "h200-sxm-141gb"])
    assert [(link.id, reach) for link, reach in opts] == [
        ("eth-25g", None),  # the slowest pair link: pairs with any decode type
        # its own NIC: pairs with the types reached at least that fast (its own among them)
        ("eth-100g", frozenset({"h100-nvl-94gb", "h200-sxm-141gb"})),
    ]
    # nothing faster than the slowest: the one unrestricted option
    assert [r for _, r in prefill_link_options(CAT, "l4", ["l4", "h100-sxm5-80gb"])] == [None]
    # a rack-scale type's own NIC would pair only with itself, which NVLink already does
    reach = [r for _, r in prefill_link_options(CAT, "gb200-per-gpu", ["gb200-per-gpu", "l4"])]
    assert reach == [frozenset({"gb200-per-gpu"}), None]


def test_prefill_pools_hand_their_kv_cache_only_to_decode_pools_of_their_vendor():
    # an MI300X prefill pool offered NVIDIA decode types is priced on its vendor's links
    # only: its own NIC (eth-400g), not the slower L4's
    opts = prefill_link_options(CAT, "mi300x", ["mi300x", "l4", "h100-sxm5-80gb", "mi325x"])
    assert [(link.id, reach) for link, reach in opts] == [("eth-400g", None)]
    # screening narrows it to the AMD decode types with candidates, re-priced on them
    body = request(
        model="llama-3.1-8b",
        traffic={"rate_rps": 20, "classes": [{"workload": "rag", "share": 1.0}]},
        candidates={"gpus": ["mi300x", "h100-sxm5-80gb", "l4"], "dtypes": ["fp8"]},
    )
    got = screen_candidates(resolve_request(parse_request(body), CAT), CAT)
    prefills = [c for c in got.candidates if c.config.role.value == "prefill"]
    decodes = {c.config.gpu for c in got.candidates if c.config.role.value == "decode"}
    assert "mi300x" in decodes and decodes & {"h100-sxm5-80gb", "l4"}
    assert prefills
    for c in prefills:
        vendor = CAT.gpus[c.config.gpu].vendor
        assert c.pairs_with is not None, c.id
        assert {CAT.gpus[g].vendor for g in c.pairs_with} == {vendor}, c.id
        if c.config.gpu == "h100-sxm5-80gb":
            # priced on an NVIDIA decode type's link, never on MI300X's NIC (eth-400g)
            assert c.kv_transfer_link != "eth-400g", c.id
    ids = [c.id for c in got.candidates]
    assert len(ids) == len(set(ids))


def test_a_mixed_vendor_plan_never_pairs_prefill_and_decode_across_vendors():
    # DeepSeek-V3 offered H200 and MI300X: disaggregated pools pair within one vendor
    body = {
        "name": "mixed vendors",
        "model": "deepseek-v3",
        "traffic": {
            "rate_rps": 50,
            "classes": [{"workload": "chat", "share": 0.7}, {"workload": "rag", "share": 0.3}],
        },
        "slo": {"ttft_ms": 2000, "tpot_ms": 60, "percentile": 90},
        "candidates": {"gpus": ["h200-sxm-141gb", "mi300x"]},
        "objective": "min_cost",
    }
    plan = make_plan(parse_request(body), CAT)
    assert plan.status.value == "optimal"
    vendor = {g: CAT.gpus[g].vendor for g in ("h200-sxm-141gb", "mi300x")}
    split = 0
    for c in plan.classes:
        pools = [p for p in plan.pools if p.class_name == c.name]
        prefill = [p.gpu for p in pools if p.role.value == "prefill"]
        if prefill:
            split += 1
            decode = [p.gpu for p in pools if p.role.value == "decode"]
            assert {vendor[g] for g in prefill + decode} == {vendor[prefill[0]]}
    assert split  # (before: MI300X prefill pools handed their KV to H200 decode pools)


def test_pruning_never_lets_a_restricted_prefill_replace_one_that_pairs_with_any_type():
    from solver.prune import prune_by_cost

    cands = (
        # cheaper prefill priced on a fast link that reaches decode on "a" only
        _cand("pre-own", "k", PoolRole.PREFILL, "a", 1.0, 10.0, frozenset({"a"})),
        # dearer prefill priced on the slowest link: pairs with decode on any type
        _cand("pre-net", "k", PoolRole.PREFILL, "a", 1.5, 10.0, None),
        _cand("dec-a", "k", PoolRole.DECODE, "a", 3.0, 10.0),
        _cand("dec-b", "k", PoolRole.DECODE, "b", 1.0, 10.0),
    )
    kept = {c.id for c in prune_by_cost(cands, 10.0)}
    assert {"pre-own", "pre-net", "dec-b"} <= kept
    # an unrestricted prefill may replace a restricted one it beats on cost
    wide = _cand("pre-wide", "k", PoolRole.PREFILL, "a", 0.9, 10.0, None)
    assert "pre-own" not in {c.id for c in prune_by_cost((wide, cands[0]), 10.0)}
    # the GPU-type-set decomposition (operations costs) finds pre-net + dec-b: $2.5/h + ops
    p = Problem(
        classes=(ClassDemand("k", 10.0),),
        candidates=cands,
        operations=Operations(usd_per_hour_per_gpu_type=0.1),
    )
    r = solve(p)
    assert r.status == SolveStatus.OPTIMAL
    assert set(r.replicas) == {"pre-net", "dec-b"}


def test_screened_candidate_ids_are_unique_with_own_nic_prefill_options():
    # the 80/20 fleet offers every GPU type: MI300X prefill gets an unrestricted option
    # (re-priced on the slowest link to the decode types screened) and one on its own
    # NIC; where the two land on the same link only the unrestricted one is kept
    example = yaml.safe_load((ROOT / "examples" / "chat-agent-80-20.yaml").read_text())
    cands = screen_candidates(resolve_request(parse_request(example), CAT), CAT).candidates
    ids = [c.id for c in cands]
    assert len(ids) == len(set(ids))
    restricted = [c for c in cands if c.config.role == PoolRole.PREFILL and c.pairs_with]
    assert any(c.kv_transfer_link == "eth-400g" and "mi300x" in c.pairs_with for c in restricted)


def test_pair_cases_are_exact_when_reach_sets_overlap():
    # two restricted prefill pools whose reach sets overlap on decode type "b": the
    # cheapest fleet uses both with decode on "b" only (their intersection)
    def cand(cid, role, gpu, cost, pairs_with=None, most=50):
        return replace(_cand(cid, "k", role, gpu, cost, 10.0, pairs_with), max_replicas=most)

    cands = (
        cand("pre-a", PoolRole.PREFILL, "a", 1.0, frozenset({"a", "b"}), most=1),
        cand("pre-c", PoolRole.PREFILL, "c", 1.0, frozenset({"b", "c"}), most=1),
        cand("pre-net", PoolRole.PREFILL, "a", 5.0),
        cand("dec-a", PoolRole.DECODE, "a", 0.5),
        cand("dec-b", PoolRole.DECODE, "b", 1.0),
    )
    demand = (ClassDemand("k", 20.0, modes=(Mode.DISAGGREGATED,)),)
    for options in (SolverOptions(), SolverOptions(decompose=False)):
        r = solve(Problem(classes=demand, candidates=cands), options)
        assert r.status == SolveStatus.OPTIMAL
        assert r.objective == pytest.approx(4.0)
        assert r.replicas == {"pre-a": 1, "pre-c": 1, "dec-b": 2}


def test_removing_operations_costs_never_makes_the_gpu_bill_dearer():
    # cost-curve pruning runs only without operations costs: it must keep every
    # prefill pool that pairs with any decode type (three-class-70b's GB200 agent prefill)
    example = yaml.safe_load((ROOT / "examples" / "three-class-70b.yaml").read_text())
    example["verify"] = {"enabled": False}
    priced = make_plan(example, CAT, alternatives=False)
    free = make_plan(
        {
            **example,
            "operations": {"usd_per_hour_per_gpu_type": 0, "usd_per_hour_per_configuration": 0},
        },
        CAT,
        alternatives=False,
    )
    assert free.cost_usd_per_hour <= priced.cost_usd_per_hour * (1 + 1e-3)


def test_a_prefill_pool_keeps_one_percent_of_the_ttft_slo_to_queue_in():
    # MI355X agent prefill (tp 8, fp8) in three-class-70b-consistency: its p90 prompt
    # takes 796 ms and 2 ms to ship of the 800 ms SLO, which the simulation showed the
    # queueing formulas cannot hold (89.4% attainment of 90%)
    doc = yaml.safe_load((ROOT / "examples" / "three-class-70b-consistency.yaml").read_text())
    sc = screen_candidates(resolve_request(parse_request(doc), CAT), CAT)
    assert not any(
        c.class_name == "agent" and c.config.role == PoolRole.PREFILL and c.config.gpu == "mi355x"
        for c in sc.candidates
    )
    room = [
        r
        for r in sc.rejections
        if r.class_name == "agent" and r.gpu == "mi355x" and "to queue in" in r.detail
    ]
    assert room and all(r.reason == "ttft_unreachable" for r in room)
    assert "under the 1% a pool keeps" in room[0].detail
    for c in sc.candidates:
        if c.config.role == PoolRole.PREFILL:
            assert c.queue_room_ms > 0


def test_rounded_class_shares_are_scaled_to_sum_to_one_and_others_refused():
    from planner.request import SHARE_SUM_TOLERANCE, Traffic

    three = [{"workload": "chat", "share": 0.333, "name": n} for n in "abc"]
    t = Traffic.model_validate({"rate_rps": 30, "classes": three})
    assert [c.share for c in t.classes] == [pytest.approx(1 / 3)] * 3
    assert sum(c.share for c in t.classes) == pytest.approx(1.0, abs=1e-12)
    # shares that sum to 1 but for float rounding are kept as given (not re-scaled)
    exact = [
        {"workload": "chat", "share": s, "name": n} for s, n in ((0.7, "a"), (0.2, "b"), (0.1, "c"))
    ]
    assert [c.share for c in Traffic.model_validate({"rate_rps": 1, "classes": exact}).classes] == [
        0.7,
        0.2,
        0.1,
    ]
    off = 1.0 - 2 * SHARE_SUM_TOLERANCE
    two = [{"workload": "chat", "share": s, "name": n} for s, n in ((0.5, "a"), (off - 0.5, "b"))]
    with pytest.raises(ValueError, match=r"class shares must sum to 1, got 0\.996"):
        Traffic.model_validate({"rate_rps": 30, "classes": two})


def test_an_infeasible_plan_with_two_stocks_names_each_alone():
    body = request(
        candidates={"gpus": ["h100-sxm5-80gb", "h200-sxm-141gb"]},
        constraints={"max_gpus": {"h100-sxm5-80gb": 2, "h200-sxm-141gb": 2}},
    )
    plan = make_plan(body, CAT, alternatives=False)
    assert plan.status.value == "infeasible"
    alone = plan.relaxation_alone
    assert set(alone) == {"stock__h100_sxm5_80gb", "stock__h200_sxm_141gb"}
    line = next(r for r in plan.infeasible_reasons if r.startswith("or any one of these alone"))
    for gpu, key in (
        ("h100-sxm5-80gb", "stock__h100_sxm5_80gb"),
        ("h200-sxm-141gb", "stock__h200_sxm_141gb"),
    ):
        if key not in plan.relaxation or len(plan.relaxation) > 1:
            assert f"{gpu} stock of 2 GPUs is short by {math.ceil(alone[key] - 1e-6)} GPUs" in line


def test_every_candidate_carries_its_class_alone_in_the_milps_rows_at_its_replica_cap():
    # the chords of a capacity curve, lowered to stay under it, could end a hair below the
    # curve at the cap: the 80/20 agent prefill on MI300X tp2 allowed 59.9997 req/s at its
    # cap of 239, so the MILP added a tp4 replica (and a configuration) to reach 60
    from solver.problem import segments_capacity_rps as segments_at

    body = yaml.safe_load(
        (Path(__file__).parents[1] / "examples/chat-agent-80-20.yaml").read_text()
    )
    got = screen_candidates(resolve_request(parse_request(body), CAT), CAT)
    checked = 0
    for c in got.candidates:
        if c.segments:
            checked += 1
            assert segments_at(c.segments, c.max_replicas) >= c.rate_rps * (1 - 1e-9), c.id
    assert checked > 100
