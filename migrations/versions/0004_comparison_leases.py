"""comparison leases: durable what-if comparisons

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

On ``comparisons``: ``results`` (JSON, each variant's outcome as it finishes),
``owner``, ``lease_expires_at`` (indexed), ``heartbeat_at`` and ``attempts``
(0 for existing rows). A comparison left ``running`` by an older version has no
lease, so the first service to start claims it (resumes or fails it).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("comparisons") as batch:
        batch.add_column(sa.Column("results", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("owner", sa.String(length=120), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
        batch.create_index(batch.f("ix_comparisons_lease_expires_at"), ["lease_expires_at"])


def downgrade() -> None:
    with op.batch_alter_table("comparisons") as batch:
        batch.drop_index(batch.f("ix_comparisons_lease_expires_at"))
        batch.drop_column("attempts")
        batch.drop_column("heartbeat_at")
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
        batch.drop_column("results")
