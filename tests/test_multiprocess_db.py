"""Several service processes on one database (``fleetplan serve --workers N``):
concurrent writers from separate processes all land (SQLite: WAL and a busy
timeout, api/db/session.py; PostgreSQL), and a comparison whose lease expired is
claimed by exactly one of them."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.pool import NullPool

from api.db import comparisons as repo
from api.db.base import utcnow
from api.db.models import ComparisonRecord, ComparisonStatus, PlanRecord, PlanStatus
from api.db.repository import add_plan
from api.db.session import make_engine, make_sessionmaker

PROCESSES = 4
PLANS_EACH = 25


def _writer(url: str, index: int, barrier: Any, comparison_id: str, out: Any) -> None:
    engine = make_engine(url, poolclass=NullPool)
    sessions = make_sessionmaker(engine)
    barrier.wait(30)
    now = utcnow()
    with sessions() as session:
        until = now + timedelta(seconds=60)
        won = repo.claim(session, comparison_id, f"writer-{index}", now, until)
        session.commit()
    out.put(("claim", index, won))
    for n in range(PLANS_EACH):
        with sessions() as session:
            add_plan(
                session,
                PlanRecord(
                    status=PlanStatus.OPTIMAL,
                    model_id=f"writer-{index}",
                    catalog_hash="sha256:x",
                    request={"n": n},
                    solver_options={},
                    plan={"n": n, "payload": "x" * 2000},
                ),
            )
            session.commit()
    out.put(("done", index, True))
    engine.dispose()


def test_concurrent_writers_in_separate_processes(db_url):
    engine = make_engine(db_url, poolclass=NullPool)
    sessions = make_sessionmaker(engine)
    with sessions() as session:
        stale = ComparisonRecord(
            status=ComparisonStatus.RUNNING,
            spec={},
            variants=[],
            total=0,
            owner="a service that died",
            lease_expires_at=utcnow() - timedelta(seconds=5),
        )
        repo.add_comparison(session, stale)
        session.commit()
        comparison_id = stale.id

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(db_url, i, barrier, comparison_id, out))
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    messages = [out.get(timeout=120) for _ in range(2 * PROCESSES)]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    claims = [m for m in messages if m[0] == "claim"]
    assert sum(won for _, _, won in claims) == 1, claims
    winner = next(i for _, i, won in claims if won)
    with sessions() as session:
        record = session.get(ComparisonRecord, comparison_id)
        assert record is not None
        assert (record.owner, record.attempts) == (f"writer-{winner}", 1)
        counts = dict(
            session.execute(
                select(PlanRecord.model_id, func.count()).group_by(PlanRecord.model_id)
            ).all()
        )
    engine.dispose()
    assert counts == {f"writer-{i}": PLANS_EACH for i in range(PROCESSES)}
