"""POST/GET/DELETE /comparisons on databases built by the migrations (SQLite, PostgreSQL)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from datetime import datetime

import pytest
from api_support import api_client, assert_error, count_plans, count_rows, example
from compare_support import BASE, NAMES, SPEC, spec

from api.db.models import ComparisonRecord
from planner import compare as planner_compare

TABLE_KEYS = {
    "variant",
    "axis",
    "value",
    "status",
    "cost_usd_per_hour",
    "cost_usd_per_million_tokens",
    "gpus_total",
    "gpus_by_type",
    "pool_ratio_prefill_to_decode",
    "modes",
    "ttft_ms",
    "tpot_ms",
    "meets_slo",
    "delta_usd_per_hour",
    "delta_pct",
    "plan_id",
}


@pytest.fixture
def client(db_url):
    with api_client(db_url, compare_workers=1) as c:
        yield c


def count_comparisons(url: str) -> int:
    return count_rows(url, ComparisonRecord)


def wait_until_finished(client, comparison_id: str, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = client.get(f"/comparisons/{comparison_id}").json()
        if body["status"] != "running":
            return body
        time.sleep(0.05)
    raise AssertionError(f"comparison {comparison_id} still running after {timeout_s} s")


class Gate:
    """Wraps ``planner.compare.run_variants`` so a run stops after ``after`` variants
    have been stored until released (or fails there with ``error``)."""

    def __init__(self, after: int, error: Exception | None = None):
        self.after = after
        self.error = error
        self.reached = threading.Event()
        self.release = threading.Event()
        self.real = planner_compare.run_variants

    def __call__(self, variants, catalog=None, caps=None, *, on_result=None, **kwargs):
        count = itertools.count(1)

        def gated(index: int, result: dict) -> None:
            on_result(index, result)
            if next(count) == self.after:
                self.reached.set()
                if self.error is not None:
                    raise self.error
                assert self.release.wait(30)

        return self.real(variants, catalog, caps, on_result=gated, **kwargs)


# --------------------------------------------------------------------------- create and read


def test_wait_true_solves_every_variant_and_stores_each_plan(client, db_url):
    response = client.post("/comparisons?wait=true", json=SPEC)
    assert response.status_code == 201, response.text
    body = response.json()
    uuid.UUID(body["id"])
    assert response.headers["location"] == body["location"] == f"/comparisons/{body['id']}"
    assert body["status"] == "done" and body["error"] is None
    assert body["done"] == body["total"] == 7
    assert body["name"] == "small what-if"
    assert body["spec"] == SPEC
    assert datetime.fromisoformat(body["created_at"]) <= datetime.fromisoformat(body["finished_at"])

    variants = body["variants"]
    assert [v["name"] for v in variants] == NAMES
    assert [(v["axis"], v["value"]) for v in variants[4:]] == [
        ("agent share", 0.1),
        ("agent share", 0.5),
        ("agent share", 0.9),
    ]
    assert {v["status"] for v in variants} == {"optimal", "infeasible"}
    assert next(v for v in variants if v["name"] == "TTFT 1 ms")["status"] == "infeasible"

    # every variant is a stored plan, linked, with the variant's request
    assert count_plans(db_url) == 7
    for v in variants:
        plan = client.get(f"/plans/{v['plan_id']}").json()
        assert plan["status"] == v["status"]
        assert plan["cost_usd_per_hour"] == v["cost_usd_per_hour"]
    x2 = client.get(f"/plans/{variants[1]['plan_id']}").json()
    assert x2["request"]["traffic"]["rate_rps"] == 20
    h100 = client.get(f"/plans/{variants[2]['plan_id']}").json()
    assert set(h100["plan"]["gpus_by_type"]) == {"h100-sxm5-80gb"}
    assert h100["comparison_id"] == body["id"] and h100["variant_name"] == variants[2]["name"]
    # a plan list can leave the variants' plans out, and marks them when it shows them
    listed = client.get("/plans").json()["items"]
    assert all(p["comparison_id"] == body["id"] for p in listed)
    assert client.get("/plans", params={"variants": "false"}).json()["total"] == 0


def test_table_has_every_column_and_the_difference_from_the_base(client):
    body = client.post("/comparisons?wait=true", json=SPEC).json()
    table = body["table"]
    assert [r["variant"] for r in table] == NAMES
    for row in table:
        assert set(row) >= TABLE_KEYS, set(TABLE_KEYS) - set(row)
    base = table[0]
    assert base["delta_usd_per_hour"] == 0 and base["delta_pct"] == 0
    assert set(base["modes"]) == {"chat", "agent"} == set(base["ttft_ms"]) == set(base["tpot_ms"])
    assert sum(base["gpus_by_type"].values()) == base["gpus_total"] > 0
    assert base["cost_usd_per_million_tokens"] > 0
    for row in table[1:]:
        if row["cost_usd_per_hour"] is None:
            assert row["status"] == "infeasible" and row["delta_pct"] is None
            continue
        delta = row["cost_usd_per_hour"] - base["cost_usd_per_hour"]
        assert row["delta_usd_per_hour"] == pytest.approx(delta)
        assert row["delta_pct"] == pytest.approx(100 * delta / base["cost_usd_per_hour"])
    by_name = {r["variant"]: r for r in table}
    assert by_name["traffic x2"]["delta_pct"] > 0
    # the sweep: more agent traffic (long prompts) costs more
    sweep = [by_name[f"agent share={s}"]["cost_usd_per_hour"] for s in (0.1, 0.5, 0.9)]
    assert sweep == sorted(sweep)
    # the variants list agrees with the table
    for v, row in zip(body["variants"], table, strict=True):
        assert v["plan_id"] == row["plan_id"]
        assert v["delta_pct"] == row["delta_pct"]


def test_posted_without_wait_runs_in_the_background_with_visible_progress(
    client, db_url, monkeypatch
):
    gate = Gate(after=2)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    response = client.post("/comparisons", json=SPEC)
    assert response.status_code == 202, response.text
    body = response.json()
    assert (body["status"], body["done"], body["total"]) == ("running", 0, 7)
    assert body["table"] is None
    assert response.headers["location"] == f"/comparisons/{body['id']}"

    assert gate.reached.wait(30)
    running = client.get(body["location"]).json()
    assert (running["status"], running["done"], running["total"]) == ("running", 2, 7)
    assert running["table"] is None and running["finished_at"] is None
    statuses = [v["status"] for v in running["variants"]]
    assert sorted(statuses) == ["pending"] * 5 + ["planned"] * 2
    planned = [v for v in running["variants"] if v["status"] == "planned"]
    assert all(v["plan_id"] for v in planned)
    listed = client.get("/comparisons").json()["items"]
    assert [(i["id"], i["status"], i["done"]) for i in listed] == [(body["id"], "running", 2)]
    assert_error(client.get(f"{body['location']}/report"), 409, "conflict")
    assert count_plans(db_url) == 2  # each variant's plan is stored as it finishes

    gate.release.set()
    done = wait_until_finished(client, body["id"])
    assert (done["status"], done["done"], done["total"]) == ("done", 7, 7)
    assert count_plans(db_url) == 7


def test_wait_gives_up_after_the_limit_and_answers_202(client, monkeypatch):
    from api.routes import comparisons as routes

    gate = Gate(after=1)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    monkeypatch.setattr(routes, "WAIT_LIMIT_S", 0.2)
    response = client.post("/comparisons?wait=true", json=SPEC)
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "running"
    gate.release.set()
    assert wait_until_finished(client, response.json()["id"])["status"] == "done"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        (
            spec(variants=[{"name": "no GPU", "override": {"candidates": {"gpus": ["nope"]}}}]),
            "variants[no GPU].candidates.gpus[0]",
            "unknown_entry",
        ),
        (
            spec(variants=[{"name": "neg", "override": {"traffic": {"rate_rps": -1}}}]),
            "variants[neg].traffic.rate_rps",
            "invalid_input",
        ),
        (
            spec(variants=[{"name": "bad tp", "override": {"candidates": {"tp": [3]}}}]),
            "variants[bad tp].candidates.tp",
            "invalid_input",
        ),
        (
            spec(variants=[{"name": "mix", "mix": {"chat": 0.5, "coder": 0.5}}]),
            "variants.0.mix",
            "invalid_input",
        ),
        (
            spec(variants=[{"name": "scale", "rate_scale": -2}]),
            "variants[0].rate_scale",
            "invalid_input",
        ),
        (
            spec(variants=[{"name": "x", "typo": 1}]),
            "variants[0].typo",
            "invalid_input",
        ),
        (
            spec(sweeps=[{"name": "s", "share_of": "coder", "values": [0.5]}]),
            "sweeps.0.share_of",
            "invalid_input",
        ),
        (
            spec(sweeps=[{"name": "ttft", "path": "slo.ttft_ms", "values": [500, -1]}]),
            "variants[ttft=-1].slo.ttft_ms",
            "invalid_input",
        ),
        (spec(base={**BASE, "model": "nope"}), "base.model", "unknown_entry"),
        (
            spec(variants=[{"name": "cal", "override": {"calibration": "no-such-cal"}}]),
            "variants[cal].calibration",
            "unknown_entry",
        ),
        (spec(variants=[{"name": "base"}]), "variants", "invalid_input"),
    ],
    ids=[
        "unknown-gpu",
        "negative-rate",
        "bad-tp",
        "mix-unknown-class",
        "negative-scale",
        "unknown-field",
        "sweep-unknown-class",
        "sweep-bad-value",
        "base-unknown-model",
        "unknown-calibration",
        "duplicate-name",
    ],
)
def test_a_bad_variant_is_422_naming_it_and_stores_nothing(client, db_url, body, field, code):
    err = assert_error(client.post("/comparisons", json=body), 422, code)
    assert field in [i["field"] for i in err["issues"]], err
    assert count_comparisons(db_url) == 0 and count_plans(db_url) == 0


def test_too_many_variants_is_422(client, db_url):
    values = [round(i / 100, 2) for i in range(70)]
    body = spec(sweeps=[{"name": "s", "share_of": "agent", "values": values}])
    assert_error(client.post("/comparisons", json=body), 422)
    assert count_comparisons(db_url) == 0


def test_a_failure_mid_run_marks_the_comparison_failed_with_the_reason(client, db_url, monkeypatch):
    monkeypatch.setattr(
        planner_compare, "run_variants", Gate(after=1, error=RuntimeError("solver exploded"))
    )
    response = client.post("/comparisons?wait=true", json=SPEC)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "failed"
    assert "solver exploded" in body["error"]
    assert body["done"] == 1 and body["table"] is None and body["finished_at"]
    statuses = [v["status"] for v in body["variants"]]
    assert sorted(statuses) == ["not run"] * 6 + ["planned"]
    assert count_plans(db_url) == 1  # the variant solved before: deleted with the comparison
    err = assert_error(client.get(f"/comparisons/{body['id']}/report"), 409, "conflict")
    assert "solver exploded" in err["detail"]


# --------------------------------------------------------------------------- list / delete


def test_list_is_newest_first_and_paginated(client):
    small = spec(variants=[], sweeps=[])
    ids = [client.post("/comparisons?wait=true", json=small).json()["id"] for _ in range(3)]
    page = client.get("/comparisons?limit=2").json()
    assert page["total"] == 3 and page["limit"] == 2 and page["offset"] == 0
    assert [i["id"] for i in page["items"]] == ids[::-1][:2]
    rest = client.get("/comparisons?limit=2&offset=2").json()
    assert [i["id"] for i in rest["items"]] == ids[:1]
    item = page["items"][0]
    assert set(item) == {
        "id",
        "name",
        "status",
        "done",
        "total",
        "created_at",
        "finished_at",
        "error",
        "location",
    }
    assert client.get("/comparisons?status=done").json()["total"] == 3
    assert client.get("/comparisons?status=failed").json()["total"] == 0
    assert_error(client.get("/comparisons?status=nope"), 422)
    assert_error(client.get("/comparisons?limit=0"), 422)


def test_delete_removes_the_comparison_and_its_plans(client, db_url):
    body = client.post("/comparisons?wait=true", json=SPEC).json()
    plan_id = body["variants"][1]["plan_id"]
    err = assert_error(client.delete(f"/plans/{plan_id}"), 409, "conflict")
    assert "comparison" in err["detail"]
    assert client.delete(f"/comparisons/{body['id']}").status_code == 204
    assert_error(client.get(f"/comparisons/{body['id']}"), 404, "not_found")
    assert_error(client.get(f"/plans/{plan_id}"), 404)
    assert count_comparisons(db_url) == 0 and count_plans(db_url) == 0
    assert_error(client.delete(f"/comparisons/{body['id']}"), 404)


def test_deleting_a_running_comparison_stops_it(client, db_url, monkeypatch):
    gate = Gate(after=1)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    body = client.post("/comparisons", json=SPEC).json()
    assert gate.reached.wait(30)
    assert client.delete(f"/comparisons/{body['id']}").status_code == 204
    gate.release.set()
    time.sleep(0.5)  # the run notices at its next variant and stores nothing
    assert count_comparisons(db_url) == 0 and count_plans(db_url) == 0


@pytest.mark.parametrize("ident", ["nope", str(uuid.UUID(int=0)), "x" * 300])
def test_unknown_ids_are_404(client, ident):
    assert_error(client.get(f"/comparisons/{ident}"), 404, "not_found")
    assert_error(client.get(f"/comparisons/{ident}/report"), 404, "not_found")
    assert_error(client.delete(f"/comparisons/{ident}"), 404, "not_found")


def test_writes_need_the_api_key_when_one_is_set(db_url):
    with api_client(db_url, api_key="s3cret", compare_workers=1) as c:
        assert_error(c.post("/comparisons", json=SPEC), 401, "unauthorized")
        assert count_comparisons(db_url) == 0
        ok = c.post("/comparisons?wait=true", json=SPEC, headers={"X-API-Key": "s3cret"})
        assert ok.status_code == 201
        assert c.get(f"/comparisons/{ok.json()['id']}").status_code == 200
        assert_error(c.delete(f"/comparisons/{ok.json()['id']}"), 401)


def test_stopping_the_service_lets_the_next_one_resume_running_and_queued_comparisons(
    db_url, monkeypatch
):
    """A clean stop releases the leases: the next service resumes both comparisons,
    and the variant stored before the stop is not solved again."""
    gate = Gate(after=1)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    with api_client(db_url, compare_workers=1) as c:
        first = c.post("/comparisons", json=SPEC).json()["id"]
        queued = c.post("/comparisons", json=SPEC).json()["id"]
        assert gate.reached.wait(30)
        threading.Timer(0.3, gate.release.set).start()  # once shutdown has begun
    with api_client(db_url) as c:
        stopped = c.get(f"/comparisons/{first}").json()
        assert stopped["done"] >= 1
        kept = {v["name"]: v["plan_id"] for v in stopped["variants"] if v["plan_id"]}
        assert kept
        for ident in (first, queued):
            body = wait_until_finished(c, ident)
            assert body["status"] == "done", body
            assert body["done"] == body["total"] == len(NAMES)
        after = c.get(f"/comparisons/{first}").json()
        for v in after["variants"]:
            if v["name"] in kept:
                assert v["plan_id"] == kept[v["name"]]
    assert count_plans(db_url) == 2 * len(NAMES)


def test_json_body_rules_apply(client, db_url):
    assert_error(
        client.post(
            "/comparisons", content=b"name: x", headers={"Content-Type": "application/yaml"}
        ),
        415,
    )
    assert_error(
        client.post(
            "/comparisons",
            content=b'{"base": {}, "base": {}}',
            headers={"Content-Type": "application/json"},
        ),
        422,
    )
    assert count_comparisons(db_url) == 0


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_the_80_20_what_if_example_end_to_end(sqlite_url):
    """examples/what-if-80-20.yaml through the API: 20 variants in parallel processes
    (one per core), the table, and the HTML report (well under a minute on 2 cores)."""
    from api.db.migrate import upgrade

    upgrade(sqlite_url)
    doc = example("what-if-80-20.yaml")
    with api_client(sqlite_url) as c:
        t0 = time.perf_counter()
        response = c.post("/comparisons?wait=true", json=doc)
        elapsed = time.perf_counter() - t0
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["status"] == "done", body["error"]
        assert body["done"] == body["total"] == 20
        table = {r["variant"]: r for r in body["table"]}
        base = table["base"]
        assert base["status"] == "optimal" and set(base["modes"]) == {"chat", "agent"}
        assert table["traffic x2"]["delta_pct"] > 50
        assert table["mix 20/80"]["cost_usd_per_hour"] > base["cost_usd_per_hour"]
        assert table["agent share=0.2"]["cost_usd_per_hour"] == pytest.approx(
            base["cost_usd_per_hour"], rel=0.01
        )
        report = c.get(f"/comparisons/{body['id']}/report?format=html")
        assert report.status_code == 200
        assert report.headers["content-type"] == "text/html; charset=utf-8"
        for name in ("mix 50/50", "H100 only", "traffic x2", "agent share"):
            assert name in report.text
    assert elapsed < 120, elapsed
