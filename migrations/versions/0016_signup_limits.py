"""signup_quota and subscriber.confirm_nonce: sign-up limits per client and per hour, and confirmation
links bound to the pending sign-up they were mailed for

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signup_quota",
        sa.Column("key", sa.String(length=80), nullable=False),
        sa.Column("hour", sa.BigInteger(), nullable=False),
        sa.Column("used", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "hour"),
    )
    # A link mailed before this migration carries no nonce: it no longer confirms (the page says to sign
    # up again), since it would confirm whatever the pending sign-up holds now.
    with op.batch_alter_table("subscriber", schema=None) as batch_op:
        batch_op.add_column(sa.Column("confirm_nonce", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriber", schema=None) as batch_op:
        batch_op.drop_column("confirm_nonce")
    op.drop_table("signup_quota")
