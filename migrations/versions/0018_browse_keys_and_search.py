"""the paper browser's sort keys and the library's search index

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02

Each paper gets the keys of the browser's three orders (core.papers.sort_keys) and an index per order,
computed from the stored versions (seconds at a million versions), and the full-text index is created
(core.papers.search_index: SQLite FTS5, PostgreSQL tsvector with GIN) with every paper marked for the indexer:
its entries are built in Python with the follow matcher's word rules, minutes per million papers, so the
service builds them in the background (or `papertrail index` does, at once). From here on every write
keeps the keys up to date, and the index too, except a backfill, which leaves its papers to the indexer.

The keys' SQL and the index's DDL are frozen copies, on purpose, of core.papers.sort_keys and
core.papers.search_index as they stood when this migration was written: a migration carries its own SQL, so that
it does the same thing whatever the application's code becomes. tests/test_migration_data.py checks that it
leaves the keys the application computes.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")

# Version ids stay far below 2**40 (a trillion); the bit above them puts news first.
NEWS_BIT = 1 << 40
SEARCH_TABLE = "search_doc"
# The tables as this revision knows them (not the models, which follow the newest schema).
_PAPER = sa.table(
    "paper",
    sa.column("id", sa.String),
    sa.column("latest_version", sa.Integer),
    sa.column("news", sa.Boolean),
    sa.column("browse_key", sa.BigInteger),
    sa.column("published_key", sa.BigInteger),
    sa.column("search_stale", sa.Boolean),
)
_VERSION = sa.table(
    "version",
    sa.column("id", sa.BigInteger),
    sa.column("paper_id", sa.String),
    sa.column("number", sa.Integer),
    sa.column("news", sa.Boolean),
    sa.column("announced_at", sa.DateTime),
)
_PICK = sa.table("community_pick", sa.column("paper_id", sa.String))


def _published_key(announced_at: datetime) -> int:
    """The published order's key of a v1 announced at ``announced_at``: Unix seconds, naive read as UTC."""
    aware = announced_at if announced_at.tzinfo else announced_at.replace(tzinfo=UTC)
    return int(aware.timestamp())


def _rebuild_sort_keys(connection: sa.Connection) -> None:
    """Compute every paper's keys from its stored rows (frozen copy)."""
    # One UPDATE per source with the semi-join in WHERE (see migration 0017 on PostgreSQL's subplans).
    news_papers = sa.select(_VERSION.c.paper_id).where(_VERSION.c.news.is_(sa.true()))
    connection.execute(_PAPER.update().where(_PAPER.c.id.in_(news_papers)).values(news=True))
    connection.execute(_PAPER.update().where(_PAPER.c.id.in_(sa.select(_PICK.c.paper_id))).values(news=True))
    # A stub (a picked paper with no version yet) takes the largest version id stored now.
    stub_base = int(connection.execute(sa.select(sa.func.max(_VERSION.c.id))).scalar_one() or 0)
    newest = (
        sa.select(sa.func.max(_VERSION.c.id))
        .where(_VERSION.c.paper_id == _PAPER.c.id, _VERSION.c.number == _PAPER.c.latest_version)
        .scalar_subquery()
    )
    connection.execute(
        _PAPER.update().values(
            browse_key=sa.func.coalesce(newest, stub_base)
            + sa.case((_PAPER.c.news.is_(sa.true()), NEWS_BIT), else_=0)
        )
    )
    first = sa.select(_VERSION.c.paper_id, _VERSION.c.announced_at).where(
        _VERSION.c.number == 1, _VERSION.c.announced_at.is_not(None)
    )
    batch: list[dict[str, object]] = []
    for pid, at in connection.execute(first):
        parsed = at if isinstance(at, datetime) else datetime.fromisoformat(str(at))
        batch.append({"pid": pid, "key": _published_key(parsed)})
        if len(batch) == 5000:
            _store_published(connection, batch)
            batch = []
    _store_published(connection, batch)


def _store_published(connection: sa.Connection, batch: list[dict[str, object]]) -> None:
    if batch:
        connection.execute(
            _PAPER.update()
            .where(_PAPER.c.id == sa.bindparam("pid"))
            .values(published_key=sa.bindparam("key")),
            batch,
        )


def _create_search_index(connection: sa.Connection) -> None:
    """Create the search index's table, empty (frozen copy): it differs by database, so it is no model."""
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(
            f"CREATE TABLE {SEARCH_TABLE} (paper_id VARCHAR(64) PRIMARY KEY REFERENCES paper (id), "
            "doc TSVECTOR NOT NULL)"
        )
        connection.exec_driver_sql(f"CREATE INDEX ix_{SEARCH_TABLE}_doc ON {SEARCH_TABLE} USING gin (doc)")
        return
    # The tokens are [a-z0-9] only, so the plain ASCII tokenizer splits them exactly as they were joined.
    connection.exec_driver_sql(
        f"CREATE VIRTUAL TABLE {SEARCH_TABLE} USING fts5(title, abstract, meta, content='', tokenize='ascii')"
    )


def upgrade() -> None:
    # Plain ADD COLUMN with a constant default: no table copy on SQLite, no rewrite on PostgreSQL.
    op.add_column("paper", sa.Column("news", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("paper", sa.Column("browse_key", sa.BigInteger(), server_default="0", nullable=False))
    op.add_column("paper", sa.Column("published_key", sa.BigInteger(), server_default="0", nullable=False))
    op.add_column("paper", sa.Column("search_stale", sa.Boolean(), server_default=sa.false(), nullable=False))
    connection = op.get_bind()
    started = time.monotonic()
    _rebuild_sort_keys(connection)
    op.create_index("ix_paper_browse_updated", "paper", ["browse_key", "id"], unique=False)
    op.create_index("ix_paper_browse_ingested", "paper", ["news", "first_seen_at", "id"], unique=False)
    op.create_index("ix_paper_browse_published", "paper", ["published_key", "id"], unique=False)
    log.info("browser sort keys: %.1f s", time.monotonic() - started)
    # The index is created empty and every paper is left to the indexer (`papertrail index`, or the
    # service in the background): building the entries takes minutes per million papers, too long to
    # hold the upgrade (and every command, which migrates first) for.
    _create_search_index(connection)
    pending = connection.execute(
        _PAPER.update().where(_PAPER.c.latest_version > 0).values(search_stale=True)
    ).rowcount
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
    op.get_bind().exec_driver_sql(f"DROP TABLE IF EXISTS {SEARCH_TABLE}")
    op.drop_index("ix_paper_search_stale", table_name="paper")
    op.drop_index("ix_paper_browse_published", table_name="paper")
    op.drop_index("ix_paper_browse_ingested", table_name="paper")
    op.drop_index("ix_paper_browse_updated", table_name="paper")
    for column in ("search_stale", "published_key", "browse_key", "news"):
        op.drop_column("paper", column)
