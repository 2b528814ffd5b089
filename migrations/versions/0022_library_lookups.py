"""library_lookup: arXiv ids a library import asked the arXiv API for and did not get, remembered a while

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05

Shared by every process on the database, as arXiv's politeness budget is: an import, from any process,
asks again for an id only once its row's retry_at has passed.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "library_lookup",
        sa.Column("arxiv_id", sa.String(length=64), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("looked_up_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("arxiv_id"),
    )
    op.create_index("ix_library_lookup_retry_at", "library_lookup", ["retry_at"])


def downgrade() -> None:
    op.drop_index("ix_library_lookup_retry_at", table_name="library_lookup")
    op.drop_table("library_lookup")
