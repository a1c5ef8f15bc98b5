"""Planning work is bounded and a faulty catalog entry only excludes itself (issue 14,
findings 1 and 2)."""

from __future__ import annotations

import pytest
from api_support import api_client, assert_error, count_custom_entries, count_plans, small

from catalog import schema
from catalog.loader import load_catalog
from planner import roofline
from planner.errors import PlanningTimeLimit
from planner.service import SolverLimits, make_plan

SHIPPED = load_catalog()


def gpu_entry(gpu_id: str = "big-gpu", **changes) -> dict:
    """A copy of the shipped L40S under a new id, with changes."""
    entry = SHIPPED.gpus["l40s"].model_dump(mode="json")
    return {**entry, "id": gpu_id, "name": f"{gpu_id} (custom)", **changes}


def model_entry(**changes) -> dict:
    entry = SHIPPED.models["llama-3.1-8b"].model_dump(mode="json")
    return {**entry, "id": "my-8b", "name": "my 8B", **changes}


# --------------------------------------------------------------------------- finding 1


def test_screening_past_its_time_limit_stops_with_an_error_naming_candidates():
    with pytest.raises(PlanningTimeLimit) as err:
        make_plan(small(), SHIPPED, SolverLimits(screening_time_limit_s=1e-9))
    assert err.value.issues[0][0] == "candidates"
    assert "time limit" in err.value.message and "fewer GPU types" in err.value.message


def test_the_time_limit_of_screening_is_a_422_and_stores_nothing(migrated_sqlite_url):
    with api_client(migrated_sqlite_url, screening_time_limit_s=1e-6) as client:
        error = assert_error(client.post("/plans", json=small()), 422, "planning_time_limit")
        assert error["issues"][0]["field"] == "candidates"
    assert count_plans(migrated_sqlite_url) == 0


def test_a_robust_plan_screens_within_the_same_time_limit():
    body = small(scenarios=[{"name": "a", "mix": {"chat": 1}}, {"name": "b", "rate_scale": 2}])
    with pytest.raises(PlanningTimeLimit):
        make_plan(body, SHIPPED, SolverLimits(screening_time_limit_s=1e-9))


def test_the_default_limit_leaves_ordinary_plans_alone():
    plan = make_plan(small(candidates={"chunk_budgets": list(range(512, 512 * 17, 512))}), SHIPPED)
    assert plan.status.has_solution


# --------------------------------------------------------------------------- finding 2

ABSURD = [
    ("memory_gb", 1e308),
    ("memory_gb", schema.MAX_MEMORY_GB * 1.01),
    ("mem_bw_tbps", 1e6),
    ("bf16_dense_tflops", 1e9),
    ("tdp_w", 1e12),
    ("memory_gb", True),
    ("memory_gb", "48"),
]


@pytest.mark.parametrize(("field", "value"), ABSURD, ids=[f"{f}={v!r}" for f, v in ABSURD])
def test_custom_gpus_get_physical_bounds(migrated_sqlite_url, field, value):
    with api_client(migrated_sqlite_url) as client:
        error = assert_error(client.post("/catalog/gpus", json=gpu_entry(**{field: value})), 422)
        assert error["issues"][0]["field"] == field, error
    assert count_custom_entries(migrated_sqlite_url) == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("num_layers", 10**12), ("hidden_size", 10**12), ("vocab_size", 10**12), ("name", "m\x00")],
)
def test_custom_models_get_physical_bounds(migrated_sqlite_url, field, value):
    with api_client(migrated_sqlite_url) as client:
        error = assert_error(
            client.post("/catalog/models", json=model_entry(**{field: value})), 422
        )
        assert error["issues"][0]["field"] == field, error
    assert count_custom_entries(migrated_sqlite_url) == 0


def test_a_gpu_at_every_upper_bound_plans_and_every_plan_still_plans(migrated_sqlite_url):
    """Absurd but allowed figures (10 TB of memory, 200 PFLOP/s...) do not break the
    default plan, which screens every GPU type."""
    huge = gpu_entry(
        memory_gb=schema.MAX_MEMORY_GB,
        reported_memory=None,  # the L40S's 46,068 MiB is no reading of a 10 TB part
        mem_bw_tbps=schema.MAX_MEM_BW_TBPS,
        bf16_dense_tflops=schema.MAX_TFLOPS,
        fp8_dense_tflops=schema.MAX_TFLOPS,
        tdp_w=schema.MAX_TDP_W,
    )
    with api_client(migrated_sqlite_url) as client:
        assert client.post("/catalog/gpus", json=huge).status_code == 201
        body = small()
        del body["candidates"]  # every GPU type in the catalog
        response = client.post("/plans", json=body)
        assert response.status_code == 201, response.text
        assert response.json()["status"] in ("optimal", "feasible")


def test_a_gpu_whose_screening_fails_is_left_out_with_a_reason(monkeypatch):
    """An error in the cost model for one GPU type (what an overflowing custom entry
    did) excludes that type, named in why_not, and the plan is made without it."""
    build = roofline.build_replica

    def faulty(catalog, model_id, gpu_id, **kw):
        if gpu_id == "l40s":
            raise OverflowError("math range error")
        return build(catalog, model_id, gpu_id, **kw)

    monkeypatch.setattr(roofline, "build_replica", faulty)
    plan = make_plan(small(), SHIPPED)
    assert plan.status.has_solution
    assert {p.gpu for p in plan.pools} == {"h100-sxm5-80gb"}
    faulty_rows = [w for w in plan.why_not if w.reason == "faulty_entry"]
    assert faulty_rows and {w.gpu for w in faulty_rows} == {"l40s"}
    assert "OverflowError" in faulty_rows[0].detail
    assert plan.solver.candidates_rejected.get("faulty_entry", 0) >= 1


def test_when_every_gpu_fails_the_plan_is_infeasible_not_an_error(monkeypatch):
    def faulty(*args, **kw):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(roofline, "build_replica", faulty)
    plan = make_plan(small(), SHIPPED)
    assert plan.status.value == "infeasible"
    assert all(w.reason == "faulty_entry" for w in plan.why_not)


def test_a_faulty_custom_gpu_only_excludes_itself_through_the_api(migrated_sqlite_url, monkeypatch):
    build = roofline.build_replica

    def faulty(catalog, model_id, gpu_id, **kw):
        if gpu_id == "bad-gpu":
            raise OverflowError("math range error")
        return build(catalog, model_id, gpu_id, **kw)

    monkeypatch.setattr(roofline, "build_replica", faulty)
    with api_client(migrated_sqlite_url) as client:
        assert client.post("/catalog/gpus", json=gpu_entry("bad-gpu")).status_code == 201
        body = small()
        del body["candidates"]
        response = client.post("/plans", json=body)
        assert response.status_code == 201, response.text
        plan = response.json()["plan"]
        assert plan["status"] in ("optimal", "feasible")
        assert {w["gpu"] for w in plan["why_not"] if w["reason"] == "faulty_entry"} == {"bad-gpu"}
