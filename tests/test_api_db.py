"""Engine factory, tables and repository, on SQLite and (when available) PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session

from api.db import repository as repo
from api.db.models import CatalogEntryRecord, PlanRecord, PlanStatus
from api.db.session import make_engine, make_sessionmaker, normalize_url


@pytest.fixture
def session(db_url: str) -> Iterator[Session]:
    engine = make_engine(db_url)
    try:
        with make_sessionmaker(engine)() as s:
            yield s
    finally:
        engine.dispose()


def make_plan(**overrides) -> PlanRecord:
    fields = {
        "status": PlanStatus.OPTIMAL,
        "model_id": "llama-3.1-8b",
        "catalog_hash": "sha256:" + "0" * 64,
        "request": {"model": "llama-3.1-8b", "classes": [{"workload": "chat", "rps": 10}]},
        "normalized_request": {"model": "llama-3.1-8b"},
        "solver_options": {"time_limit_s": 10, "gap": 0.001},
        "objective": 12.5,
        "cost_usd_per_hour": 12.5,
        "gap": 0.0,
        "runtime_s": 0.05,
        "plan": {"pools": [{"role": "aggregated", "gpu": "h100-sxm5-80gb", "replicas": 2}]},
    }
    fields.update(overrides)
    return PlanRecord(**fields)


# --------------------------------------------------------------------------- engine


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgres://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
        ("sqlite:///./x.db", "sqlite"),
    ],
)
def test_normalize_url_uses_psycopg_for_postgres(given, driver):
    assert normalize_url(given).drivername == driver


def test_in_memory_sqlite_is_shared_across_threads():
    engine = make_engine("sqlite://")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")

        seen: list[int] = []

        def read() -> None:
            with engine.connect() as conn:
                seen.append(len(conn.exec_driver_sql("SELECT * FROM t").all()))

        worker = threading.Thread(target=read)
        worker.start()
        worker.join()
        assert seen == [0]
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- catalog entries


def test_put_get_list_catalog_entries(session):
    repo.put_catalog_entry(session, "gpus", "my-gpu", {"id": "my-gpu", "memory_gb": 96})
    repo.put_catalog_entry(session, "models", "my-model", {"id": "my-model"})
    repo.put_catalog_entry(session, "gpus", "a-gpu", {"id": "a-gpu"})
    session.commit()

    got = repo.get_catalog_entry(session, "gpus", "my-gpu")
    assert got is not None and got.body == {"id": "my-gpu", "memory_gb": 96}
    assert repo.get_catalog_entry(session, "gpus", "nope") is None
    assert [e.entry_id for e in repo.list_catalog_entries(session, "gpus")] == ["a-gpu", "my-gpu"]
    assert [(e.kind, e.entry_id) for e in repo.list_catalog_entries(session)] == [
        ("gpus", "a-gpu"),
        ("gpus", "my-gpu"),
        ("models", "my-model"),
    ]


def test_put_replaces_the_body_and_bumps_updated_at(session):
    first = repo.put_catalog_entry(session, "links", "l1", {"v": 1})
    session.commit()
    created, updated = first.created_at, first.updated_at
    assert created.tzinfo is not None and updated.tzinfo is not None
    time.sleep(0.01)
    second = repo.put_catalog_entry(session, "links", "l1", {"v": 2})
    session.commit()
    session.expire_all()
    again = repo.get_catalog_entry(session, "links", "l1")
    assert again is not None and second.id == again.id
    assert again.body == {"v": 2}
    assert again.created_at == created
    assert again.updated_at > updated
    assert len(repo.list_catalog_entries(session, "links")) == 1


def test_delete_catalog_entry(session):
    repo.put_catalog_entry(session, "gpus", "g", {})
    session.commit()
    assert repo.delete_catalog_entry(session, "gpus", "g") is True
    assert repo.delete_catalog_entry(session, "gpus", "g") is False
    session.commit()
    assert repo.list_catalog_entries(session) == []


def test_kind_and_entry_id_are_unique(session):
    session.add(CatalogEntryRecord(kind="gpus", entry_id="dup", body={}))
    session.commit()
    session.add(CatalogEntryRecord(kind="gpus", entry_id="dup", body={}))
    with pytest.raises(IntegrityError):
        session.commit()
    session.rollback()


# --------------------------------------------------------------------------- plans


def test_plan_round_trip(session):
    record = repo.add_plan(session, make_plan())
    session.commit()
    plan_id = record.id
    assert len(plan_id) == 36 and plan_id.count("-") == 4
    session.expunge_all()

    got = repo.get_plan(session, plan_id)
    assert got is not None
    assert got.status is PlanStatus.OPTIMAL
    assert got.request["classes"][0]["rps"] == 10
    assert got.plan == {"pools": [{"role": "aggregated", "gpu": "h100-sxm5-80gb", "replicas": 2}]}
    assert got.created_at.tzinfo is not None
    assert abs(got.created_at - datetime.now(UTC)) < timedelta(minutes=1)
    assert repo.get_plan(session, "00000000-0000-0000-0000-000000000000") is None


def test_infeasible_plan_stores_nulls(session):
    record = repo.add_plan(
        session,
        make_plan(
            status=PlanStatus.INFEASIBLE,
            objective=None,
            cost_usd_per_hour=None,
            gap=None,
            plan=None,
        ),
    )
    session.commit()
    session.expunge_all()
    got = repo.get_plan(session, record.id)
    assert got is not None and got.plan is None and got.objective is None
    stored = session.execute(
        select(PlanRecord.plan).where(PlanRecord.plan.is_(None), PlanRecord.id == record.id)
    ).all()
    assert len(stored) == 1  # SQL NULL, not the JSON text 'null'


def test_list_plans_newest_first_with_filters(session):
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for i, (model, status) in enumerate(
        [("m1", PlanStatus.OPTIMAL), ("m2", PlanStatus.INFEASIBLE), ("m1", PlanStatus.FEASIBLE)]
    ):
        repo.add_plan(
            session, make_plan(model_id=model, status=status, created_at=base + timedelta(hours=i))
        )
    session.commit()
    assert [p.model_id for p in repo.list_plans(session)] == ["m1", "m2", "m1"]
    m1 = repo.PlanFilter(model_id="m1")
    assert [p.status for p in repo.list_plans(session, where=m1)] == [
        PlanStatus.FEASIBLE,
        PlanStatus.OPTIMAL,
    ]
    infeasible = repo.PlanFilter(status=PlanStatus.INFEASIBLE)
    assert [p.model_id for p in repo.list_plans(session, where=infeasible)] == ["m2"]
    assert repo.count_plans(session, where=m1) == 2
    assert len(repo.list_plans(session, limit=1, offset=1)) == 1


def test_timestamps_keep_the_instant_across_time_zones(session):
    eastern = datetime(2026, 3, 1, 7, 0, tzinfo=timezone(timedelta(hours=-5)))
    record = repo.add_plan(session, make_plan(created_at=eastern))
    session.commit()
    session.expunge_all()
    got = repo.get_plan(session, record.id)
    assert got is not None and got.created_at == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert got.created_at.utcoffset() == timedelta(0)


def test_naive_datetimes_are_refused(session):
    session.add(make_plan(created_at=datetime(2026, 1, 1)))
    with pytest.raises(StatementError, match="naive datetime"):
        session.flush()
    session.rollback()


def test_unknown_status_is_refused(session):
    session.add(make_plan(status="solved"))
    with pytest.raises(StatementError):
        session.flush()
    session.rollback()


def test_plan_status_values_match_the_solver_statuses():
    """The stored status is the plan's status; the two enums must not drift."""
    from solver.problem import SolveStatus

    assert {s.value for s in PlanStatus} == {s.value for s in SolveStatus}
