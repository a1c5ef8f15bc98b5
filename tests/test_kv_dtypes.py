"""KV-cache formats apart from the weights' (issue 12 item 3: FP8 KV with BF16 weights)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from catalog.loader import load_catalog
from catalog.schema import Catalog, Dtype
from planner import roofline as rl
from planner.candidates import kv_dtype_options
from planner.errors import PlanningError
from planner.service import make_plan

REQUEST: dict[str, Any] = {
    "name": "70b bf16 on h100",
    "model": "llama-3.1-70b",
    # at 40 requests/s the decode pool is large enough for an FP8 cache's smaller KV to
    # save a replica (at 20 both fleets cost $118.50/h once prefill GEMMs gained by size)
    "traffic": {"rate_rps": 40, "classes": [{"workload": "chat", "share": 1.0}]},
    "candidates": {"gpus": ["h100-sxm5-80gb"], "dtypes": ["bf16"]},
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_kv_options_follow_the_request() -> None:
    assert kv_dtype_options(Dtype.BF16, None) == [Dtype.BF16]
    assert kv_dtype_options(Dtype.FP8, None) == [Dtype.FP8]
    assert kv_dtype_options(Dtype.BF16, (Dtype.BF16, Dtype.FP8)) == [Dtype.BF16, Dtype.FP8]


def test_an_fp8_cache_holds_twice_the_sequences(catalog: Catalog) -> None:
    bf16 = rl.build_replica(catalog, "llama-3.1-70b", "h100-sxm5-80gb", tp=4, dtype="bf16")
    fp8kv = rl.build_replica(
        catalog, "llama-3.1-70b", "h100-sxm5-80gb", tp=4, dtype="bf16", kv_dtype="fp8"
    )
    assert rl.kv_capacity_tokens(fp8kv) == pytest.approx(2 * rl.kv_capacity_tokens(bf16), rel=1e-3)


def test_bf16_weights_with_an_fp8_cache_are_planned_and_launched(catalog: Catalog) -> None:
    plain = make_plan(REQUEST, catalog, alternatives=False, verify=False)
    req = copy.deepcopy(REQUEST)
    req["candidates"]["kv_dtypes"] = ["bf16", "fp8"]
    both = make_plan(req, catalog, alternatives=False, verify=True)
    assert plain.status.has_solution and both.status.has_solution
    assert all(p.kv_dtype == "bf16" for p in plain.pools)
    assert both.total_cost_usd_per_hour <= plain.total_cost_usd_per_hour  # type: ignore[operator]
    fp8 = [p for p in both.pools if p.kv_dtype == "fp8"]
    assert fp8, "an FP8 cache halves the KV bytes: the cheaper fleet uses it"
    for p in fp8:
        assert p.dtype == "bf16" and "--kv-cache-dtype=fp8" in p.launch.vllm
        assert "kvfp8" in p.id
    assert both.verification is not None and both.verification.passed


@pytest.mark.parametrize("bad", [["fp4"], ["int8"]])
def test_kv_formats_engines_do_not_offer_are_refused(catalog: Catalog, bad: list[str]) -> None:
    req = copy.deepcopy(REQUEST)
    req["candidates"]["kv_dtypes"] = bad
    with pytest.raises(PlanningError) as err:
        make_plan(req, catalog, alternatives=False, verify=False)
    assert any(f.startswith("candidates.kv_dtypes") for f, _ in err.value.issues)
