"""The library totals as maintained counters: written with each write, read without counting.

``core.papers.count_records`` (:class:`CountStore`): Core only, on a connection of the store
(``db.connection()``); the writers add to the totals on their own transaction's connection
(:func:`add_to_totals`). The status page, ``/metrics`` and ``papertrail status`` show how many papers the
library holds, how many of them are AI-related, revised or community picks, and how many versions were stored
as news. Counting those on every load scans the whole version table (seconds at a million versions); instead
one row, ``library_total``, holds them, and every write that stores papers, versions or picks adds to it in
its own transaction:

* ``papers``, ``versions``, ``news_new``, ``news_revisions``: the rows the write inserted;
* ``ai_papers``, ``revised_papers``, ``community_papers`` count *papers* (``count(DISTINCT paper_id)`` in the
  definitions of docs/status-page.md), so each paper carries a flag (``Paper.ai_related``, ``revised``,
  ``picked``). A new paper is inserted with its flags; for a known paper the write sets the flag with
  ``UPDATE paper SET flag = true WHERE id IN (...) AND NOT flag``, and the number of rows that statement
  changed is what the total grows by. Two writers flipping the same paper cannot both count it: the second
  waits for the first's row lock and then finds the flag set (PostgreSQL re-checks the condition on the
  row the first committed; SQLite has one writer at a time).

The totals' row is updated last in each transaction (``UPDATE ... SET n = n + :d``, atomic on either
database), so a writer holds its lock only for its commit and never waits for another lock while holding
it. Versions and picks are never deleted and the flags only turn true, so no write ever subtracts.

:func:`core.papers.count_records.recount_library` counts the same numbers the old way, from the rows
themselves: the tests' oracle, and what :func:`rebuild_library_totals` stores. Migration 0017 built the totals
with a frozen copy of these statements (a migration never imports the application); a later migration that
changes ``Version.ai_related`` needs its own copy.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa

from core.db import Db
from core.db_ids import id_conditions

# Plain table objects (not the models): only the columns these statements use.
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


FLAGS = ("ai_related", "revised", "picked")
_MISSING = (
    "the library_total row is missing: start PaperTrail once (every command applies the migrations) or "
    "run core.db_migrate.migrate on this database"
)


@dataclass(frozen=True, slots=True)
class LibraryTotals:
    """The library's totals, as docs/status-page.md defines them."""

    papers: int = 0
    versions: int = 0
    ai_papers: int = 0
    revised_papers: int = 0
    community_papers: int = 0
    news_new: int = 0
    news_revisions: int = 0


def flag_papers(connection: sa.Connection, flag: str, ids: Collection[str]) -> int:
    """Set ``flag`` on the papers ``ids`` that do not have it yet; returns how many changed.

    The number is exact under concurrent writers (see the module's docstring): it is what the total that
    counts papers with ``flag`` grows by.
    """
    if flag not in FLAGS:
        raise ValueError(f"unknown paper flag {flag!r}; one of {', '.join(FLAGS)}")
    column = _PAPER.c[flag]
    changed = 0
    for condition in id_conditions(connection, _PAPER.c.id, ids):
        result = connection.execute(
            sa.update(_PAPER).where(condition, column == sa.false()).values({flag: sa.true()})
        )
        changed += result.rowcount
    return changed


def add_to_totals(connection: sa.Connection, **deltas: int) -> None:
    """Add ``deltas`` (names of :class:`LibraryTotals`) to the totals' row; call it last in a transaction."""
    changes = {name: value for name, value in deltas.items() if value}
    unknown = set(changes) - set(LibraryTotals.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown library total(s) {', '.join(sorted(unknown))}")
    if not changes:
        return
    result = connection.execute(
        sa.update(_TOTAL)
        .where(_TOTAL.c.id == 1)
        .values({name: _TOTAL.c[name] + value for name, value in changes.items()})
    )
    if result.rowcount != 1:
        raise RuntimeError(_MISSING)


def recount(connection: sa.Connection) -> LibraryTotals:
    """Every total counted from the rows themselves (a scan of the version table: slow on a big store)."""
    version = _VERSION.c

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
    community = connection.execute(sa.select(sa.func.count(sa.distinct(_PICK.c.paper_id)))).scalar_one()
    return LibraryTotals(
        papers=int(papers),
        versions=int(versions),
        ai_papers=int(ai),
        revised_papers=int(revised),
        community_papers=int(community),
        news_new=int(news_new),
        news_revisions=int(news_revisions),
    )


def rebuild_library_totals(connection: sa.Connection) -> LibraryTotals:
    """Set every paper's flags and the totals' row from the stored rows (a migration's step)."""
    version, pick = _VERSION.c, _PICK.c
    paper = _PAPER.c
    connection.execute(
        sa.update(_PAPER)
        .where(sa.or_(*(paper[flag] == sa.true() for flag in FLAGS)))
        .values({flag: sa.false() for flag in FLAGS})
    )
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
    totals = recount(connection)
    connection.execute(sa.delete(_TOTAL))
    connection.execute(sa.insert(_TOTAL).values(id=1, **asdict(totals)))
    return totals


# The maintained totals and their recount.
def library_totals(db: Db) -> LibraryTotals:
    """The maintained totals: one row read, whatever the size of the library."""
    with db.connection() as connection:
        query = sa.select(*[_TOTAL.c[name] for name in _FIELDS]).where(_TOTAL.c.id == 1)
        row = connection.execute(query).first()
    if row is None:
        raise RuntimeError(_MISSING)
    return LibraryTotals(*(int(value) for value in row))


def recount_library(db: Db) -> LibraryTotals:
    """The same totals counted from the rows (the tests' oracle; scans the whole library)."""
    with db.connection() as connection:
        return recount(connection)


_FIELDS = tuple(LibraryTotals.__dataclass_fields__)
