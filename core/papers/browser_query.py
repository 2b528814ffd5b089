"""The paper browser's query and the page it answers: the values the browser's page, its SQL
(core.papers.browser_records) and the Atom feeds share. Pure: no database, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.follows.search_text import SearchQuery
    from core.papers.browser_rows import PaperRow

# Rows per page of the paper browser, and the longest text search and category accepted.
PAGE_SIZE = 50
MAX_SEARCH = 200
MAX_CATEGORY = 64
# The relevance order has no index: it ranks every match, and pages stop here (1,000 papers).
MAX_RELEVANCE_PAGE = 20


class Sort(StrEnum):
    """Orders of the paper browser, newest first."""

    UPDATED = "updated"  # news first, then when the paper's newest version arrived
    INGESTED = "ingested"  # news first, then when PaperTrail first saw the paper
    PUBLISHED = "published"  # when arXiv announced v1 (papers whose v1 is not stored come last)
    RELEVANCE = "relevance"  # a search's best matches first (title words weigh most)


class Kind(StrEnum):
    """What a paper must have to be listed."""

    ANY = ""
    NEW = "new"  # a v1
    REVISED = "revised"  # a v2 or later
    COMMUNITY = "community"  # a community pick (Hugging Face daily papers)


@dataclass(frozen=True, slots=True)
class PaperFilter:
    """The paper browser's query. ``since`` limits arrivals (news versions, or picks for COMMUNITY).

    ``search`` is the compiled search text (core.follows.search_text.compile_search), None for no search.
    """

    sort: Sort = Sort.UPDATED
    kind: Kind = Kind.ANY
    since: datetime | None = None
    ai: bool = False
    category: str = ""
    search: SearchQuery | None = None


class TotalKind(StrEnum):
    """How exact a page's total is."""

    EXACT = "exact"
    AT_LEAST = "at_least"  # more than ``total`` (a filter's count stopped at COUNT_LIMIT)
    ABOUT = "about"  # an estimate from the search index


@dataclass(frozen=True, slots=True)
class PaperPage:
    """One page of the browser: its rows, the filter's total, and the cursors of the pages around it.

    ``after`` continues with older papers (None on the last page), ``before`` with newer ones (None on the
    first page). For the relevance order, ``page`` is the page number instead. ``history_start`` is set on
    a page of the news-first orders that still shows news when there is history after it.
    """

    rows: tuple[PaperRow, ...]
    total: int
    total_kind: TotalKind = TotalKind.EXACT
    per_page: int = PAGE_SIZE
    after: str | None = None
    before: str | None = None
    page: int = 1
    has_history: bool = False


class CursorError(LookupError):
    """A cursor names a paper the library does not hold."""
