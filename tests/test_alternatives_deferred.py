"""Alternatives solved after the plan: on the plan's kept model (planner), in the
background or on request (the service), and the same as solved with the plan."""

from __future__ import annotations

import time

import pytest
from api_support import api_client, small

from catalog.loader import load_catalog
from planner import alternatives as alt
from planner.service import STAGES, make_plan

CAT = load_catalog()


def _alts(plan_json):
    return [
        (a["name"], a["status"], a["cost_usd_per_hour"], a["delta_usd_per_hour"], a["class"])
        for a in plan_json["alternatives"]
    ]


def test_deferred_alternatives_are_the_inline_ones_on_the_kept_model():
    body = small()
    inline = make_plan(body, CAT)
    timings: dict[str, float] = {}
    deferred = make_plan(body, CAT, alternatives="deferred", timings=timings)
    assert set(timings) == set(STAGES) and timings["alternatives"] < 0.05
    assert inline.alternatives_status == alt.READY and inline.alternatives
    assert deferred.alternatives_status == alt.PENDING
    assert deferred.alternatives == [] and all(not c.mode_reason for c in deferred.classes)
    assert deferred.solved_model() is not None
    assert "solved_model" not in str(deferred.to_json_dict())  # never serialized
    assert alt.complete_alternatives(deferred)
    assert deferred.alternatives_status == alt.READY and deferred.solved_model() is None
    assert _alts(deferred.to_json_dict()) == _alts(inline.to_json_dict())
    assert [c.mode_reason for c in deferred.classes] == [c.mode_reason for c in inline.classes]
    assert not alt.complete_alternatives(deferred)  # nothing kept: nothing to do
    assert make_plan(body, CAT, alternatives=False).alternatives_status == alt.NOT_REQUESTED


@pytest.fixture
def on_request(migrated_sqlite_url):
    with api_client(migrated_sqlite_url, alternatives="on_request") as c:
        yield c


def test_post_answers_pending_and_get_alternatives_solves_them_once(on_request):
    inline = make_plan(small(), CAT).to_json_dict()
    r = on_request.post("/plans", json=small())
    assert r.status_code == 201, r.text
    pid, doc = r.json()["id"], r.json()["plan"]
    assert doc["alternatives_status"] == "pending" and doc["alternatives"] == []
    got = on_request.get(f"/plans/{pid}/alternatives")
    assert got.status_code == 200, got.text
    out = got.json()
    assert out["status"] == "ready"
    assert _alts(out) == _alts(inline)
    assert out["mode_reasons"] == {c["name"]: c["mode_reason"] for c in inline["classes"]}
    stored = on_request.get(f"/plans/{pid}").json()["plan"]
    assert stored["alternatives_status"] == "ready" and _alts(stored) == _alts(inline)
    assert on_request.get(f"/plans/{pid}/alternatives").json() == out  # stored, not redone
    unknown = "/plans/00000000-0000-4000-8000-000000000000/alternatives"
    assert on_request.get(unknown).status_code == 404


def test_inline_and_background_modes_and_a_report_of_a_pending_plan(on_request):
    r = on_request.post("/plans?alternatives=inline", json=small())
    assert r.json()["plan"]["alternatives_status"] == "ready" and r.json()["plan"]["alternatives"]
    r = on_request.post("/plans?alternatives=background", json=small())
    pid = r.json()["id"]
    assert r.json()["plan"]["alternatives_status"] == "pending"
    for _ in range(200):  # the background thread stores them
        if on_request.get(f"/plans/{pid}").json()["plan"]["alternatives_status"] == "ready":
            break
        time.sleep(0.1)
    assert on_request.get(f"/plans/{pid}/alternatives").json()["status"] == "ready"
    r = on_request.post("/plans", json=small())  # the server's default here: on_request
    pid = r.json()["id"]
    report = on_request.get(f"/plans/{pid}/report?format=md&sensitivity=false")
    assert report.status_code == 200, report.text
    assert on_request.get(f"/plans/{pid}").json()["plan"]["alternatives_status"] == "ready"
    assert on_request.post("/plans?alternatives=later", json=small()).status_code == 422


@pytest.mark.parametrize(
    "delta, reason",
    [
        (26.36, "aggregated: disaggregated would cost $26.36/h more"),
        (
            0.004,
            "aggregated: disaggregated would cost the same (a tie, to the cent; either "
            "serves the class)",
        ),
        (-3.0, "aggregated: within the solver gap of disaggregated"),
    ],
)
def test_a_mode_reason_says_a_tie_is_a_tie(delta, reason):
    from planner.plan.models import Alternative, ClassPlan, Plan
    from solver.problem import Mode

    cls = ClassPlan.model_construct(name="chat", mode=Mode.AGGREGATED, mode_reason=None)
    other = Alternative.model_construct(
        name="chat disaggregated",
        status="optimal",
        cost_usd_per_hour=100.0 + delta,
        delta_usd_per_hour=delta,
        note="",
        class_name="chat",
    )
    plan = Plan.model_construct(classes=[cls], alternatives=[other])
    alt.explain_modes(plan)
    assert cls.mode_reason == reason
