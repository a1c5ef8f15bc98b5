"""job leases: one service process computes a shared result, the others wait

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

A ``job_leases`` table (``key`` primary key, ``owner``, ``expires_at``): a plan
report's sensitivity table is computed once across the service's processes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_leases",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("owner", sa.String(length=120), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_job_leases")),
    )


def downgrade() -> None:
    op.drop_table("job_leases")
