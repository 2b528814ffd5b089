"""follow options: revisions and instant delivery; canonical as text

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("follow", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revisions", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column("instant", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.alter_column(
            "canonical", existing_type=sqlmodel.sql.sqltypes.AutoString(length=1024), type_=sa.Text()
        )
    with op.batch_alter_table("match", schema=None) as batch_op:
        batch_op.add_column(sa.Column("instant", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("match", schema=None) as batch_op:
        batch_op.drop_column("instant")
    with op.batch_alter_table("follow", schema=None) as batch_op:
        batch_op.alter_column(
            "canonical", existing_type=sa.Text(), type_=sqlmodel.sql.sqltypes.AutoString(length=1024)
        )
        batch_op.drop_column("instant")
        batch_op.drop_column("revisions")
