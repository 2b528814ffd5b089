"""library_total, the per-paper flags it counts, and an index of the news by arrival: the status page,
/metrics and `papertrail status` without counting the whole library on every load (issue 15)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03

The flags and the totals are computed from the rows stored now (core.store.counts.rebuild_library_totals,
imported like 0007 imports the classifier): one pass over the version table, about as long as one load of
the old status page per table at a million versions. From here on every write keeps them up to date.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    from core.store.counts import rebuild_library_totals

    # Plain ADD COLUMN (with a constant default, SQLite and PostgreSQL alike change no row): a batch
    # operation would copy the whole table on SQLite.
    for flag in ("ai_related", "revised", "picked"):
        op.add_column("paper", sa.Column(flag, sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table(
        "library_total",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("papers", sa.BigInteger(), nullable=False),
        sa.Column("versions", sa.BigInteger(), nullable=False),
        sa.Column("ai_papers", sa.BigInteger(), nullable=False),
        sa.Column("revised_papers", sa.BigInteger(), nullable=False),
        sa.Column("community_papers", sa.BigInteger(), nullable=False),
        sa.Column("news_new", sa.BigInteger(), nullable=False),
        sa.Column("news_revisions", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_version_news_first_seen_at",
        "version",
        ["news", "first_seen_at"],
        unique=False,
        sqlite_where=sa.text("news = 1"),
        postgresql_where=sa.text("news = true"),
    )
    op.create_index(
        "ix_version_news_source_announced_at",
        "version",
        ["news", "source", "announced_at"],
        unique=False,
        sqlite_where=sa.text("news = 1"),
        postgresql_where=sa.text("news = true"),
    )
    totals = rebuild_library_totals(op.get_bind())
    log.info("library totals: %s", totals)


def downgrade() -> None:
    op.drop_index("ix_version_news_source_announced_at", table_name="version")
    op.drop_index("ix_version_news_first_seen_at", table_name="version")
    op.drop_table("library_total")
    for flag in ("picked", "revised", "ai_related"):
        op.drop_column("paper", flag)
