"""votes, library seeds, taste models, the recommendation cursor and subscriber.recommend

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04

Recommendations start off for everyone (subscriber.recommend NULL): a reader turns them on.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (a batch would copy the table on SQLite, which its foreign keys refuse to drop).
    op.add_column("subscriber", sa.Column("recommend", sa.Integer(), nullable=True))
    op.create_table(
        "vote",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscriber.id"), nullable=False),
        sa.Column("version_id", sa.Integer(), sa.ForeignKey("version.id"), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subscriber_id", "version_id", name="uq_vote_subscriber_version"),
    )
    op.create_index("ix_vote_version_id", "vote", ["version_id"])
    op.create_table(
        "library_seed",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscriber.id"), nullable=False),
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("version_id", sa.Integer(), sa.ForeignKey("version.id"), nullable=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("abstract", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subscriber_id", "key", name="uq_library_seed_subscriber_key"),
    )
    op.create_index("ix_library_seed_version_id", "library_seed", ["version_id"])
    op.create_table(
        "taste_model",
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscriber.id"), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("positives", sa.Integer(), nullable=False),
        sa.Column("negatives", sa.Integer(), nullable=False),
        sa.Column("trained_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "recommend_cursor",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("through_version_id", sa.Integer(), nullable=False),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("recommend_cursor")
    op.drop_table("taste_model")
    op.drop_index("ix_library_seed_version_id", table_name="library_seed")
    op.drop_table("library_seed")
    op.drop_index("ix_vote_version_id", table_name="vote")
    op.drop_table("vote")
    with op.batch_alter_table("subscriber", schema=None) as batch_op:
        batch_op.drop_column("recommend")
