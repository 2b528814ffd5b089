"""The library's search index: SQLite FTS5 or a PostgreSQL tsvector with a GIN index, one entry per paper.

Part of the store. The paper browser's search (core.overview.dashboard_records) reads the follow language
(core.follows.search_text compiles it); this module keeps the index the compiled query runs against, and
joins it
to the papers.

What is indexed: each paper's newest stored version, through :func:`core.follows.search_text.search_doc` (the
follow matcher's own terms: folded case and accents, TeX stripped, hyphens split, plurals singular), in
three columns: ``title``, ``abstract`` and ``meta`` (author surnames, categories, archives, the id). A
paper known only from a community pick (no arXiv metadata yet) is not in the index until its metadata
arrives.

* **SQLite**: a contentless FTS5 table ``search_doc`` (the tokens are not stored twice: the library's text is
  already in ``version``). Its row id is the paper's ``browse_key`` (core.papers.sort_keys), so a search in
  the default order reads the index from its end and stops after one page. A contentless table cannot
  delete a row without being given the row's old text, so entries are only ever added: when a paper's key
  changes (a new version, or it turns out to be news) its new entry is added under the new key, and the
  old one stays behind, unreachable: a search joins each hit to the paper whose ``browse_key`` it is, and
  no paper has an old key. (The index grows by one entry per revision; 1.7 entries per paper for arXiv's
  history.)
* **PostgreSQL**: a table ``search_doc (paper_id, doc tsvector)`` with a GIN index on ``doc``, one row per
  paper, replaced when the paper's newest version changes. The planner chooses between reading the GIN
  index (rare words) and walking the browser's index, testing each paper (common words).

**When entries are written.** A write of news (the daily ingest, a gap fill, a pick) writes the entries of
the papers it changed in its own transaction: what arrives is searchable when it is stored. A backfill
(history) only marks its papers stale (``paper.search_stale``): building an entry costs about as much
Python as storing the paper, and a backfill of the whole snapshot should not take twice as long for it.
The indexer (:func:`index_stale`; the service runs it in the background, ``papertrail index`` runs it to
the end) writes the entries of stale papers a batch at a time. Until then a backfilled paper is listed by
the browser but not found by a search; ``papertrail status`` says how many wait. The invariant: a paper
not marked stale has an entry under its current key (SQLite) or an entry of its newest version
(PostgreSQL).

Neither table is a model: the two databases need different kinds of table. Migration 0018 creates them
(with a frozen copy of :func:`create_search_index`'s DDL: a migration never imports the application) and
leaves every paper to the indexer, as :func:`reset_search_index` does. The entries are the follow matcher's
terms, so a change to the word rules (core.follows.normalise, core.follows.search_text) changes what an entry
should hold: such a change must come with a migration that does what :func:`reset_search_index` does (with
its own copy of the statements), or searches will miss what the new rules would find.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

import sqlalchemy as sa

from core.db_ids import id_conditions
from core.follows.search_text import SearchDoc, paper_doc, tsvector_literal
from core.values import AnnounceType, PaperIn

TABLE = "search_doc"
# The columns of the SQLite index and their weights in its relevance order (bm25): a word in the title
# counts ten times one in the abstract; an author or a category five times.
COLUMNS = ("title", "abstract", "meta")
BM25_WEIGHTS = (10.0, 1.0, 5.0)
# Papers the indexer writes per transaction, in the service and in `papertrail index`: no run holds
# SQLite's write lock for long at a time.
INDEX_BATCH = 2000
# The same weights for PostgreSQL's ts_rank, given per weight label {D, C, B, A} (title A, abstract B,
# meta C).
TS_RANK_WEIGHTS = "{0.1, 0.5, 0.1, 1.0}"

_PAPER = sa.table(
    "paper",
    sa.column("id", sa.String),
    sa.column("latest_version", sa.Integer),
    sa.column("browse_key", sa.BigInteger),
    sa.column("search_stale", sa.Boolean),
)
_VERSION = sa.table(
    "version",
    sa.column("paper_id", sa.String),
    sa.column("number", sa.Integer),
    sa.column("title", sa.Text),
    sa.column("abstract", sa.Text),
    sa.column("authors", sa.JSON),
    sa.column("categories", sa.JSON),
)


def create_search_index(connection: sa.Connection) -> None:
    """Create the index's table (empty) on the connection's database."""
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(
            f"CREATE TABLE {TABLE} (paper_id VARCHAR(64) PRIMARY KEY REFERENCES paper (id), "
            "doc TSVECTOR NOT NULL)"
        )
        connection.exec_driver_sql(f"CREATE INDEX ix_{TABLE}_doc ON {TABLE} USING gin (doc)")
        return
    # The tokens are [a-z0-9] only (core.follows.search_text.token), so the plain ASCII tokenizer splits them
    # exactly as they were joined; detail=full keeps positions for phrases.
    connection.exec_driver_sql(
        f"CREATE VIRTUAL TABLE {TABLE} USING fts5({', '.join(COLUMNS)}, content='', tokenize='ascii')"
    )


def drop_search_index(connection: sa.Connection) -> None:
    """Drop the index's table."""
    connection.exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")


def index_papers(connection: sa.Connection, docs: Mapping[str, SearchDoc]) -> None:
    """Make ``docs`` (paper id -> the entry of its newest version) the papers' entries in the index.

    On SQLite the entry is added under the paper's current ``browse_key``: call this after the keys are
    refreshed, and only for papers whose key changed (an entry under a key that is already there is an
    error, by design: it would mean a key was reused).
    """
    if not docs:
        return
    if connection.dialect.name == "postgresql":
        _upsert_postgresql(connection, docs)
        return
    cursor = connection.connection.cursor()
    try:
        cursor.executemany(
            f"INSERT INTO {TABLE} (rowid, {', '.join(COLUMNS)}) "
            "SELECT browse_key, ?, ?, ? FROM paper WHERE id = ?",
            [(doc.title, doc.abstract, doc.meta, pid) for pid, doc in docs.items()],
        )
    finally:
        cursor.close()


def _upsert_postgresql(connection: sa.Connection, docs: Mapping[str, SearchDoc]) -> None:
    driver = connection.connection.driver_connection
    assert driver is not None
    rows = [(pid, tsvector_literal(doc)) for pid, doc in docs.items()]
    with driver.cursor() as cursor:
        # Through a temporary table: COPY is several times faster than row-by-row inserts, and the upsert
        # from it replaces the entries of papers that already had one in one statement.
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {TABLE}_load (paper_id VARCHAR(64), doc TSVECTOR) "
            "ON COMMIT DELETE ROWS"
        )
        with cursor.copy(f"COPY {TABLE}_load (paper_id, doc) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(
            f"INSERT INTO {TABLE} (paper_id, doc) SELECT paper_id, doc FROM {TABLE}_load "
            "ON CONFLICT (paper_id) DO UPDATE SET doc = EXCLUDED.doc"
        )
        cursor.execute(f"TRUNCATE {TABLE}_load")


def reindex_papers(connection: sa.Connection, ids: Collection[str]) -> None:
    """Index the papers ``ids`` from their newest stored version (papers without one are skipped)."""
    index_papers(connection, {paper.arxiv_id: paper_doc(paper) for paper in newest_versions(connection, ids)})


def newest_versions(
    connection: sa.Connection, ids: Collection[str], *, text: bool = True
) -> Iterator[PaperIn]:
    """The newest stored version of each of the papers ``ids`` that has one, with what the follow matcher
    and the index read (id, number, title, abstract, authors, categories; the rest are placeholders).
    Without ``text`` the title and abstract are left empty: an author or category check needs neither.
    """
    paper, version = _PAPER.c, _VERSION.c
    title, abstract = (version.title, version.abstract) if text else (sa.literal(""), sa.literal(""))
    for condition in id_conditions(connection, paper.id, ids):
        rows = connection.execute(
            sa.select(paper.id, version.number, title, abstract, version.authors, version.categories)
            .join_from(
                _PAPER,
                _VERSION,
                sa.and_(version.paper_id == paper.id, version.number == paper.latest_version),
            )
            .where(condition)
        ).all()
        for pid, number, title_text, abstract_text, authors, categories in rows:
            yield PaperIn(
                arxiv_id=pid,
                version=number,
                title=title_text,
                abstract=abstract_text,
                authors=tuple(authors or ()),
                categories=tuple(categories or ()),
                announce_type=AnnounceType.NEW,
            )


def write_entries(connection: sa.Connection, docs: Mapping[str, SearchDoc], reread: Collection[str]) -> None:
    """Write the entries of papers whose key changed: ``docs`` as given, ``reread`` from their stored
    newest version; both are then up to date (unmarked, if a backfill had marked them stale)."""
    index_papers(connection, docs)
    reindex_papers(connection, reread)
    for condition in id_conditions(connection, _PAPER.c.id, [*docs, *reread]):
        connection.execute(
            _PAPER.update().where(condition, _PAPER.c.search_stale.is_(sa.true())).values(search_stale=False)
        )


def mark_stale(connection: sa.Connection, ids: Collection[str]) -> None:
    """Leave the entries of the papers ``ids`` to the indexer (a backfill's new or changed papers)."""
    for condition in id_conditions(connection, _PAPER.c.id, ids):
        connection.execute(_PAPER.update().where(condition).values(search_stale=True))


def reset_search_index(connection: sa.Connection) -> int:
    """Empty the index and leave every paper with a stored version to the indexer; return how many wait.

    Migration 0018 does the same on the new, empty index; a later change of the word rules needs it too (the
    entries it empties were written with the old rules). Emptying first keeps the invariant: no paper is
    left with an entry while marked stale, so SQLite's indexer never adds an entry under a key that has one.
    """
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"TRUNCATE {TABLE}")
    else:
        # A contentless FTS5 table is emptied with its 'delete-all' command.
        connection.exec_driver_sql(f"INSERT INTO {TABLE} ({TABLE}) VALUES ('delete-all')")
    marked = connection.execute(
        _PAPER.update().where(_PAPER.c.latest_version > 0).values(search_stale=True)
    ).rowcount
    return int(marked or 0)


def index_stale(connection: sa.Connection, limit: int = INDEX_BATCH) -> int:
    """Write the entries of up to ``limit`` papers marked stale; return how many were written.

    The papers are claimed and unmarked in one statement (``UPDATE … WHERE id IN (SELECT … LIMIT n)
    RETURNING id``; on PostgreSQL the inner SELECT skips rows another indexer has locked), and their
    entries written in the same transaction: if it fails, they stay marked. On SQLite the claim takes the
    write lock first, so two indexers never write the same entry.
    """
    claimable = sa.select(_PAPER.c.id).where(_PAPER.c.search_stale.is_(sa.true())).limit(limit)
    if connection.dialect.name == "postgresql":
        claimable = claimable.with_for_update(skip_locked=True)
    claimed = [
        row[0]
        for row in connection.execute(
            _PAPER.update()
            .where(_PAPER.c.id.in_(claimable.scalar_subquery()))
            .values(search_stale=False)
            .returning(_PAPER.c.id)
        )
    ]
    reindex_papers(connection, claimed)
    return len(claimed)


def tidy(connection: sa.Connection) -> None:
    """Merge PostgreSQL's GIN pending list into the index (nothing to do on SQLite).

    GIN takes new entries into a pending list (``fastupdate``) that every search reads through in full
    until VACUUM or the list's size limit merges it: a day's news left there made each search on a 10k
    library take 17 ms instead of 0.4 (measured). The indexer merges it every minute.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text(f"SELECT gin_clean_pending_list('ix_{TABLE}_doc'::regclass)"))


def stale_count(connection: sa.Connection) -> int:
    """How many papers wait for the indexer (read through the partial index of stale papers)."""
    return int(
        connection.execute(
            sa.select(sa.func.count()).select_from(_PAPER).where(_PAPER.c.search_stale.is_(sa.true()))
        ).scalar_one()
    )
