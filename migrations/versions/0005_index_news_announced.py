"""index version (news, announced_at): the gap fill's newest-news lookup without a table scan

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("version", schema=None) as batch_op:
        batch_op.create_index("ix_version_news_announced_at", ["news", "announced_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("version", schema=None) as batch_op:
        batch_op.drop_index("ix_version_news_announced_at")
