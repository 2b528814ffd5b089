"""guide: machine-generated reading guides, one per version and language

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "guide",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("language", sa.String(length=8), nullable=False),
        sa.Column("tldr", sa.Text(), nullable=False),
        sa.Column("contributions", sa.JSON(), nullable=False),
        sa.Column("changes", sa.Text(), nullable=True),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["version.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("version_id", "language", name="uq_guide_version_language"),
    )
    with op.batch_alter_table("guide", schema=None) as batch_op:
        batch_op.create_index("ix_guide_version_id", ["version_id"], unique=False)
        batch_op.create_index("ix_guide_created_at", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("guide")
