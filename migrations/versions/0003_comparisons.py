"""comparisons: what-if comparisons, their variants' plans, cached report extras

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

A ``comparisons`` table; on ``plans`` a nullable ``comparison_id`` (foreign key,
``ON DELETE CASCADE``, indexed) and ``variant_name`` linking a variant's plan to
its comparison, and ``report_extras`` (JSON) caching what a report computes later
(the sensitivity). SQLite alters ``plans`` in batch mode (a table copy).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "comparisons",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("variants", sa.JSON(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("table", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_comparisons")),
    )
    with op.batch_alter_table("comparisons") as batch:
        batch.create_index(batch.f("ix_comparisons_created_at"), ["created_at"])

    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("comparison_id", sa.String(length=36), nullable=True))
        batch.add_column(sa.Column("variant_name", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("report_extras", sa.JSON(), nullable=True))
        batch.create_foreign_key(
            batch.f("fk_plans_comparison_id_comparisons"),
            "comparisons",
            ["comparison_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch.create_index(batch.f("ix_plans_comparison_id"), ["comparison_id"])


def downgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.drop_index(batch.f("ix_plans_comparison_id"))
        batch.drop_constraint(batch.f("fk_plans_comparison_id_comparisons"), type_="foreignkey")
        batch.drop_column("report_extras")
        batch.drop_column("variant_name")
        batch.drop_column("comparison_id")
    with op.batch_alter_table("comparisons") as batch:
        batch.drop_index(batch.f("ix_comparisons_created_at"))
    op.drop_table("comparisons")
