"""A source's calendar-aware verdict (the rule the status page and the scan receipts judge by), and one
paper's history (``papertrail show``)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from core.db import Database
from core.models import CommunityPickRow, RunState, Version
from core.papers import browser_records, paper_records
from core.papers.browser_query import PaperFilter, PaperPage
from core.papers.health import ARXIV_TZ, Health, SourceHealth, Verdict, arxiv_feed_health
from core.papers.revisions import history

# Sources that follow arXiv's announcement calendar (their cursor is the mailing's date).
CALENDAR_SOURCES = frozenset({"arxiv-rss"})


def judge(
    facts: SourceHealth,
    *,
    now: datetime,
    holidays: Collection[date] = (),
    grace: timedelta = timedelta(hours=4),
) -> Verdict:
    """One source's verdict at ``now`` from its latest facts: the status page's rule, also replayed over
    past runs by the scan receipts of digests (core.delivery.receipts).

    While a check is in flight (``facts.checking_since``) the source is ``checking``, and its reason says
    the verdict of the last finished check: "last check: failing — HTTP 503 ...".
    """
    verdict = _finished_verdict(facts, now=now, holidays=holidays, grace=grace)
    if facts.checking_since is None:
        return verdict
    return Verdict(
        Health.CHECKING,
        CHECKING_REASON.format(state=verdict.state, reason=verdict.reason),
        lag=verdict.lag,
        settled=verdict.state,
    )


# A check in flight's reason; the web page words it in the reader's language (papertrail.web.pages).
CHECKING_REASON = "last check: {state} — {reason}"


def _finished_verdict(
    facts: SourceHealth, *, now: datetime, holidays: Collection[date], grace: timedelta
) -> Verdict:
    failed = facts.last_state == RunState.ERROR
    if facts.source in CALENDAR_SOURCES:
        return arxiv_feed_health(
            now=now,
            last_check_failed=failed,
            last_error=facts.last_error,
            served_mailing=mailing_of(facts.served_cursor),
            holidays=holidays,
            grace=grace,
        )
    if facts.last_check is None:
        return Verdict(Health.UNKNOWN, "never checked")
    if failed:
        return Verdict(Health.FAILING, facts.last_error or "the last check failed")
    return Verdict(Health.OK, facts.last_note or "last check succeeded")


def mailing_of(cursor: str | None) -> date | None:
    """The arXiv mailing date a calendar source's cursor (the RSS channel's pubDate) names; None without
    one or for a cursor that is not a date."""
    if not cursor:
        return None
    try:
        return datetime.fromisoformat(cursor).astimezone(ARXIV_TZ).date()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class VersionView:
    """One stored version of a paper and what it changed (core.papers.revisions)."""

    version: int
    date: datetime
    announce_type: str
    source: str
    changed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PaperView:
    """A paper with every version PaperTrail knows, newest metadata first."""

    id: str
    title: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]
    abstract: str
    versions: tuple[VersionView, ...]
    sources: tuple[str, ...]
    picks: tuple[CommunityPickRow, ...] = ()

    @property
    def upvotes(self) -> int:
        """The highest upvote count any community pick recorded (0 without picks)."""
        return max((pick.upvotes for pick in self.picks), default=0)


def show_paper(db: Database, arxiv_id: str) -> PaperView:
    """Everything known about one paper; raises LookupError for an id PaperTrail has not seen."""
    # Accept "arXiv:2411.17700v2" as well as "2411.17700": a paper is keyed without its version.
    bare = re.sub(r"v\d+$", "", arxiv_id.strip().removeprefix("arXiv:").removeprefix("arxiv:"))
    rows = paper_records.versions_of(db, bare)
    picks = tuple(paper_records.picks_of(db, bare))
    if not rows and not picks:
        raise LookupError(f"PaperTrail has not seen {arxiv_id!r}; ingest it first or check the id")
    if not rows:
        # Known from a community source only: show what it said until arXiv's metadata arrives.
        last = picks[-1]
        return PaperView(
            bare, last.title, (), (), last.summary, (), tuple(dict.fromkeys(p.source for p in picks)), picks
        )
    views = [
        VersionView(row.number, row.announced_at or row.first_seen_at, row.announce_type, row.source, changed)
        for row, changed in history(rows)
    ]
    latest = rows[-1]
    return PaperView(
        id=bare,
        title=latest.title,
        authors=tuple(latest.authors),
        categories=tuple(latest.categories),
        abstract=latest.abstract,
        versions=tuple(views),
        sources=tuple(dict.fromkeys([*(row.source for row in rows), *(pick.source for pick in picks)])),
        picks=picks,
    )


def versions_of(db: Database, arxiv_id: str) -> list[Version]:
    """Every stored version of the paper ``arxiv_id`` (bare), oldest first; empty when unknown."""
    return paper_records.versions_of(db, arxiv_id)


def stored_version(db: Database, arxiv_id: str, number: int) -> Version | None:
    """Version ``number`` of the paper ``arxiv_id`` (bare) as stored, None when it is not."""
    return next((row for row in paper_records.versions_of(db, arxiv_id) if row.number == number), None)


def picks_of(db: Database, arxiv_id: str) -> list[CommunityPickRow]:
    """Every community pick of the paper ``arxiv_id`` (bare), oldest day first."""
    return paper_records.picks_of(db, arxiv_id)


def newest_versions(db: Database, arxiv_ids: Sequence[str]) -> dict[str, Version]:
    """The newest stored version of each of these papers, by paper id; an unknown paper is left out."""
    return paper_records.newest_versions(db, arxiv_ids) if arxiv_ids else {}


def browse(
    db: Database,
    flt: PaperFilter,
    *,
    after: str | None,
    before: str | None,
    page: int,
    from_history: bool,
    per_page: int,
) -> PaperPage:
    """One page of the paper browser: the papers ``flt`` selects, in its order, and their total.

    Raises CursorError when the paper to continue from (``after``, ``before``) is not stored."""
    return browser_records.browse_papers(
        db, flt, after=after, before=before, page=page, from_history=from_history, per_page=per_page
    )
