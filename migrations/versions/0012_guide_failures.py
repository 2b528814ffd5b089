"""guide_failure: failed guide attempts, counted against the daily cap; garbage answers lead to giving up

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "guide_failure",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("language", sa.String(length=8), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("retryable", sa.Boolean(), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["version.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("guide_failure", schema=None) as batch_op:
        batch_op.create_index("ix_guide_failure_version_id", ["version_id"], unique=False)
        batch_op.create_index("ix_guide_failure_failed_at", ["failed_at"], unique=False)


def downgrade() -> None:
    op.drop_table("guide_failure")
