"""GET /plans/{id}/report and GET /comparisons/{id}/report: formats, media types,
the cached sensitivity, 409 while a comparison runs."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from datetime import timedelta

import pytest
from api_support import api_client, assert_error
from compare_support import BASE, NAMES, SPEC
from openpyxl import load_workbook

from api.db.base import utcnow
from api.db.jobs import claim_job, release_job
from api.db.models import ComparisonRecord, ComparisonStatus, PlanRecord
from api.db.session import make_engine, make_sessionmaker
from api.services import reports as report_records

MEDIA = {
    "html": "text/html; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


@pytest.fixture
def client(db_url):
    with api_client(db_url, compare_workers=1) as c:
        yield c


@pytest.fixture
def sensitivity_calls(monkeypatch):
    """Counts the sensitivity computations (each is four re-plans)."""
    calls = []
    real = report_records.sensitivity

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(report_records, "sensitivity", counting)
    return calls


def stored_plan(db_url: str, plan_id: str) -> PlanRecord:
    engine = make_engine(db_url)
    try:
        with make_sessionmaker(engine)() as session:
            record = session.get(PlanRecord, plan_id)
            assert record is not None
            return record
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- plans


def test_plan_report_in_every_format(client, sensitivity_calls):
    plan = client.post("/plans", json=BASE).json()
    pid = plan["id"]
    html = client.get(f"/plans/{pid}/report?format=html&sensitivity=wait")
    assert html.status_code == 200, html.text
    assert html.headers["content-type"] == MEDIA["html"]
    assert html.headers["content-disposition"] == f'inline; filename="plan-{pid}.html"'
    assert html.text.lstrip().lower().startswith("<!doctype html")
    for needle in ("small 70/30", "Bill of materials", "Sensitivity", "traffic ×2", pid):
        assert needle in html.text, needle

    md = client.get(f"/plans/{pid}/report?format=md")
    assert md.headers["content-type"] == MEDIA["md"]
    assert md.headers["content-disposition"] == f'attachment; filename="plan-{pid}.md"'
    assert md.text.startswith("# small 70/30")
    assert "## 5. Sensitivity" in md.text or "Sensitivity" in md.text

    csv_ = client.get(f"/plans/{pid}/report?format=csv")
    assert csv_.headers["content-type"] == MEDIA["csv"]
    assert csv_.headers["content-disposition"] == f'attachment; filename="plan-{pid}.csv"'
    rows = list(csv.DictReader(io.StringIO(csv_.text)))
    assert rows[-1]["gpu"] == "TOTAL"
    assert int(rows[-1]["gpus"]) == plan["gpus_total"]

    js = client.get(f"/plans/{pid}/report?format=json")
    assert js.headers["content-type"] == MEDIA["json"]
    doc = js.json()
    assert doc["kind"] == "plan_report" and doc["id"] == pid
    assert doc["plan"]["cost_usd_per_hour"] == plan["cost_usd_per_hour"]
    assert [r["name"] for r in doc["sensitivity"]["rows"]] == [
        "traffic ×1.5",
        "traffic ×2",
        "chat share -20 pts",
        "chat share +20 pts",
    ]
    assert all(r["status"] == "optimal" for r in doc["sensitivity"]["rows"])
    # rows and base priced alike: GPUs + operations (the rows' cost is the plan's total)
    sens = doc["sensitivity"]
    total = doc["plan"].get("total_cost_usd_per_hour") or doc["plan"]["cost_usd_per_hour"]
    assert sens["base_cost_usd_per_hour"] == pytest.approx(total)
    for r in sens["rows"]:
        assert r["delta_usd_per_hour"] == pytest.approx(r["cost_usd_per_hour"] - total)
    assert len(sensitivity_calls) == 1  # computed by the first report, then cached


def test_sensitivity_is_computed_once_and_stored(client, db_url, sensitivity_calls):
    pid = client.post("/plans", json=BASE).json()["id"]
    assert stored_plan(db_url, pid).report_extras is None
    client.get(f"/plans/{pid}/report?format=csv")  # the bill of materials needs none
    assert sensitivity_calls == []
    first = client.get(f"/plans/{pid}/report?format=json").json()["sensitivity"]
    assert len(sensitivity_calls) == 1
    catalog_hash = client.get(f"/plans/{pid}").json()["catalog_hash"]
    assert stored_plan(db_url, pid).report_extras == {
        "sensitivity": first,
        "sensitivity_catalog_hash": catalog_hash,
    }
    second = client.get(f"/plans/{pid}/report?format=json").json()["sensitivity"]
    assert second == first and len(sensitivity_calls) == 1
    # the base priced as the rows are: GPUs + operations (the plan's total)
    base = client.get(f"/plans/{pid}").json()["plan"]["total_cost_usd_per_hour"]
    x2 = next(r for r in first["rows"] if r["name"] == "traffic ×2")
    assert x2["delta_pct"] == pytest.approx(100 * (x2["cost_usd_per_hour"] - base) / base)


def test_concurrent_reports_compute_the_sensitivity_once(client, monkeypatch):
    """Finding 6: five concurrent reports of one plan each re-planned it."""
    calls = []
    real = report_records.sensitivity

    def slow_counting(*args, **kwargs):
        calls.append(args[0])
        time.sleep(1.0)  # the other requests arrive meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(report_records, "sensitivity", slow_counting)
    pid = client.post("/plans", json=BASE).json()["id"]
    answers: list[dict] = []

    def report() -> None:
        answers.append(client.get(f"/plans/{pid}/report?format=json").json()["sensitivity"])

    threads = [threading.Thread(target=report) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(calls) == 1
    assert len(answers) == 5 and all(a == answers[0] and a["rows"] for a in answers)


def test_another_process_computing_it_is_waited_for(client, db_url, sensitivity_calls):
    """A job lease held by another service process: the report waits for the
    result that process stores, and computes nothing itself."""
    plan = client.post("/plans", json=BASE).json()
    key = f"sensitivity:{plan['id']}:{plan['catalog_hash']}"
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with sessions() as session:
            until = utcnow() + timedelta(seconds=60)
            assert claim_job(session, key, "another process", utcnow(), until)
            session.commit()
        answer: list[dict] = []
        reader = threading.Thread(
            target=lambda: answer.append(
                client.get(f"/plans/{plan['id']}/report?format=json").json()
            )
        )
        reader.start()
        time.sleep(0.3)
        theirs = {"base_cost_usd_per_hour": 1.0, "rows": [], "note": "computed elsewhere"}
        with sessions() as session:
            record = session.get(PlanRecord, plan["id"])
            assert record is not None
            record.report_extras = {
                "sensitivity": theirs,
                "sensitivity_catalog_hash": plan["catalog_hash"],
            }
            release_job(session, key, "another process")
            session.commit()
        reader.join(60)
    finally:
        engine.dispose()
    assert answer and answer[0]["sensitivity"] == theirs
    assert sensitivity_calls == []


def test_a_new_catalog_recomputes_the_sensitivity(client, sensitivity_calls):
    pid = client.post("/plans", json=BASE).json()["id"]
    client.get(f"/plans/{pid}/report?format=json")
    gpu = client.get("/catalog/gpus/l40s").json()
    del gpu["source"]
    gpu.update(id="our-l40s", name="L40S, our contract")
    assert client.post("/catalog/gpus", json=gpu).status_code == 201
    client.get(f"/plans/{pid}/report?format=json")
    client.get(f"/plans/{pid}/report?format=json")
    assert len(sensitivity_calls) == 2  # once per catalog


def test_the_first_html_report_does_not_wait_for_the_sensitivity(client, db_url, sensitivity_calls):
    """Issue 13: the first HTML report answers at once and says the heavy section is
    being computed; a JSON report waits for the same computation (never a second one),
    and the next HTML report has the table."""
    pid = client.post("/plans", json=BASE).json()["id"]
    first = client.get(f"/plans/{pid}/report")
    assert first.status_code == 200
    assert "Being computed in the background (started" in first.text
    assert "traffic ×2" not in first.text
    md = client.get(f"/plans/{pid}/report?format=md")
    assert "Being computed in the background" in md.text or "traffic ×2" in md.text
    doc = client.get(f"/plans/{pid}/report?format=json").json()  # waits for it
    assert [r["name"] for r in doc["sensitivity"]["rows"]][:2] == ["traffic ×1.5", "traffic ×2"]
    for _ in range(100):  # the background thread stores it and lets go of the flight
        if report_records._background == {}:
            break
        time.sleep(0.05)
    again = client.get(f"/plans/{pid}/report")
    assert "traffic ×2" in again.text and "Being computed" not in again.text
    assert len(sensitivity_calls) == 1
    assert stored_plan(db_url, pid).report_extras is not None


def test_a_background_computation_says_how_far_it_is() -> None:
    state = {"started": "04:58:01 UTC", "done": 0, "total": None}
    assert report_records.background_status(state) == "04:58:01 UTC"
    state.update(done=2, total=4)
    assert report_records.background_status(state) == "04:58:01 UTC; 2 of 4 re-plans done"


def test_sensitivity_false_skips_the_computation(client, db_url, sensitivity_calls):
    pid = client.post("/plans", json=BASE).json()["id"]
    doc = client.get(f"/plans/{pid}/report?format=json&sensitivity=false").json()
    assert doc["sensitivity"] is None
    html = client.get(f"/plans/{pid}/report?sensitivity=false")
    assert html.status_code == 200 and html.headers["content-type"] == MEDIA["html"]
    assert sensitivity_calls == [] and stored_plan(db_url, pid).report_extras is None


def test_an_infeasible_plan_has_a_report_without_sensitivity(client, sensitivity_calls):
    body = dict(BASE, slo={"ttft_ms": 1})
    plan = client.post("/plans", json=body).json()
    assert plan["status"] == "infeasible"
    for fmt in MEDIA:
        response = client.get(f"/plans/{plan['id']}/report?format={fmt}")
        assert response.status_code == 200, (fmt, response.text)
        assert response.headers["content-type"] == MEDIA[fmt]
    assert sensitivity_calls == []


def test_plan_report_bad_format_and_unknown_plan(client):
    pid = client.post("/plans", json=BASE).json()["id"]
    err = assert_error(client.get(f"/plans/{pid}/report?format=pdf"), 422, "invalid_input")
    assert err["issues"][0]["field"] == "query.format"
    assert_error(client.get("/plans/nope/report"), 404, "not_found")
    assert_error(client.get("/plans/00000000-0000-0000-0000-000000000000/report"), 404)


# --------------------------------------------------------------------------- comparisons


def test_comparison_report_in_every_format(client):
    body = client.post("/comparisons?wait=true", json=SPEC).json()
    cid = body["id"]
    html = client.get(f"/comparisons/{cid}/report")
    assert html.status_code == 200, html.text
    assert html.headers["content-type"] == MEDIA["html"]
    assert html.headers["content-disposition"] == f'inline; filename="comparison-{cid}.html"'
    assert html.text.lstrip().lower().startswith("<!doctype html")
    assert "<svg" in html.text  # the charts are inline
    for name in ["small what-if", *NAMES[1:4], "agent share"]:
        assert name in html.text, name

    md = client.get(f"/comparisons/{cid}/report?format=md")
    assert md.headers["content-type"] == MEDIA["md"]
    assert md.text.startswith("# small what-if")
    for name in NAMES[1:4]:
        assert name in md.text

    csv_ = client.get(f"/comparisons/{cid}/report?format=csv")
    assert csv_.headers["content-type"] == MEDIA["csv"]
    assert csv_.headers["content-disposition"] == f'attachment; filename="comparison-{cid}.csv"'
    rows = list(csv.DictReader(io.StringIO(csv_.text)))  # the comparison table
    assert [r["variant"] for r in rows] == [r["variant"] for r in body["table"]]
    for r, t in zip(rows, body["table"], strict=True):
        if t["status"] == "optimal":
            assert int(r["gpus"]) == t["gpus_total"]
            assert float(r["usd_per_hour"]) == pytest.approx(t["cost_usd_per_hour"], abs=1e-3)

    # the comparison table (and the bills of materials) as an Excel workbook
    xlsx = client.get(f"/comparisons/{cid}/report?format=xlsx")
    assert xlsx.status_code == 200
    assert xlsx.headers["content-type"] == MEDIA["xlsx"]
    assert xlsx.headers["content-disposition"] == f'attachment; filename="comparison-{cid}.xlsx"'
    wb = load_workbook(io.BytesIO(xlsx.content))
    assert wb.sheetnames == ["Comparison", "Bill of materials"]
    table = [[c.value for c in r] for r in wb["Comparison"].iter_rows()]
    assert [r[0] for r in table[1:]] == [r["variant"] for r in body["table"]]
    base = next(r for r in body["table"] if r["variant"] == "base")
    assert table[1][3] == pytest.approx(base["cost_usd_per_hour"])

    js = client.get(f"/comparisons/{cid}/report?format=json")
    assert js.headers["content-type"] == MEDIA["json"]
    doc = json.loads(js.text)
    assert doc["kind"] == "comparison_report" and doc["id"] == cid
    assert [r["variant"] for r in doc["table"]] == NAMES
    assert len(doc["plans"]) == 7 and doc["plans"][0]["status"] == "optimal"
    assert doc["base"] == BASE


def _insert_comparison(db_url: str, status: ComparisonStatus, **fields) -> str:
    engine = make_engine(db_url)
    try:
        with make_sessionmaker(engine)() as session:
            record = ComparisonRecord(
                name="stuck",
                status=status,
                spec=SPEC,
                variants=[{"name": "base", "axis": None, "value": None, "request": BASE}],
                done=0,
                total=1,
                **fields,
            )
            session.add(record)
            session.commit()
            return record.id
    finally:
        engine.dispose()


def test_comparison_report_is_409_while_running_or_failed(client, db_url):
    running = _insert_comparison(db_url, ComparisonStatus.RUNNING)
    for fmt in MEDIA:
        err = assert_error(client.get(f"/comparisons/{running}/report?format={fmt}"), 409)
        assert err["error"] == "conflict" and "still running" in err["detail"]
        assert err["issues"] == [{"field": "id", "message": err["detail"]}]
    failed = _insert_comparison(db_url, ComparisonStatus.FAILED, error="solver exploded")
    err = assert_error(client.get(f"/comparisons/{failed}/report"), 409, "conflict")
    assert "solver exploded" in err["detail"]
    cid = client.post("/comparisons?wait=true", json=SPEC).json()["id"]
    assert_error(client.get(f"/comparisons/{cid}/report?format=pdf"), 422)


def test_a_variant_plan_has_its_own_report(client):
    body = client.post("/comparisons?wait=true", json=SPEC).json()
    pid = body["variants"][1]["plan_id"]
    response = client.get(f"/plans/{pid}/report?format=md&sensitivity=false")
    assert response.status_code == 200
    assert response.text.startswith("# small 70/30")
    assert pid in response.text
