"""initial: plans and custom catalog entries

Revision ID: 0001
Revises:
Create Date: 2026-05-01

Portable across SQLite and PostgreSQL: sa.JSON (json on PostgreSQL, text on SQLite),
statuses as VARCHAR (no database enum type), timestamps with time zone.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("model_id", sa.String(length=64), nullable=False),
        sa.Column("catalog_hash", sa.String(length=80), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("normalized_request", sa.JSON(), nullable=True),
        sa.Column("solver_options", sa.JSON(), nullable=False),
        sa.Column("objective", sa.Double(), nullable=True),
        sa.Column("cost_usd_per_hour", sa.Double(), nullable=True),
        sa.Column("gap", sa.Double(), nullable=True),
        sa.Column("runtime_s", sa.Double(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plans")),
    )
    with op.batch_alter_table("plans") as batch:
        batch.create_index(batch.f("ix_plans_created_at"), ["created_at"])
        batch.create_index(batch.f("ix_plans_model_id"), ["model_id"])
        batch.create_index(batch.f("ix_plans_status"), ["status"])

    op.create_table(
        "catalog_entries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("entry_id", sa.String(length=64), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_catalog_entries")),
        sa.UniqueConstraint("kind", "entry_id", name=op.f("uq_catalog_entries_kind_entry_id")),
    )


def downgrade() -> None:
    op.drop_table("catalog_entries")
    with op.batch_alter_table("plans") as batch:
        batch.drop_index(batch.f("ix_plans_status"))
        batch.drop_index(batch.f("ix_plans_model_id"))
        batch.drop_index(batch.f("ix_plans_created_at"))
    op.drop_table("plans")
