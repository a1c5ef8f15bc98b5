"""The migrations build the schema from nothing, tear it down, and agree with the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.pool import NullPool

from api.db.base import Base
from api.db.migrate import (
    alembic_config,
    current_revision,
    downgrade,
    head_revision,
    upgrade,
)
from api.db.session import make_engine

APP_TABLES = {
    "plans",
    "catalog_entries",
    "calibrations",
    "comparisons",
    "job_leases",
    "idempotency_keys",
}


def table_names(url: str) -> set[str]:
    engine = make_engine(url, poolclass=NullPool)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_one_linear_history_with_a_single_head():
    script = ScriptDirectory.from_config(alembic_config())
    assert len(script.get_heads()) == 1
    assert head_revision() == script.get_current_head()


def test_upgrade_from_empty_creates_the_tables(empty_db_url):
    assert not table_names(empty_db_url) & APP_TABLES
    upgrade(empty_db_url)
    assert table_names(empty_db_url) >= APP_TABLES | {"alembic_version"}
    assert current_revision(empty_db_url) == head_revision()


def test_downgrade_to_base_leaves_no_tables(db_url):
    downgrade(db_url, "base")
    assert not table_names(db_url) & APP_TABLES
    assert current_revision(db_url) is None


def test_upgrade_downgrade_upgrade_round_trip(db_url):
    downgrade(db_url)
    upgrade(db_url)
    upgrade(db_url)  # already at head: a no-op
    assert table_names(db_url) >= APP_TABLES
    assert current_revision(db_url) == head_revision()


def test_models_and_migrations_agree(db_url):
    """Autogenerate finds nothing to do: the tables the migrations build are the models."""
    engine = make_engine(db_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_indexes_and_unique_constraint(db_url):
    engine = make_engine(db_url, poolclass=NullPool)
    try:
        insp = inspect(engine)
        plan_indexes = {ix["name"]: ix["column_names"] for ix in insp.get_indexes("plans")}
        uniques = insp.get_unique_constraints("catalog_entries")
    finally:
        engine.dispose()
    assert plan_indexes == {
        "ix_plans_comparison_id": ["comparison_id"],
        "ix_plans_created_at": ["created_at"],
        "ix_plans_model_id": ["model_id"],
        "ix_plans_status": ["status"],
    }
    assert [(u["name"], u["column_names"]) for u in uniques] == [
        ("uq_catalog_entries_kind_entry_id", ["kind", "entry_id"])
    ]


def test_plans_link_to_comparisons_and_are_deleted_with_them(db_url):
    engine = make_engine(db_url, poolclass=NullPool)
    try:
        fks = inspect(engine).get_foreign_keys("plans")
    finally:
        engine.dispose()
    assert [(fk["name"], fk["constrained_columns"], fk["referred_table"]) for fk in fks] == [
        ("fk_plans_comparison_id_comparisons", ["comparison_id"], "comparisons")
    ]
    assert (fks[0].get("options") or {}).get("ondelete", "").upper() == "CASCADE"


def test_sqlite_uses_wal_and_foreign_keys(migrated_sqlite_url):
    engine = make_engine(migrated_sqlite_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def test_the_summary_columns_are_backfilled(empty_db_url):
    """0007 adds ``plans.name`` and ``plans.gpus_total`` and fills them from the
    documents of plans stored before it."""
    from sqlalchemy import text

    upgrade(empty_db_url, "0006")
    engine = make_engine(empty_db_url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            for ident, request, plan in [
                ("a", '{"name": "chat fleet"}', '{"gpus_total": 12}'),
                ("b", "{}", "null"),
            ]:
                conn.execute(
                    text(
                        "INSERT INTO plans (id, status, model_id, catalog_hash, request, "
                        "normalized_request, solver_options, plan) VALUES (:id, 'optimal', "
                        "'m', 'h', :request, :request, '{}', :plan)"
                    ),
                    {"id": ident, "request": request, "plan": plan},
                )
        upgrade(empty_db_url)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, name, gpus_total FROM plans ORDER BY id")).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [("a", "chat fleet", 12), ("b", None, None)]
