"""history versions (news flag) and community picks (Hugging Face daily papers)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("version", schema=None) as batch_op:
        batch_op.add_column(sa.Column("news", sa.Boolean(), server_default=sa.true(), nullable=False))
    op.create_table(
        "community_pick",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("paper_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("upvotes", sa.Integer(), nullable=False),
        sa.Column("comments", sa.Integer(), nullable=False),
        sa.Column("keywords", sa.JSON(), nullable=False),
        sa.Column("ai_summary", sa.Text(), nullable=True),
        sa.Column("github_repo", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=True),
        sa.Column("project_page", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=True),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["paper_id"], ["paper.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("paper_id", "source", "day", name="uq_pick_paper_source_day"),
    )
    with op.batch_alter_table("community_pick", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_community_pick_paper_id"), ["paper_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_community_pick_day"), ["day"], unique=False)
        batch_op.create_index(batch_op.f("ix_community_pick_first_seen_at"), ["first_seen_at"], unique=False)


def downgrade() -> None:
    op.drop_table("community_pick")
    with op.batch_alter_table("version", schema=None) as batch_op:
        batch_op.drop_column("news")
