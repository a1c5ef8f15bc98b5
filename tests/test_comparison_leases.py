"""Comparisons as durable, bounded jobs (issue 14: items 4, findings 3 and 4):
leases, recovery when one is read or at start, the attempt limit, the bounded
queue (429 + Retry-After) and /health answering while comparisons wait."""

from __future__ import annotations

import threading
from datetime import timedelta

from api_support import api_client, assert_error, count_rows
from compare_support import NAMES, SPEC, spec
from sqlalchemy import update
from sqlalchemy.pool import NullPool
from test_api_comparisons import Gate, wait_until_finished

from api.db.base import utcnow
from api.db.models import ComparisonRecord
from api.db.session import make_engine
from planner import compare as planner_compare


def set_row(url: str, comparison_id: str, **values: object) -> None:
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(
                update(ComparisonRecord)
                .where(ComparisonRecord.id == comparison_id)
                .values(**values)
            )
    finally:
        engine.dispose()


def test_a_read_resumes_a_comparison_whose_lease_expired_and_the_old_owner_stops(
    db_url, monkeypatch
):
    gate = Gate(after=2)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    with api_client(db_url, compare_workers=1) as c:
        ident = c.post("/comparisons", json=SPEC).json()["id"]
        assert gate.reached.wait(30)
        before = c.get(f"/comparisons/{ident}").json()
        kept = {v["name"]: v["plan_id"] for v in before["variants"] if v["plan_id"]}
        assert len(kept) == 2
        # its service "died": the lease lapsed and the owner is someone else's
        set_row(db_url, ident, owner="gone:1:x", lease_expires_at=utcnow() - timedelta(seconds=1))
        resumed = c.get(f"/comparisons/{ident}").json()  # claims it and queues the rest
        assert resumed["status"] == "running"
        gate.release.set()  # the old run's next write is refused: it stops
        done = wait_until_finished(c, ident)
    assert done["status"] == "done", done["error"]
    assert done["done"] == done["total"] == len(NAMES)
    plans = {v["name"]: v["plan_id"] for v in done["variants"]}
    assert all(plans[name] == plan_id for name, plan_id in kept.items())
    assert count_rows(db_url) == len(NAMES)  # no variant stored twice


def test_after_its_attempts_a_comparison_is_failed_with_the_reason(db_url, monkeypatch):
    gate = Gate(after=1)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    with api_client(db_url, compare_workers=1) as c:
        ident = c.post("/comparisons", json=SPEC).json()["id"]
        assert gate.reached.wait(30)
        set_row(
            db_url,
            ident,
            owner="gone:1:x",
            attempts=3,
            lease_expires_at=utcnow() - timedelta(seconds=1),
        )
        gate.release.set()
    with api_client(db_url, compare_workers=1, comparison_attempts=3) as c:  # start: sweep
        body = c.get(f"/comparisons/{ident}").json()
    assert body["status"] == "failed"
    assert "abandoned" in body["error"] and "3 attempts" in body["error"]
    assert body["finished_at"] is not None


def test_the_queue_is_bounded_429_with_retry_after_and_nothing_stored(db_url, monkeypatch):
    gate = Gate(after=1)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    with api_client(db_url, compare_workers=1, max_comparisons=2) as c:
        first = c.post("/comparisons", json=SPEC)
        second = c.post("/comparisons", json=SPEC)
        assert (first.status_code, second.status_code) == (202, 202)
        full = c.post("/comparisons", json=SPEC)
        err = assert_error(full, 429, "busy")
        assert int(full.headers["retry-after"]) > 0
        assert "2 comparisons" in err["detail"]
        assert count_rows(db_url, ComparisonRecord) == 2
        gate.release.set()
        for response in (first, second):
            assert wait_until_finished(c, response.json()["id"])["status"] == "done"
        assert c.post("/comparisons", json=SPEC).status_code == 202  # room again


def test_health_and_reads_answer_while_many_comparisons_wait(db_url, monkeypatch):
    """Finding 3: 41 ``?wait=true`` comparisons behind a slow one used to hold every
    thread of the pool that also serves /health and the reads."""
    gate = Gate(after=1)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    small = spec(variants=[], sweeps=[{"name": "s", "share_of": "agent", "values": [0.5]}])
    with api_client(db_url, compare_workers=1, max_comparisons=60) as c:
        statuses: list[int] = []

        def post() -> None:
            statuses.append(c.post("/comparisons?wait=true", json=small).status_code)

        posters = [threading.Thread(target=post) for _ in range(41)]
        for t in posters:
            t.start()
        assert gate.reached.wait(60)
        answers: dict[str, int] = {}

        def read() -> None:
            answers["health"] = c.get("/health").status_code
            answers["plans"] = c.get("/plans").status_code
            answers["comparisons"] = c.get("/comparisons?limit=5").status_code

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(30)  # blocked until the gate opens, before
        answered = dict(answers)
        gate.release.set()
        for t in posters:
            t.join(120)
    assert answered == {"health": 200, "plans": 200, "comparisons": 200}
    assert statuses == [201] * 41


def test_a_running_comparison_keeps_renewing_its_lease(db_url, monkeypatch):
    gate = Gate(after=1)
    monkeypatch.setattr(planner_compare, "run_variants", gate)
    with api_client(db_url, compare_workers=1, comparison_lease_s=0.3) as c:
        ident = c.post("/comparisons", json=SPEC).json()["id"]
        assert gate.reached.wait(30)
        engine = make_engine(db_url, poolclass=NullPool)
        try:
            seen = set()
            for _ in range(20):
                with engine.connect() as conn:
                    row = conn.execute(
                        ComparisonRecord.__table__.select().where(ComparisonRecord.id == ident)
                    ).one()
                seen.add(row.heartbeat_at)
                threading.Event().wait(0.1)
        finally:
            engine.dispose()
        assert len(seen) > 1  # renewed while a variant runs
        body = c.get(f"/comparisons/{ident}").json()
        assert body["status"] == "running"  # never taken as abandoned
        gate.release.set()
        assert wait_until_finished(c, ident)["status"] == "done"
