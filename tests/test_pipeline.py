"""Pipeline parallelism across nodes (issue 12 item 1): a model larger than one node is
served with TP within a node and pipeline stages across nodes; the cost model, the
plan, the simulation and the launch commands agree on it."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from catalog.loader import load_catalog
from catalog.schema import Catalog
from planner import roofline as rl
from planner.candidates import pp_options
from planner.errors import DoesNotFitError, PlanningError
from planner.service import make_plan

REQUEST: dict[str, Any] = {
    "name": "405b bf16 on h100",
    "model": "llama-3.1-405b",
    "traffic": {"rate_rps": 4, "classes": [{"workload": "chat", "share": 1.0}]},
    "slo": {"ttft_ms": 2000, "tpot_ms": 80, "percentile": 90},
    "candidates": {"gpus": ["h100-sxm5-80gb"], "dtypes": ["bf16"]},
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _replica(catalog: Catalog, pp: int) -> rl.Replica:
    return rl.build_replica(
        catalog, "llama-3.1-405b", "h100-sxm5-80gb", tp=8, dtype="bf16", pp=pp, check_fit=False
    )


def test_a_model_larger_than_a_node_is_told_to_use_stages(catalog: Catalog) -> None:
    with pytest.raises(DoesNotFitError) as err:
        rl.build_replica(catalog, "llama-3.1-405b", "h100-sxm5-80gb", tp=8, dtype="bf16")
    assert err.value.issues[0][0] == "pp"
    assert "(pp=2) would fit" in err.value.message
    two = rl.build_replica(catalog, "llama-3.1-405b", "h100-sxm5-80gb", tp=8, dtype="bf16", pp=2)
    assert two.gpus == 16
    assert two.pp_link is not None and two.pp_link.id == "ib-ndr-400"


def test_stages_add_memory_not_kv_copies(catalog: Catalog) -> None:
    one, two = _replica(catalog, 1), _replica(catalog, 2)
    assert rl.usable_memory_gb(two) == pytest.approx(2 * rl.usable_memory_gb(one))
    expected = (
        rl.usable_memory_gb(two) - 16 * two.activation_reserve_gb
    ) * 1e9 - rl.replica_weight_bytes(two)
    assert rl.kv_capacity_bytes(two) == pytest.approx(expected)
    # a stage holds its layers' KV: per token the same bytes as one TP group
    assert two.coefficients.kv_held_bytes(1000) == one.coefficients.kv_held_bytes(1000)


def test_stage_hop_formula(catalog: Catalog) -> None:
    c = _replica(catalog, 2).coefficients
    link = catalog.links["ib-ndr-400"]
    tokens = 64.0
    expected = link.latency_us * 1e-3 + tokens * 16384 * 2 / (link.bandwidth_gb_per_s * 1e6)
    assert c.stage_hop_ms(tokens) == pytest.approx(expected)
    assert _replica(catalog, 1).coefficients.stage_hop_ms(tokens) == 0.0


def test_a_step_is_one_micro_batch_pass(catalog: Catalog) -> None:
    """step(B) on pp stages = the whole model's kernels at B / pp (plus the chunk) and
    pp hand-overs: every sequence advances once per pass of its micro-batch."""
    c2 = _replica(catalog, 2).coefficients
    c1 = replace(c2, pp=1, pp_link=None)
    for batch, chunk in ((32, 0.0), (40, 256.0)):
        n = batch / 2 + chunk
        expected = c1.step_ms(batch / 2, 3000.0, chunk, 500.0) + 2 * c2.stage_hop_ms(n)
        assert c2.step_ms(batch, 3000.0, chunk, 500.0) == pytest.approx(expected, rel=1e-12)
        assert c2.kernels(batch, 3000.0, chunk, 500.0).total_ms == pytest.approx(expected)
    # a prompt runs through the stages one after another: pp - 1 hand-overs
    two = _replica(catalog, 2)
    one_fit = replace(two, pp=1, pp_link=None)
    assert rl.prefill_ms(two, 4000) == pytest.approx(
        rl.prefill_ms(one_fit, 4000) + c2.stage_hop_ms(4000)
    )


def test_stages_are_offered_only_where_a_node_is_too_small(catalog: Catalog) -> None:
    assert pp_options(catalog, "h100-sxm5-80gb", 8, True, None) == [1]
    assert pp_options(catalog, "h100-sxm5-80gb", 8, False, None) == [1, *rl.PP_OPTIONS]
    assert pp_options(catalog, "h100-sxm5-80gb", 4, False, None) == [1]
    assert pp_options(catalog, "h100-sxm5-80gb", 4, True, (1, 2)) == [1, 2]


def test_405b_bf16_on_h100_is_planned_with_stages(catalog: Catalog) -> None:
    plan = make_plan(REQUEST, catalog, verify=True)
    assert plan.status.has_solution
    assert plan.pools and all(p.pp >= 2 for p in plan.pools)
    for p in plan.pools:
        assert p.gpus == p.replicas * p.tp * p.pp
        assert f"--pipeline-parallel-size={p.pp}" in p.launch.vllm
        assert f"--pp-size={p.pp}" in p.launch.sglang
        assert p.launch.nodes_per_replica == p.tp * p.pp // 8
        assert len(p.launch.per_node) == p.launch.nodes_per_replica
    assert plan.gpus_total == sum(p.gpus for p in plan.pools)
    assert plan.verification is not None and plan.verification.passed


def test_without_stages_the_request_says_what_to_move(catalog: Catalog) -> None:
    req = copy.deepcopy(REQUEST)
    req["candidates"]["pp"] = [1]
    plan = make_plan(req, catalog, alternatives=False, verify=False)
    assert not plan.status.has_solution
    assert "(pp=2) would fit" in " ".join(plan.infeasible_reasons)


@pytest.mark.parametrize("bad", [[3], [0], [16]])
def test_bad_pipeline_degrees_name_the_field(catalog: Catalog, bad: list[int]) -> None:
    req = copy.deepcopy(REQUEST)
    req["candidates"]["pp"] = bad
    with pytest.raises(PlanningError) as err:
        make_plan(req, catalog, alternatives=False, verify=False)
    assert any(f.startswith("candidates.pp") for f, _ in err.value.issues)
