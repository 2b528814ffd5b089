"""slack_replay: signatures of accepted Slack requests, so a replayed signed request is refused by every process

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_replay",
        sa.Column("signature", sa.String(length=80), nullable=False),
        sa.Column("signed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("signature"),
    )
    op.create_index("ix_slack_replay_signed_at", "slack_replay", ["signed_at"])


def downgrade() -> None:
    op.drop_index("ix_slack_replay_signed_at", table_name="slack_replay")
    op.drop_table("slack_replay")
