"""delivery_alarm and subscriber.refused_at: a server-wide refusal is an alarm, not N paused subscribers

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-08

``subscriber.refused_at`` is filled in for subscribers the delivery ledger paused before this migration:
paused, with a failed digest whose error is the pause reason (what ``finish_refused`` writes). The time is
that digest's creation, the closest the old rows know; `papertrail resume --reason` finds them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "delivery_alarm",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recipients", sa.Integer(), nullable=False),
        sa.Column("held", sa.Integer(), nullable=False),
        sa.Column("sample", sa.Text(), nullable=False),
        sa.Column("cleared_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("channel", "kind", name="uq_delivery_alarm_channel_kind"),
    )
    with op.batch_alter_table("subscriber") as batch:
        batch.add_column(sa.Column("refused_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        """
        UPDATE subscriber SET refused_at = (
            SELECT max(digest.created_at) FROM digest
            WHERE digest.subscriber_id = subscriber.id AND digest.state = 'failed'
              AND digest.error = subscriber.status_reason
        )
        WHERE status = 'paused'
        """
    )


def downgrade() -> None:
    with op.batch_alter_table("subscriber") as batch:
        batch.drop_column("refused_at")
    op.drop_table("delivery_alarm")
