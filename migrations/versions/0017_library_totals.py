"""library_total, the per-paper flags it counts, and an index of the news by arrival: the status page,
/metrics and `papertrail status` without counting the whole library on every load

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03

The flags and the totals are computed from the rows stored now: one pass over the version table, about as
long as one load of the old status page per table at a million versions. From here on every write keeps
them up to date (core.papers.count_records).

The SQL is a frozen copy, on purpose, of core.papers.count_records's recount as it stood when this migration was
written: a migration carries its own SQL, so that it does the same thing whatever the application's code
becomes. tests/test_migration_data.py checks it leaves what the application counts.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


# The tables as this revision knows them (not the models, which follow the newest schema).
_PAPER = sa.table(
    "paper",
    sa.column("id", sa.String),
    sa.column("ai_related", sa.Boolean),
    sa.column("revised", sa.Boolean),
    sa.column("picked", sa.Boolean),
)
_VERSION = sa.table(
    "version",
    sa.column("paper_id", sa.String),
    sa.column("number", sa.Integer),
    sa.column("ai_related", sa.Boolean),
    sa.column("news", sa.Boolean),
)
_PICK = sa.table("community_pick", sa.column("paper_id", sa.String))
_TOTAL = sa.table(
    "library_total",
    sa.column("id", sa.Integer),
    sa.column("papers", sa.BigInteger),
    sa.column("versions", sa.BigInteger),
    sa.column("ai_papers", sa.BigInteger),
    sa.column("revised_papers", sa.BigInteger),
    sa.column("community_papers", sa.BigInteger),
    sa.column("news_new", sa.BigInteger),
    sa.column("news_revisions", sa.BigInteger),
)
_FLAGS = ("ai_related", "revised", "picked")


def _rebuild_library_totals(connection: sa.Connection) -> dict[str, int]:
    """Set every paper's flags and the totals' row from the stored rows; return the totals (frozen copy)."""
    version, pick, paper = _VERSION.c, _PICK.c, _PAPER.c
    # One UPDATE per flag with the semi-join in WHERE: PostgreSQL hashes it. (As a SET expression,
    # ``flag = id IN (SELECT ...)``, it becomes a subplan that PostgreSQL cannot hash once a million ids
    # exceed work_mem, and rescans per paper: measured, over ten minutes at a million versions.)
    sources = {
        "ai_related": sa.select(version.paper_id).where(version.ai_related == sa.true()),
        "revised": sa.select(version.paper_id).where(version.number > 1),
        "picked": sa.select(pick.paper_id),
    }
    for flag, ids in sources.items():
        connection.execute(sa.update(_PAPER).where(paper.id.in_(ids)).values({flag: sa.true()}))

    def papers_where(condition: sa.ColumnElement[bool]) -> Any:
        return sa.func.count(sa.distinct(sa.case((condition, version.paper_id))))

    ai, revised, news_new, news_revisions, versions = connection.execute(
        sa.select(
            papers_where(version.ai_related == sa.true()),
            papers_where(version.number > 1),
            sa.func.count(sa.case((sa.and_(version.news == sa.true(), version.number == 1), 1))),
            sa.func.count(sa.case((sa.and_(version.news == sa.true(), version.number > 1), 1))),
            sa.func.count(),
        ).select_from(_VERSION)
    ).one()
    papers = connection.execute(sa.select(sa.func.count()).select_from(_PAPER)).scalar_one()
    community = connection.execute(sa.select(sa.func.count(sa.distinct(pick.paper_id)))).scalar_one()
    totals = {
        "papers": int(papers),
        "versions": int(versions),
        "ai_papers": int(ai),
        "revised_papers": int(revised),
        "community_papers": int(community),
        "news_new": int(news_new),
        "news_revisions": int(news_revisions),
    }
    connection.execute(sa.delete(_TOTAL))
    connection.execute(sa.insert(_TOTAL).values(id=1, **totals))
    return totals


def upgrade() -> None:
    # Plain ADD COLUMN (with a constant default, SQLite and PostgreSQL alike change no row): a batch
    # operation would copy the whole table on SQLite.
    for flag in _FLAGS:
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
    # The flags were just added, all false: no reset needed before they are set.
    totals = _rebuild_library_totals(op.get_bind())
    log.info("library totals: %s", totals)


def downgrade() -> None:
    op.drop_index("ix_version_news_source_announced_at", table_name="version")
    op.drop_index("ix_version_news_first_seen_at", table_name="version")
    op.drop_table("library_total")
    for flag in ("picked", "revised", "ai_related"):
        op.drop_column("paper", flag)
