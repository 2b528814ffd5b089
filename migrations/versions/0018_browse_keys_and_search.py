"""the paper browser's sort keys and the library's search index (issue 15, items 1 and 3)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02

Each paper gets the keys of the browser's three orders (core.store.sort_keys) and an index per order,
computed from the stored versions (seconds at a million versions), and the full-text index is created
(core.store.search: SQLite FTS5, PostgreSQL tsvector with GIN) with every paper marked for the indexer:
its entries are built in Python with the follow matcher's word rules, minutes per million papers, so the
service builds them in the background (or `papertrail index` does, at once). From here on every write
keeps the keys up to date, and the index too, except a backfill, which leaves its papers to the indexer.
"""

from __future__ import annotations

import logging
import time

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    from core.store.search import create_search_index, reset_search_index
    from core.store.sort_keys import rebuild_sort_keys

    # Plain ADD COLUMN with a constant default: no table copy on SQLite, no rewrite on PostgreSQL.
    op.add_column("paper", sa.Column("news", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("paper", sa.Column("browse_key", sa.BigInteger(), server_default="0", nullable=False))
    op.add_column("paper", sa.Column("published_key", sa.BigInteger(), server_default="0", nullable=False))
    op.add_column("paper", sa.Column("search_stale", sa.Boolean(), server_default=sa.false(), nullable=False))
    connection = op.get_bind()
    started = time.monotonic()
    rebuild_sort_keys(connection)
    op.create_index("ix_paper_browse_updated", "paper", ["browse_key", "id"], unique=False)
    op.create_index("ix_paper_browse_ingested", "paper", ["news", "first_seen_at", "id"], unique=False)
    op.create_index("ix_paper_browse_published", "paper", ["published_key", "id"], unique=False)
    log.info("browser sort keys: %.1f s", time.monotonic() - started)
    # The index is created empty and every paper is left to the indexer (`papertrail index`, or the
    # service in the background): building the entries takes minutes per million papers, too long to
    # hold the upgrade (and every command, which migrates first) for.
    create_search_index(connection)
    pending = reset_search_index(connection)
    op.create_index(
        "ix_paper_search_stale",
        "paper",
        ["search_stale"],
        unique=False,
        sqlite_where=sa.text("search_stale = 1"),
        postgresql_where=sa.text("search_stale = true"),
    )
    if pending:
        log.info(
            "search index: %d papers to index; the service does it in the background, or run "
            "`papertrail index`",
            pending,
        )


def downgrade() -> None:
    from core.store.search import drop_search_index

    drop_search_index(op.get_bind())
    op.drop_index("ix_paper_search_stale", table_name="paper")
    op.drop_index("ix_paper_browse_published", table_name="paper")
    op.drop_index("ix_paper_browse_ingested", table_name="paper")
    op.drop_index("ix_paper_browse_updated", table_name="paper")
    for column in ("search_stale", "published_key", "browse_key", "news"):
        op.drop_column("paper", column)
