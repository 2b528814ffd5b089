"""The paper browser's SQL: filters, the three orders walked by index from a cursor, and search.

Read-only, Core only: ``select`` statements on a connection (``db.connection()``). The query and the page
it answers are values of core.papers.browser_query.

A page costs what one page costs, however large the library:

* **Orders** come from the sort keys stored on each paper (core.papers.sort_keys), one index per order. A
  page is read by walking that index backwards from a cursor: the id of the last paper of the page before
  (``after``) or of the first paper of the page after (``before``), whose keys the next page continues
  from. No OFFSET over millions of rows; a page number is accepted only for the relevance order, which has
  no index and stops at :data:`MAX_RELEVANCE_PAGE`.
* **News before history**: in the default order (and by ingestion) papers that arrived as news come before
  those a backfill or an old gap stored, each newest first; ``from_history`` starts at the first history
  paper.
* **Search** reads the follow language through the full-text index (core.papers.search_index,
core.follows.search_text).
  The list is exactly what a follow of the same text would match on each paper's newest version: the index
  finds the candidates and, for the few queries it answers only approximately (author names), each
  candidate is checked with the follow matcher itself before it is shown.
* **Totals**: the whole library's from the maintained totals; a filter's counted up to
  :data:`COUNT_LIMIT` and beyond that shown as "more than"; a search's counted up to
  :data:`SEARCH_COUNT_LIMIT` and beyond that estimated from the index ("about").

The filters all pick papers through one version of the paper (or one community pick): a paper is listed
when one of its stored versions meets every version condition at once (arrived in the window, is v1 or a
revision, is AI-related, lists the category).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import col, select

from core.db import Db
from core.follows.search_text import SearchQuery
from core.models import CommunityPickRow, Paper, Version
from core.papers import count_records
from core.papers.browser_query import (
    MAX_RELEVANCE_PAGE,
    PAGE_SIZE,
    CursorError,
    Kind,
    PaperFilter,
    PaperPage,
    Sort,
    TotalKind,
)
from core.papers.browser_rows import page_rows, paper_texts
from core.papers.paper_records import IS_NEWS
from core.papers.search_index import BM25_WEIGHTS, TABLE, TS_RANK_WEIGHTS
from core.papers.sort_keys import NEWS_BIT

# A filter's total is counted up to this many papers ("more than 10,000" beyond).
COUNT_LIMIT = 10_000
# A search's total is counted up to this many papers and estimated from the index beyond.
SEARCH_COUNT_LIMIT = 1_000
# A search whose matches PostgreSQL estimates above WALK_ABOVE is read by walking the order's index; one
# estimated below is counted through GIN, and up to MATERIALIZE_UP_TO matches are read once and sorted
# (see _postgresql_candidates). An author on 0.1% of 1.7M papers (1,750 matches) walked 50,000 papers
# for a page: 470 ms; sorted from its matches it takes a tenth of that.
WALK_ABOVE = 10 * SEARCH_COUNT_LIMIT
MATERIALIZE_UP_TO = 5 * SEARCH_COUNT_LIMIT
# For a search checked paper by paper (author names): how many candidates one page may examine.
MAX_EXAMINED = 2_000

_SEARCH = sa.table(
    TABLE, sa.column("rowid", sa.BigInteger), sa.column("paper_id", sa.String), sa.column("doc", sa.Text)
)

if TYPE_CHECKING:
    pass


def filter_conditions(flt: PaperFilter) -> list[sa.ColumnElement[bool]]:
    """WHERE conditions on ``paper`` that select the papers ``flt`` asks for (its search aside)."""
    conditions: list[sa.ColumnElement[bool]] = []
    # A condition alone that a paper's own flag records (core.papers.count_records) reads the flag: no
    # subquery over every version of the library.
    alone = flt.since is None and not flt.category
    if alone and flt.ai and flt.kind is Kind.ANY:
        return [col(Paper.ai_related).is_(True)]
    if alone and not flt.ai and flt.kind is Kind.REVISED:
        return [col(Paper.revised).is_(True)]
    if alone and not flt.ai and flt.kind is Kind.COMMUNITY:
        return [col(Paper.picked).is_(True)]
    version_terms: list[sa.ColumnElement[bool]] = []
    if flt.kind is Kind.NEW:
        version_terms.append(col(Version.number) == 1)
    elif flt.kind is Kind.REVISED:
        version_terms.append(col(Version.number) > 1)
    if flt.since is not None and flt.kind is not Kind.COMMUNITY:
        version_terms += [IS_NEWS, col(Version.first_seen_at) >= flt.since]
    if flt.ai:
        version_terms.append(col(Version.ai_related).is_(True))
    if flt.category:
        version_terms.append(_category_condition(flt.category))
    if version_terms:
        conditions.append(col(Paper.id).in_(select(Version.paper_id).where(*version_terms)))
    if flt.kind is Kind.COMMUNITY:
        picks = select(CommunityPickRow.paper_id)
        if flt.since is not None:
            picks = picks.where(col(CommunityPickRow.first_seen_at) >= flt.since)
        conditions.append(col(Paper.id).in_(picks))
    return conditions


def _category_condition(category: str) -> sa.ColumnElement[bool]:
    """Primary or cross-list: the JSON list holds ``"cs.LG"``; an archive (``cs``, ``cs.*``) its members."""
    name = category.removesuffix(".*").removesuffix("*")
    listed = sa.cast(col(Version.categories), sa.Text)
    exact = listed.contains(json.dumps(name), autoescape=True)
    if "." in name:
        return exact
    # An archive such as "cs" or "math" also matches its categories ("cs.LG"); "hep-th" is both.
    return sa.or_(exact, listed.contains(f'"{name}.', autoescape=True))


def _order_keys(connection: sa.Connection, flt: PaperFilter) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The columns of ``flt``'s order, most significant first (all descending), and the paper columns a
    cursor's values are read from (the same, except where the index entry carries the key)."""
    if flt.sort is Sort.INGESTED:
        keys: tuple[Any, ...] = (col(Paper.news), col(Paper.first_seen_at), col(Paper.id))
    elif flt.sort is Sort.PUBLISHED:
        keys = (col(Paper.published_key), col(Paper.id))
    else:
        keys = (col(Paper.browse_key), col(Paper.id))
        if flt.search is not None and connection.dialect.name != "postgresql":
            # SQLite's entry row id is the paper's browse_key (unique among indexed papers): ordered by it,
            # FTS5 reads its index backwards from the cursor and stops after one page.
            return (_SEARCH.c.rowid,), (col(Paper.browse_key),)
    return keys, keys


# The paper browser's queries, over the maintained totals (``core.papers.count_records``).
def browse_papers(
    db: Db,
    flt: PaperFilter,
    *,
    after: str | None = None,
    before: str | None = None,
    page: int = 1,
    from_history: bool = False,
    per_page: int = PAGE_SIZE,
) -> PaperPage:
    """One page of the papers ``flt`` selects, in its order, and their total.

    ``after`` / ``before``: the id of a paper of the neighbouring page (see :class:`PaperPage`);
    ``page`` only for the relevance order. Raises :class:`CursorError` for a cursor the library does not
    hold, and ValueError for a relevance order without a search or a page past the last one allowed.
    """
    if flt.sort is Sort.RELEVANCE and flt.search is None:
        raise ValueError("the relevance order needs a search")
    if flt.sort is Sort.RELEVANCE and not 1 <= page <= MAX_RELEVANCE_PAGE:
        raise ValueError(f"relevance pages stop at {MAX_RELEVANCE_PAGE}")
    with db.connection() as connection:
        candidates = _candidates(db, connection, flt)
        base = candidates.query
        backwards = before is not None
        keys, cursor_keys = _order_keys(connection, flt)
        query = base
        if flt.sort is Sort.RELEVANCE:
            query = query.order_by(*_relevance_order(connection, flt, candidates.doc))
            ids, more, last = _ranked_ids(connection, query, flt.search, page, per_page)
        else:
            cursor = after or before
            if cursor is not None:
                bound = _literal_tuple(keys, _cursor_values(connection, cursor_keys, cursor))
                query = query.where(sa.tuple_(*keys) > bound if backwards else sa.tuple_(*keys) < bound)
            elif from_history and flt.sort is not Sort.PUBLISHED:
                query = query.where(_history_condition(flt.sort, keys))
            query = query.order_by(*(k.asc() if backwards else k.desc() for k in keys))
            ids, more, last = _read_ids(connection, query, flt.search, per_page)
        if backwards:
            ids.reverse()
        rows = page_rows(connection, ids)
        total, total_kind = _total(db, connection, flt, base, candidates.estimate)
        has_history = (
            flt.sort in (Sort.UPDATED, Sort.INGESTED)
            and bool(rows)
            and rows[0].news
            and _exists(connection, base.where(_history_condition(flt.sort, keys)))
        )
    keyset = flt.sort is not Sort.RELEVANCE
    # Going forward, older pages follow when more rows were found; going back, the page we came from.
    older = (more if not backwards else True) and keyset
    newer = (more if backwards else (after is not None or from_history)) and keyset
    return PaperPage(
        rows=tuple(rows),
        total=total,
        total_kind=total_kind,
        per_page=per_page,
        after=(last if not backwards else (rows[-1].id if rows else None)) if older else None,
        before=(rows[0].id if rows and not backwards else last) if newer else None,
        page=page,
        has_history=has_history,
    )


def newest_news_ids(db: Db, flt: PaperFilter, limit: int) -> list[str]:
    """The ids of the first ``limit`` papers that arrived as news among those ``flt`` selects, in the
    default order (the newest version's arrival, newest first).

    The first page of :meth:`browse_papers` without what a page needs besides its rows (the total, the
    cursors, whether history follows): the Atom feeds (core.delivery.feed_records) read it for every query.
    ``flt``'s order is ignored. A search the index answers only approximately (author names) examines
    at most :data:`MAX_EXAMINED` candidates, as a page of the browser does, and may return fewer.
    """
    flt = replace(flt, sort=Sort.UPDATED)
    with db.connection() as connection:
        keys, _ = _order_keys(connection, flt)
        # News papers only: their keys carry NEWS_BIT, so this is a range of the order's own index.
        query = (
            _candidates(db, connection, flt)
            .query.where(keys[0] >= NEWS_BIT)
            .order_by(*(key.desc() for key in keys))
        )
        ids, _, _ = _read_ids(connection, query, flt.search, limit)
    return ids


def _candidates(db: Db, connection: sa.Connection, flt: PaperFilter) -> _Candidates:
    """The papers ``flt`` selects (see :class:`_Candidates`)."""
    query = sa.select(col(Paper.id)).select_from(Paper).where(*filter_conditions(flt))
    if flt.search is None:
        return _Candidates(query)
    if connection.dialect.name == "postgresql":
        return _postgresql_candidates(connection, query, flt.search, relevance=flt.sort is Sort.RELEVANCE)
    # The index entry whose row id is the paper's current key: older entries of the same paper (kept by
    # the contentless index, see core.papers.search_index) match no paper, and a stub has no entry.
    matching = query.join(_SEARCH, col(Paper.browse_key) == _SEARCH.c.rowid).where(
        sa.literal_column(TABLE).op("MATCH")(sa.literal(flt.search.fts5)),
        col(Paper.latest_version) > 0,
    )
    return _Candidates(matching)


def _total(
    db: Db, connection: sa.Connection, flt: PaperFilter, base: Any, estimate: int | None
) -> tuple[int, TotalKind]:
    """The filter's total and how exact it is (``estimate``: see :class:`_Candidates`)."""
    if flt.search is None:
        if not filter_conditions(flt):
            return count_records.library_totals(db).papers, TotalKind.EXACT
        counted = _bounded_count(connection, base, COUNT_LIMIT)
        return (counted, TotalKind.EXACT) if counted <= COUNT_LIMIT else (COUNT_LIMIT, TotalKind.AT_LEAST)
    if estimate is not None:
        return estimate, TotalKind.ABOUT
    counted = _bounded_count(connection, base, SEARCH_COUNT_LIMIT)
    if counted <= SEARCH_COUNT_LIMIT:
        # Checked paper by paper, the index's count is only an upper bound.
        return counted, TotalKind.EXACT if flt.search.exact else TotalKind.ABOUT
    return max(_estimate(connection, flt.search), counted), TotalKind.ABOUT


def _postgresql_candidates(
    connection: sa.Connection, query: Any, search: SearchQuery, *, relevance: bool
) -> _Candidates:
    """The papers of ``query`` whose index entry matches ``search``, planned by how many entries match.

    PostgreSQL's estimate of a tsquery's matches is good for the words its statistics list (the common
    ones) and poor for the rest: a word in 240 of 600,000 papers is estimated at thousands, and with that
    estimate the planner walks the browser's index testing every paper (a second). So: when the estimate
    is above WALK_ABOVE the word is common and walking the index in the page's order finds a page soon;
    the planner does that, and the total is the estimate. Otherwise the matching entries are counted
    through the GIN index, up to MATERIALIZE_UP_TO + 1; when there are no more than that they are read
    once (a MATERIALIZED CTE, which the planner cannot fold into a walk) and the page is sorted from them.
    """
    condition = _SEARCH.c.doc.op("@@")(sa.cast(sa.literal(search.tsquery), _TSQUERY))
    walk = query.join(_SEARCH, _SEARCH.c.paper_id == col(Paper.id)).where(condition)
    estimate = _estimate(connection, search)
    if estimate > WALK_ABOVE:
        return _Candidates(walk, estimate=estimate)
    entries = sa.select(_SEARCH.c.paper_id).where(condition).limit(MATERIALIZE_UP_TO + 1).subquery()
    matches = int(connection.execute(sa.select(sa.func.count()).select_from(entries)).scalar_one())
    if matches > MATERIALIZE_UP_TO:
        return _Candidates(walk, estimate=max(estimate, matches))
    # The tsvector only for the relevance score: read for every match, it is most of what a match costs.
    columns = [_SEARCH.c.paper_id, _SEARCH.c.doc] if relevance else [_SEARCH.c.paper_id]
    few = (
        sa.select(*columns)
        .where(condition)
        .cte("search_matches")
        .prefix_with("MATERIALIZED", dialect="postgresql")
    )
    return _Candidates(
        query.join(few, few.c.paper_id == col(Paper.id)),
        estimate=matches if matches > SEARCH_COUNT_LIMIT else None,
        doc=few.c.doc if relevance else _SEARCH.c.doc,
    )


@dataclass(frozen=True, slots=True)
class _Candidates:
    """SELECT paper.id of the papers a filter selects, unordered.

    For a search on PostgreSQL also ``estimate``, set when the matches are known to be more than
    SEARCH_COUNT_LIMIT (the total is then this estimate), and ``doc``, the tsvector column the query joined
    (for the relevance score).
    """

    query: Any
    estimate: int | None = None
    doc: Any = _SEARCH.c.doc


class _TSQueryType(sa.types.UserDefinedType[str]):
    """PostgreSQL's tsquery, for a CAST of a literal the compiler wrote (core.follows.search_text)."""

    cache_ok = True

    def get_col_spec(self, **_kw: Any) -> str:
        return "tsquery"


_TSQUERY = _TSQueryType()


def _relevance_order(connection: sa.Connection, flt: PaperFilter, doc: Any) -> list[Any]:
    """ORDER BY terms of the relevance order: the index's score, then the default order (``doc``: the
    tsvector column the candidates were joined to, on PostgreSQL)."""
    assert flt.search is not None
    if connection.dialect.name == "postgresql":
        score = sa.func.ts_rank(
            sa.cast(sa.literal(TS_RANK_WEIGHTS), sa.ARRAY(sa.REAL)),
            doc,
            sa.cast(sa.literal(flt.search.tsquery), _TSQUERY),
        )
        return [score.desc(), col(Paper.browse_key).desc(), col(Paper.id).desc()]
    # bm25 is lower for a better match.
    score = sa.func.bm25(sa.literal_column(TABLE), *BM25_WEIGHTS)
    return [score.asc(), col(Paper.browse_key).desc(), col(Paper.id).desc()]


def _history_condition(sort: Sort, keys: Sequence[Any]) -> sa.ColumnElement[bool]:
    """Papers stored as history, in a news-first order (``keys``: the order's columns)."""
    if sort is Sort.INGESTED:
        return col(Paper.news).is_not(True)
    condition: sa.ColumnElement[bool] = keys[0] < NEWS_BIT
    return condition


def _cursor_values(connection: sa.Connection, keys: Sequence[Any], paper_id: str) -> tuple[Any, ...]:
    """The order's key values of the cursor paper."""
    row = connection.execute(sa.select(*keys).where(col(Paper.id) == paper_id)).first()
    if row is None:
        raise CursorError(paper_id)
    return tuple(row)


def _literal_tuple(keys: Sequence[Any], values: Sequence[Any]) -> Any:
    # Each value bound with its column's type (a timestamp as the database stores it).
    return sa.tuple_(
        *(sa.bindparam(None, value, type_=key.type) for key, value in zip(keys, values, strict=True))
    )


def _ranked_ids(
    connection: sa.Connection, query: Any, search: SearchQuery | None, page: int, per_page: int
) -> tuple[list[str], bool, str | None]:
    """Page ``page`` of the relevance order.

    A search the index answers exactly is paged by OFFSET. One checked paper by paper (author names) ranks
    the first :data:`MAX_EXAMINED` candidates, keeps those the follow matcher accepts and pages through
    them, so that the pages never overlap.
    """
    assert search is not None
    if search.exact:
        ids = list(connection.execute(query.offset((page - 1) * per_page).limit(per_page + 1)).scalars())
        return ids[:per_page], len(ids) > per_page, None
    candidates = list(connection.execute(query.limit(MAX_EXAMINED)).scalars())
    kept = [
        pid
        for pid, text in paper_texts(connection, candidates, search)
        if search.query.evaluate(text) is not None
    ]
    start = (page - 1) * per_page
    return kept[start : start + per_page], len(kept) > start + per_page, None


def _read_ids(
    connection: sa.Connection, query: Any, search: SearchQuery | None, per_page: int
) -> tuple[list[str], bool, str | None]:
    """The ids of one page, whether more follow, and the last paper examined (the next page's cursor).

    For a search the index answers exactly, the first ``per_page + 1`` rows. Otherwise each candidate's
    newest version is checked with the follow matcher, reading candidates in slices, until a page is full
    or :data:`MAX_EXAMINED` were looked at: the page then ends early (even empty), and its cursor continues
    after the last candidate examined, so the next page makes progress.
    """
    if search is None or search.exact:
        ids = list(connection.execute(query.limit(per_page + 1)).scalars())
        page = ids[:per_page]
        return page, len(ids) > per_page, page[-1] if page else None
    kept: list[str] = []
    examined: list[str] = []
    slice_size = per_page * 2
    while len(examined) < MAX_EXAMINED:
        candidates = list(connection.execute(query.limit(slice_size).offset(len(examined))).scalars())
        for pid, text in paper_texts(connection, candidates, search):
            examined.append(pid)
            if search.query.evaluate(text) is None:
                continue
            if len(kept) == per_page:
                return kept, True, kept[-1]
            kept.append(pid)
        if len(candidates) < slice_size:
            return kept, False, kept[-1] if kept else None
    return kept, True, examined[-1]


def _bounded_count(connection: sa.Connection, query: Any, limit: int) -> int:
    """How many rows ``query`` returns, counting no further than ``limit + 1``."""
    limited = query.limit(limit + 1).subquery()
    return int(connection.execute(sa.select(sa.func.count()).select_from(limited)).scalar_one())


def _estimate(connection: sa.Connection, search: SearchQuery) -> int:
    """An estimate of a large search's total, from the index alone."""
    if connection.dialect.name == "postgresql":
        # The planner's estimate of the matching entries: no row is read.
        plan = connection.exec_driver_sql(
            f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {TABLE} WHERE doc @@ CAST(%(q)s AS tsquery)",
            {"q": search.tsquery},
        ).scalar_one()
        plan = json.loads(plan) if isinstance(plan, str) else plan
        return int(plan[0]["Plan"]["Plan Rows"])
    # The index's own count of its matching entries (older entries of revised papers included: "about").
    return int(
        connection.execute(
            sa.select(sa.func.count())
            .select_from(_SEARCH)
            .where(sa.literal_column(TABLE).op("MATCH")(sa.literal(search.fts5)))
        ).scalar_one()
    )


def _exists(connection: sa.Connection, query: Any) -> bool:
    return connection.execute(query.limit(1)).first() is not None
