"""subscriber.heartbeat and subscriber.feed_nonce: the silent-day heartbeat a reader turns on, and the
nonce of the reader's private Atom feed link

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02

Both start off: nobody gets a heartbeat they did not ask for, and no feed link exists until the reader
(or the manage page) makes one. A new nonce revokes the link made with the old one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (a batch would copy the table on SQLite, which its foreign keys
    # refuse to drop).
    op.add_column(
        "subscriber", sa.Column("heartbeat", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.add_column("subscriber", sa.Column("feed_nonce", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriber", schema=None) as batch_op:
        batch_op.drop_column("feed_nonce")
        batch_op.drop_column("heartbeat")
