"""the paper browser's sort keys and the library's search index (issue 15, items 1 and 3)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02

Each paper gets the keys of the browser's three orders (core.store_sort_keys), an index per order, and an
entry in a full-text index (core.store_search: SQLite FTS5, PostgreSQL tsvector with GIN). The keys and the
index entries are computed from the stored versions; at a million versions this takes a few minutes (the
index entries are built in Python, with the follow matcher's own word rules). From here on every write
keeps both up to date.
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
    from core.store_search import create_search_index, rebuild_search_index
    from core.store_sort_keys import rebuild_sort_keys

    # Plain ADD COLUMN with a constant default: no table copy on SQLite, no rewrite on PostgreSQL.
    op.add_column("paper", sa.Column("news", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("paper", sa.Column("browse_key", sa.BigInteger(), server_default="0", nullable=False))
    op.add_column("paper", sa.Column("published_key", sa.BigInteger(), server_default="0", nullable=False))
    connection = op.get_bind()
    started = time.monotonic()
    rebuild_sort_keys(connection)
    op.create_index("ix_paper_browse_updated", "paper", ["browse_key", "id"], unique=False)
    op.create_index("ix_paper_browse_ingested", "paper", ["news", "first_seen_at", "id"], unique=False)
    op.create_index("ix_paper_browse_published", "paper", ["published_key", "id"], unique=False)
    log.info("browser sort keys: %.1f s", time.monotonic() - started)
    started = time.monotonic()
    create_search_index(connection)
    indexed = rebuild_search_index(connection)
    log.info("search index: %d papers in %.1f s", indexed, time.monotonic() - started)


def downgrade() -> None:
    from core.store_search import drop_search_index

    drop_search_index(op.get_bind())
    op.drop_index("ix_paper_browse_published", table_name="paper")
    op.drop_index("ix_paper_browse_ingested", table_name="paper")
    op.drop_index("ix_paper_browse_updated", table_name="paper")
    for column in ("published_key", "browse_key", "news"):
        op.drop_column("paper", column)
