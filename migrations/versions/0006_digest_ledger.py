"""digest ledger: attempts, next attempt, worker lease and parts sent; open digests hold their matches

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("digest", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("worker", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("parts_sent", sa.Integer(), server_default="0", nullable=False))
        batch_op.create_index("ix_digest_state_next_attempt", ["state", "next_attempt_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("digest", schema=None) as batch_op:
        batch_op.drop_index("ix_digest_state_next_attempt")
        for column in ("parts_sent", "worker", "lease_until", "next_attempt_at", "attempts"):
            batch_op.drop_column(column)
