"""newsletter and newsletter_member: operator-defined newsletters fanned out to their members

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "newsletter",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("subscriber_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["subscriber_id"], ["subscriber.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("subscriber_id"),
    )
    op.create_table(
        "newsletter_member",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("newsletter_id", sa.Integer(), nullable=False),
        sa.Column("subscriber_id", sa.Integer(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["newsletter_id"], ["newsletter.id"]),
        sa.ForeignKeyConstraint(["subscriber_id"], ["subscriber.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("newsletter_id", "subscriber_id", name="uq_newsletter_member_pair"),
    )
    with op.batch_alter_table("newsletter_member", schema=None) as batch_op:
        batch_op.create_index("ix_newsletter_member_newsletter_id", ["newsletter_id"], unique=False)
        batch_op.create_index("ix_newsletter_member_subscriber_id", ["subscriber_id"], unique=False)


def downgrade() -> None:
    op.drop_table("newsletter_member")
    op.drop_table("newsletter")
