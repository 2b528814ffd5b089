"""The pipeline steps: ingest_once, match_new, send_due_digests, and follow management.

This is the only module that mixes I/O and logic. Sources and notifiers come in as arguments, so core
never imports the edges.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, ClassVar, Protocol

from core.delivery import DeliveryError, Notifier, normalise_address, split_address
from core.follow_index import FollowIndex
from core.health import ARXIV_TZ, Health, Verdict, arxiv_feed_health
from core.models import CommunityPickRow, Follow, PaperIn, RunState, Subscriber, SubscriberStatus, utcnow
from core.query import parse
from core.render import Renderer
from core.schedule import is_due, parse_schedule, zone
from core.sources import CommunitySource, PagedSource, Source, SourceError
from core.store import (
    Hit,
    Novelty,
    PendingMatch,
    SaveResult,
    SourceHealth,
    StatusSummary,
    Store,
    group_by_subscriber,
    version_to_paper,
)

log = logging.getLogger(__name__)

# Retryable delivery failures back off exponentially from one minute up to six hours.
BACKOFF_BASE = timedelta(minutes=1)
BACKOFF_MAX = timedelta(hours=6)


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one source run did."""

    source: str
    state: RunState
    fetched: int = 0
    new_papers: int = 0
    revisions: int = 0
    duplicates: int = 0
    matches: int = 0
    note: str | None = None
    error: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class DigestReport:
    """What one delivery attempt did."""

    address: str
    items: int
    sent: bool
    error: str | None = None
    paused: bool = False


async def ingest_once(
    store: Store, source: Source, *, now: datetime | None = None, index: FollowIndex | None = None
) -> IngestReport:
    """Run one source once: fetch, store new versions, record the run, then match what is new.

    A failed fetch is recorded as a run in state ``error`` with the message; nothing is stored.
    """
    run_id = store.start_run(source.name, now=now)
    try:
        result = await source.fetch(store.validator_for)
    except SourceError as exc:
        store.finish_run(run_id, RunState.ERROR, error=str(exc))
        log.warning("source %s failed: %s", source.name, exc)
        return IngestReport(source.name, RunState.ERROR, error=str(exc), retry_after=exc.retry_after)
    except Exception as exc:  # a bug in a parser must not stop the loop, but it must be visible
        log.exception("source %s crashed", source.name)
        message = f"unexpected {type(exc).__name__}: {exc}"
        store.finish_run(run_id, RunState.ERROR, error=message)
        return IngestReport(source.name, RunState.ERROR, error=message)
    saved = store.save_versions(result.papers, now=now, validator=result.validator)
    store.finish_run(
        run_id,
        result.state,
        fetched=len(result.papers),
        new_papers=saved.new_papers,
        revisions=saved.revisions,
        duplicates=saved.duplicates,
        cursor=result.cursor,
        note=result.note,
    )
    matches = match_new(store, now=now, index=index)
    return IngestReport(
        source.name,
        result.state,
        fetched=len(result.papers),
        new_papers=saved.new_papers,
        revisions=saved.revisions,
        duplicates=saved.duplicates,
        matches=matches,
        note=result.note,
    )


async def ingest_paged(
    store: Store,
    source: PagedSource,
    *,
    since: str | None = None,
    novelty: Novelty = Novelty.GAP,
    now: datetime | None = None,
    index: FollowIndex | None = None,
    on_page: Callable[[SaveResult], None] | None = None,
) -> IngestReport:
    """Run a paged source: store each page before fetching the next, then match what is news.

    ``since`` overrides the stored cursor (``--since 2026-11-01``). ``novelty`` decides what is news:
    ``GAP`` (versions announced after the newest announcement already seen) or ``HISTORY`` (nothing).
    A failure part-way keeps the pages already stored and leaves the cursor where it was.
    """
    run_id = store.start_run(source.name, now=now)
    cursor = since or store.last_cursor(source.name)
    totals = SaveResult()
    fetched = 0
    skipped: list[str] = []
    final_cursor: str | None = None
    notes: list[str] = []

    def progress() -> dict[str, Any]:
        parts = list(notes)
        if skipped:
            parts.append(f"skipped {len(skipped)} record(s): " + "; ".join(skipped[:5]))
        return {
            "fetched": fetched,
            "new_papers": totals.new_papers,
            "revisions": totals.revisions,
            "duplicates": totals.duplicates,
            "note": "; ".join(parts) or None,
        }

    try:
        async for page in source.pages(cursor):
            saved = store.save_versions(page.papers, now=now, novelty=novelty)
            fetched += len(page.papers)
            totals.new_papers += saved.new_papers
            totals.revisions += saved.revisions
            totals.duplicates += saved.duplicates
            totals.history += saved.history
            skipped.extend(page.skipped)
            if page.note:
                notes.append(page.note)
            if page.cursor is not None:
                final_cursor = page.cursor
            if on_page is not None:
                on_page(saved)
    except SourceError as exc:
        store.finish_run(run_id, RunState.ERROR, error=str(exc), **progress())
        log.warning("source %s failed after %d versions: %s", source.name, fetched, exc)
        return IngestReport(
            source.name,
            RunState.ERROR,
            fetched,
            totals.new_papers,
            totals.revisions,
            totals.duplicates,
            error=str(exc),
            retry_after=exc.retry_after,
        )
    state = RunState.OK if fetched else RunState.EMPTY
    if totals.history:
        notes.append(f"{totals.history} version(s) stored as history")
    store.finish_run(run_id, state, cursor=final_cursor, **progress())
    matches = match_new(store, now=now, index=index)
    return IngestReport(
        source.name,
        state,
        fetched,
        totals.new_papers,
        totals.revisions,
        totals.duplicates,
        matches,
        note=progress()["note"],
    )


async def ingest_community(
    store: Store, source: CommunitySource, day: date, *, now: datetime | None = None
) -> IngestReport:
    """Fetch one day of community picks and attach them to their arXiv papers."""
    run_id = store.start_run(source.name, now=now)
    try:
        page = await source.fetch_day(day)
    except SourceError as exc:
        store.finish_run(run_id, RunState.ERROR, error=str(exc), cursor=None)
        log.warning("source %s failed: %s", source.name, exc)
        return IngestReport(source.name, RunState.ERROR, error=str(exc), retry_after=exc.retry_after)
    added, unseen = store.save_picks(page.picks, now=now)
    parts = [
        f"{len(page.picks)} pick(s) on {day.isoformat()}, {added} new, {unseen} paper(s) new to PaperTrail"
    ]
    if page.skipped:
        parts.append(f"skipped {len(page.skipped)}: " + "; ".join(page.skipped[:5]))
    note = "; ".join(parts)
    state = RunState.OK if page.picks else RunState.EMPTY
    store.finish_run(
        run_id,
        state,
        fetched=len(page.picks),
        duplicates=len(page.picks) - added,
        cursor=day.isoformat(),
        note=note,
    )
    return IngestReport(
        source.name, state, fetched=len(page.picks), duplicates=len(page.picks) - added, note=note
    )


@dataclass(frozen=True, slots=True)
class Batch:
    """A slice of a backfill: versions to store and notes on input lines that were skipped."""

    papers: Sequence[PaperIn]
    skipped: Sequence[str] = ()


def backfill(
    store: Store,
    source: str,
    batches: Iterable[Batch],
    *,
    now: datetime | None = None,
    on_batch: Callable[[SaveResult], None] | None = None,
) -> IngestReport:
    """Store a backfill as history, batch by batch (each batch one transaction); never news, never sent.

    Interrupting it keeps every batch already stored; running it again skips them as duplicates.
    """
    run_id = store.start_run(source, now=now)
    totals = SaveResult()
    fetched = 0
    skipped: list[str] = []
    try:
        for batch in batches:
            saved = store.save_versions(batch.papers, now=now, novelty=Novelty.HISTORY)
            fetched += len(batch.papers)
            totals.history += saved.history
            totals.duplicates += saved.duplicates
            skipped.extend(batch.skipped)
            if on_batch is not None:
                on_batch(saved)
    except BaseException as exc:  # Ctrl-C included: the run must not stay "running" forever
        store.finish_run(
            run_id,
            RunState.ERROR,
            fetched=fetched,
            duplicates=totals.duplicates,
            error=f"interrupted: {exc!r}",
        )
        raise
    note = f"{totals.history} version(s) stored as history"
    if skipped:
        note += f"; skipped {len(skipped)} line(s): " + "; ".join(skipped[:5])
    state = RunState.OK if fetched else RunState.EMPTY
    store.finish_run(run_id, state, fetched=fetched, duplicates=totals.duplicates, note=note)
    return IngestReport(source, state, fetched=fetched, duplicates=totals.duplicates, note=note)


class PaperLookup(Protocol):
    """Fetches arXiv's metadata for papers by id (the arXiv API)."""

    name: ClassVar[str]

    async def lookup(self, ids: Sequence[str]) -> tuple[PaperIn, ...]:
        """The latest version of each id the service knows."""
        ...


async def complete_papers(store: Store, api: PaperLookup, *, limit: int = 500) -> IngestReport:
    """Fetch arXiv metadata for papers known only from a community source; stored as history.

    Such papers were picked by the community, not announced to PaperTrail's feed: storing them as
    history completes their page without notifying anyone twice.
    """
    ids = store.papers_without_versions(limit)
    run_id = store.start_run(api.name)
    if not ids:
        store.finish_run(run_id, RunState.EMPTY, note="no papers waiting for arXiv metadata")
        return IngestReport(api.name, RunState.EMPTY, note="no papers waiting for arXiv metadata")
    try:
        papers = await api.lookup(ids)
    except SourceError as exc:
        store.finish_run(run_id, RunState.ERROR, error=str(exc))
        return IngestReport(api.name, RunState.ERROR, error=str(exc), retry_after=exc.retry_after)
    saved = store.save_versions(papers, novelty=Novelty.HISTORY)
    missing = sorted(set(ids) - {p.arxiv_id for p in papers})
    note = f"completed {len(papers)} of {len(ids)} paper(s)" + (
        f"; arXiv does not know {', '.join(missing[:10])}" if missing else ""
    )
    store.finish_run(run_id, RunState.OK, fetched=len(papers), duplicates=saved.duplicates, note=note)
    return IngestReport(api.name, RunState.OK, fetched=len(papers), duplicates=saved.duplicates, note=note)


def match_new(store: Store, *, now: datetime | None = None, index: FollowIndex | None = None) -> int:
    """Match every not-yet-matched version once against all active follows; returns Match rows written.

    ``index`` is the process's long-lived follow index (brought up to date here); without one a fresh
    index is built. A follow only sees versions first seen after it was created, so a new follow does not
    flood its subscriber with the backlog.
    """
    index = index or FollowIndex()
    total = 0
    while True:
        versions = store.unmatched_versions()
        if not versions:
            return total
        index.sync(store.active_follows())
        hits: list[Hit] = []
        for version in versions:
            assert version.id is not None
            for follow_id, reasons in index.matcher.match(version_to_paper(version)):
                follow = index.follows[follow_id]
                if follow.created_at > version.first_seen_at:
                    continue  # added after this version arrived: no backlog floods
                if version.number > 1 and not follow.revisions:
                    continue  # this follow wants new papers only
                hits.append(Hit(follow.subscriber_id, version.id, follow_id, reasons, follow.instant))
        total += store.record_matches(
            [v.id for v in versions if v.id is not None], group_by_subscriber(hits), now=now
        )


# -- follows ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FollowResult:
    """The outcome of ``follow``: the stored follow and whether it (and its subscriber) were new."""

    subscriber: Subscriber
    follow: Follow
    outcome: str
    """``added``, ``updated`` (same query, new options) or ``unchanged``."""
    subscriber_created: bool


def follow(
    store: Store,
    address: str,
    text: str,
    *,
    timezone: str = "UTC",
    schedule: str = "daily 08:00",
    revisions: bool = True,
    instant: bool = False,
) -> FollowResult:
    """Validate and store a follow, creating the subscriber when the address is new.

    ``revisions=False`` follows new papers only; ``instant=True`` sends its matches as soon as they are
    found instead of with the scheduled digest. Following the same query again updates these options.

    Raises ValueError (bad address, timezone or schedule) or QueryError (bad query) with a hint.
    """
    address = normalise_address(address)
    query = parse(text)
    zone(timezone)
    parse_schedule(schedule)
    subscriber, created = store.ensure_subscriber(address, timezone=timezone, schedule=schedule)
    assert subscriber.id is not None
    stored, outcome = store.add_follow(
        subscriber.id, text.strip(), query.canonical(), revisions=revisions, instant=instant
    )
    return FollowResult(subscriber, stored, outcome, created)


def unfollow(store: Store, address: str, which: str) -> Follow:
    """Remove a follow by its number in ``follows`` (1-based) or by its query text.

    Raises LookupError naming the subscriber's follows when nothing fits.
    """
    address = normalise_address(address)
    subscriber = store.get_subscriber(address)
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"{address} has no follows; add one with: papertrail follow {address} QUERY")
    follows = store.follows_of(subscriber.id)
    target: Follow | None = None
    if which.strip().isdigit():
        number = int(which)
        if not 1 <= number <= len(follows):
            raise LookupError(
                f"{address} has {len(follows)} follow(s); pick a number from 1 to {len(follows)}"
            )
        target = follows[number - 1]
    else:
        canonical = parse(which).canonical()
        target = next((f for f in follows if f.canonical == canonical), None)
        if target is None:
            listing = "; ".join(f"{i}. {f.query}" for i, f in enumerate(follows, 1)) or "none"
            raise LookupError(f"{address} does not follow {which!r}; its follows are: {listing}")
    assert target.id is not None
    store.remove_follow(target.id)
    return target


# -- digests ---------------------------------------------------------------------------------------


async def send_due_digests(
    store: Store,
    notifiers: Mapping[str, Notifier],
    renderer: Renderer,
    *,
    now: datetime | None = None,
    force: bool = False,
    address: str | None = None,
) -> list[DigestReport]:
    """Send every due digest, optionally for one address only.

    With ``force`` every pending match goes out now, whatever the schedule and any back-off.

    Matches are marked sent in the same transaction that records the digest. A retryable failure
    keeps them pending and backs the subscriber off; a permanent one pauses the subscriber and says why.
    """
    now = now or utcnow()
    if address is not None:
        address = normalise_address(address)
    reports: list[DigestReport] = []
    # An operator asking for --now wants an attempt now, back-off or not.
    for subscriber in store.subscribers_with_pending(now, address, ignore_backoff=force):
        assert subscriber.id is not None
        pending = store.pending_matches(subscriber.id)
        if not (force or _due(subscriber, now)):
            # Between scheduled digests only the matches of instant follows go out.
            pending = [p for p in pending if p.instant]
        if pending:
            reports.append(await _deliver(store, notifiers, renderer, subscriber, pending, now))
    return reports


def _due(subscriber: Subscriber, now: datetime) -> bool:
    try:
        schedule = parse_schedule(subscriber.schedule)
        since = subscriber.last_digest_at or subscriber.created_at
        return is_due(schedule, subscriber.timezone, now, since)
    except ValueError as exc:
        log.error("subscriber %s has an unusable schedule: %s", subscriber.address, exc)
        return False


async def _deliver(
    store: Store,
    notifiers: Mapping[str, Notifier],
    renderer: Renderer,
    subscriber: Subscriber,
    pending: list[PendingMatch],
    now: datetime,
) -> DigestReport:
    assert subscriber.id is not None
    channel, target = split_address(subscriber.address)
    notifier = notifiers.get(channel)
    if notifier is None:
        # The channel's adapter is not built in (or not configured): keep everything for later.
        error = f"no notifier for channel {channel!r} in this build; matches stay pending"
        log.warning("%s: %s", subscriber.address, error)
        return DigestReport(subscriber.address, len(pending), False, error)
    message = renderer.render(channel, [p.item for p in pending], target)
    try:
        result = await notifier.send(target, message)
    except DeliveryError as exc:
        pause = not exc.retryable
        wait = timedelta(seconds=exc.retry_after) if exc.retry_after else _backoff(subscriber.failures)
        store.record_failure(
            subscriber.id,
            str(exc),
            channel=channel,
            retry_at=None if pause else now + wait,
            pause=pause,
            now=now,
        )
        log.warning("delivery to %s failed (%s): %s", subscriber.address, "paused" if pause else "retry", exc)
        return DigestReport(subscriber.address, len(pending), False, str(exc), paused=pause)
    store.record_sent(
        subscriber.id, [p.match_id for p in pending], channel=channel, platform_id=result.platform_id, now=now
    )
    return DigestReport(subscriber.address, len(pending), True)


def _backoff(failures: int) -> timedelta:
    factor: int = 2 ** min(failures, 20)
    return min(BACKOFF_MAX, BACKOFF_BASE * factor)


def resume(store: Store, address: str) -> Subscriber:
    """Re-activate a paused subscriber; its pending matches go out with the next due digest."""
    subscriber = store.get_subscriber(normalise_address(address))
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"no subscriber {address}")
    return store.update_subscriber(
        subscriber.id, status=SubscriberStatus.ACTIVE, status_reason=None, retry_at=None, failures=0
    )


# -- trying a query --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TryHit:
    """A stored version a query would have matched, with why."""

    arxiv_id: str
    version: int
    title: str
    first_seen_at: datetime
    reasons: tuple[str, ...]


def try_query(store: Store, text: str, *, days: int = 7, now: datetime | None = None) -> list[TryHit]:
    """Which versions first seen in the last ``days`` days ``text`` would have matched, newest first.

    Raises QueryError for a query that does not parse, so people can tune a follow before saving it.
    """
    query = parse(text)
    since = (now or utcnow()) - timedelta(days=days)
    hits: list[TryHit] = []
    for version in store.versions_since(since):
        reasons = query.evaluate(version_to_paper(version))
        if reasons is not None:
            hits.append(
                TryHit(version.paper_id, version.number, version.title, version.first_seen_at, reasons)
            )
    return hits


# -- status ----------------------------------------------------------------------------------------

# Sources that follow arXiv's announcement calendar (their cursor is the mailing's date).
CALENDAR_SOURCES = frozenset({"arxiv-rss"})


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """One source on the status page: the stored facts and the calendar-aware verdict."""

    facts: SourceHealth
    verdict: Verdict


def source_statuses(
    summary: StatusSummary,
    *,
    now: datetime | None = None,
    holidays: Collection[date] = (),
    grace: timedelta = timedelta(hours=4),
) -> list[SourceStatus]:
    """Judge every source of a status summary: ok, quiet, stale, failing or unknown."""
    now = now or utcnow()
    judged: list[SourceStatus] = []
    for facts in summary.sources:
        failed = facts.last_state == RunState.ERROR
        if facts.source in CALENDAR_SOURCES:
            served = _mailing_of(facts.served_cursor)
            verdict = arxiv_feed_health(
                now=now,
                last_check_failed=failed,
                last_error=facts.last_error,
                served_mailing=served,
                holidays=holidays,
                grace=grace,
            )
        elif facts.last_check is None:
            verdict = Verdict(Health.UNKNOWN, "never checked")
        elif failed:
            verdict = Verdict(Health.FAILING, facts.last_error or "the last check failed")
        else:
            verdict = Verdict(Health.OK, facts.last_note or "last check succeeded")
        judged.append(SourceStatus(facts, verdict))
    return judged


def _mailing_of(cursor: str | None) -> date | None:
    if not cursor:
        return None
    try:
        return datetime.fromisoformat(cursor).astimezone(ARXIV_TZ).date()
    except ValueError:
        return None


# -- one paper -------------------------------------------------------------------------------------

# Fields compared between consecutive versions to say what a revision changed.
_TRACKED = ("title", "abstract", "authors", "categories", "comment", "journal_ref", "doi", "license")


@dataclass(frozen=True, slots=True)
class VersionView:
    """One stored version of a paper and what changed against the previous stored one."""

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


def show_paper(store: Store, arxiv_id: str) -> PaperView:
    """Everything known about one paper; raises LookupError for an id PaperTrail has not seen."""
    # Accept "arXiv:2411.17700v2" as well as "2411.17700": a paper is keyed without its version.
    bare = re.sub(r"v\d+$", "", arxiv_id.strip().removeprefix("arXiv:").removeprefix("arxiv:"))
    rows = store.versions_of(bare)
    picks = tuple(store.picks_of(bare))
    if not rows and not picks:
        raise LookupError(f"PaperTrail has not seen {arxiv_id!r}; ingest it first or check the id")
    if not rows:
        # Known from a community source only: show what it said until arXiv's metadata arrives.
        last = picks[-1]
        return PaperView(
            bare, last.title, (), (), last.summary, (), tuple(dict.fromkeys(p.source for p in picks)), picks
        )
    views: list[VersionView] = []
    previous = None
    for row in rows:
        changed: tuple[str, ...] = ()
        if previous is not None:
            changed = tuple(f for f in _TRACKED if getattr(row, f) != getattr(previous, f))
        views.append(
            VersionView(
                row.number, row.announced_at or row.first_seen_at, row.announce_type, row.source, changed
            )
        )
        previous = row
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
