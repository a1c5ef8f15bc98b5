"""plan summary columns: lists read no plan document

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

On ``plans``: ``name`` (the request's name) and ``gpus_total`` (the fleet's GPUs),
backfilled from the stored documents, so ``GET /plans`` reads columns only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def summary(request: Any, normalized: Any, plan: Any) -> tuple[str | None, int | None]:
    """(name, gpus_total) of a stored plan, as the service computes them."""
    name = (normalized or {}).get("name") or (request or {}).get("name")
    gpus = (plan or {}).get("gpus_total")
    return (
        name[:200] if isinstance(name, str) else None,
        gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
    )


def upgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("name", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("gpus_total", sa.Integer(), nullable=True))
    plans = sa.table(
        "plans",
        sa.column("id", sa.String(36)),
        sa.column("request", sa.JSON()),
        sa.column("normalized_request", sa.JSON()),
        sa.column("plan", sa.JSON()),
        sa.column("name", sa.String(200)),
        sa.column("gpus_total", sa.Integer()),
    )
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(plans.c.id, plans.c.request, plans.c.normalized_request, plans.c.plan)
    ).all()
    for row in rows:
        name, gpus = summary(row.request, row.normalized_request, row.plan)
        if name is not None or gpus is not None:
            conn.execute(
                plans.update().where(plans.c.id == row.id).values(name=name, gpus_total=gpus)
            )


def downgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.drop_column("gpus_total")
        batch.drop_column("name")
