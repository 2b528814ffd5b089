"""The paper browser, ``/papers``: the stored papers sorted, filtered by arrival window, kind, category
and AI relevance, searched in the follow language (``core.follows.search_text``), 50 a page, walked by cursor.

Its query parameters are checked by :func:`parse_filter` and :func:`parse_cursor`, which answer what is
wrong in the reader's language (a 400 page that keeps the form as typed); the SQL is
``core/papers/browser_records.py``'s. Every filter is kept in the links the page makes
(:data:`FILTER_PARAMS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.follows.search_text import SearchError, compile_search
from core.guides.service import guides_for
from core.languages import Translator, listing, translator
from core.papers.browser_query import (
    MAX_CATEGORY,
    MAX_RELEVANCE_PAGE,
    MAX_SEARCH,
    PAGE_SIZE,
    CursorError,
    Kind,
    PaperFilter,
    PaperPage,
    Sort,
)
from core.papers.status import browse
from papertrail.service.context import AppContext
from papertrail.web.pages import Pages, number

# Arrival windows the browser accepts (the status page links use 24h).
WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
_CATEGORY = re.compile(r"^[A-Za-z][A-Za-z0-9.\-]*(\.\*)?$")
_MAX_PAGE = 100_000
# The browser's filters (kept in every link it makes) and its position in the list.
FILTER_PARAMS = ("sort", "kind", "since", "ai", "cat", "q")
CURSOR_PARAMS = ("after", "before", "page", "from")


class BrowserPages:
    """The ``/papers`` route of one app."""

    def __init__(self, ctx: AppContext, pages: Pages, clock: Callable[[], datetime]) -> None:
        self.db = ctx.db
        self.pages = pages
        self.clock = clock

    def routes(self) -> list[Route]:
        """``/papers``."""
        return [Route("/papers", self.papers_page, methods=["GET"])]

    def papers_page(self, request: Request) -> Response:
        """The paper browser: filters, a search in the follow language, pages walked by cursor."""
        reader = self.pages.reader(request)
        now = self.clock()
        params = {key: request.query_params.get(key, "") for key in FILTER_PARAMS}
        cursor = {key: request.query_params.get(key, "") for key in CURSOR_PARAMS}
        parsed = parse_filter(params, now, reader.t)
        result: PaperPage | None = None
        error = parsed if isinstance(parsed, str) else parse_cursor(parsed, cursor, reader.t)
        if not error and isinstance(parsed, PaperFilter):
            try:
                result = browse(
                    self.db,
                    parsed,
                    after=cursor["after"] or None,
                    before=cursor["before"] or None,
                    page=int(cursor["page"] or 1),
                    from_history=cursor["from"] == "history",
                    per_page=PAGE_SIZE,
                )
            except CursorError:
                error = reader.t.gettext(
                    "PaperTrail holds no paper {id} to continue from; start again from the first page",
                    id=cursor["after"] or cursor["before"],
                )
        if result is None:
            return self.pages.render(
                reader,
                "papers.html.j2",
                status=400,
                error=error,
                params=params,
                result=None,
                search=None,
                guides={},
                now=now,
                windows=WINDOWS,
                max_relevance_page=MAX_RELEVANCE_PAGE,
            )
        assert isinstance(parsed, PaperFilter)
        guides = guides_for(
            self.db, [row.version_id for row in result.rows if row.version_id is not None], reader.language
        )
        return self.pages.render(
            reader,
            "papers.html.j2",
            error="",
            params=params,
            result=result,
            search=parsed.search,
            guides=guides,
            now=now,
            windows=WINDOWS,
            max_relevance_page=MAX_RELEVANCE_PAGE,
        )


def parse_filter(params: dict[str, str], now: datetime, t: Translator | None = None) -> PaperFilter | str:
    """The browser's query parameters as a filter, or what is wrong with them (in ``t``'s language)."""
    t = t or translator(None)
    try:
        sort = Sort(params["sort"] or Sort.UPDATED)
    except ValueError:
        return t.gettext(
            "unknown sort {sort!r}; use one of {choices}",
            sort=params["sort"],
            choices=listing(t, (s.value for s in Sort)),
        )
    try:
        kind = Kind(params["kind"])
    except ValueError:
        return t.gettext("unknown kind {kind!r}; use new, revised or community", kind=params["kind"])
    window = params["since"]
    if window and window not in WINDOWS:
        return t.gettext(
            "unknown window {window!r}; use one of {choices}", window=window, choices=listing(t, WINDOWS)
        )
    ai = params["ai"]
    if ai not in ("", "0", "1", "on"):
        return t.gettext("ai={ai!r}: use ai=1 for AI-related papers only", ai=ai)
    category = params["cat"].strip()
    if category and (len(category) > MAX_CATEGORY or not _CATEGORY.match(category)):
        return t.gettext(
            "{category!r} is not a category; write it like cs.LG, or cs for the archive",
            category=category[:MAX_CATEGORY],
        )
    text = " ".join(params["q"].split())
    if len(text) > MAX_SEARCH:
        return t.gettext(
            "the search text is {length} characters long; the limit is {limit}",
            length=len(text),
            limit=MAX_SEARCH,
        )
    search = None
    if text:
        try:
            search = compile_search(text)
        except SearchError as err:
            return t.gettext("cannot search for {text!r}: {reason}", text=text, reason=str(err))
    if sort is Sort.RELEVANCE and search is None:
        return t.gettext("sorting by relevance needs a search text; type words to look for")
    return PaperFilter(
        sort=sort,
        kind=kind,
        since=now - WINDOWS[window] if window else None,
        ai=ai in ("1", "on"),
        category=category,
        search=search,
    )


def parse_cursor(flt: PaperFilter, cursor: dict[str, str], t: Translator) -> str:
    """What is wrong with the browser's position parameters (``after``, ``before``, ``page``, ``from``)."""
    page = cursor["page"]
    if page and (not page.isdigit() or not 1 <= int(page) <= _MAX_PAGE):
        return t.gettext("page {page!r} is not a page number", page=page)
    if page and int(page) > 1 and flt.sort is not Sort.RELEVANCE:
        return t.gettext(
            "page numbers apply to the relevance order only; follow the newer and older links instead"
        )
    if page and int(page) > MAX_RELEVANCE_PAGE:
        return t.gettext(
            "the relevance order shows the best {count} matches; sort by date to see every match",
            count=number(MAX_RELEVANCE_PAGE * PAGE_SIZE),
        )
    if cursor["after"] and cursor["before"]:
        return t.gettext("give after= or before=, not both")
    for key in ("after", "before"):
        if len(cursor[key]) > MAX_CATEGORY:
            return t.gettext("{key}= takes a paper id such as 2411.17700", key=key)
    if cursor["from"] not in ("", "history"):
        return t.gettext(
            "from={value!r}: use from=history to start at the papers from backfills", value=cursor["from"]
        )
    return ""
