"""The ingest pipeline: run a source (feed, paged, community, backfill, look-up), store, then match.

With core.delivery.digests, core.follows.manage and core.papers.status, the only modules that mix I/O and
logic. Sources and
notifiers come in as arguments, so core never imports the edges.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, ClassVar, Protocol

from core.db import Database, Db
from core.english import counted
from core.follows.index import FollowIndex, match_new
from core.models import RunState, SourceRun
from core.papers import paper_records, run_records
from core.papers.paper_records import Novelty, SaveResult
from core.papers.search_index import INDEX_BATCH
from core.papers.sources import CommunitySource, PagedSource, Source, SourceError
from core.values import PaperIn, ResponseValidator

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one source run did."""

    source: str
    state: RunState
    fetched: int = 0
    new_papers: int = 0
    revisions: int = 0
    duplicates: int = 0
    # (version, distinct follow query) pairs matched: followers get theirs when these are fanned out.
    matches: int = 0
    note: str | None = None
    error: str | None = None
    retry_after: float | None = None


async def ingest_once(
    db: Database,
    source: Source,
    *,
    now: datetime | None = None,
    index: FollowIndex | None = None,
    opening: Callable[[Db], object] | None = None,
) -> IngestReport:
    """Run one source once: fetch, store new versions, record the run, then match what is new.

    The run opens (``running``) in one transaction with the read of the source's stored HTTP validator
    and ``opening``, run first (the ingest claim's closing of the runs a dead process left ``running``);
    the fetch runs after it commits. A failed fetch is recorded as a run in state ``error`` with the
    message; nothing is stored.
    """
    with db.transaction() as tx:
        if opening is not None:
            opening(tx)
        run_id = run_records.start_run(tx, source.name, now=now)
        stored = run_records.validator_for(tx, source.url)

    def validators(url: str) -> ResponseValidator | None:
        return stored if url == source.url else run_records.validator_for(db, url)

    try:
        result = await source.fetch(validators)
        # The batch and its run's record commit together: a run reads "ok" only with its versions stored.
        with db.transaction() as tx:
            saved = paper_records.save_versions(tx, result.papers, now=now, validator=result.validator)
            state, fetched = result.state, len(result.papers)
            note = "; ".join(filter(None, (result.note, announced_note(saved.announced)))) or None
            run_records.finish_run(
                tx,
                run_id,
                state,
                fetched=fetched,
                new_papers=saved.new_papers,
                revisions=saved.revisions,
                duplicates=saved.duplicates,
                cursor=result.cursor,
                note=note,
            )
    except SourceError as exc:
        run_records.finish_run(db, run_id, RunState.ERROR, error=str(exc))
        log.warning("source %s failed: %s", source.name, exc, extra={"source": source.name})
        return IngestReport(source.name, RunState.ERROR, error=str(exc), retry_after=exc.retry_after)
    except Exception as exc:  # a bug in a parser must not stop the loop, but it must be visible
        log.exception("source %s crashed", source.name, extra={"source": source.name})
        message = f"unexpected {type(exc).__name__}: {exc}"
        run_records.finish_run(db, run_id, RunState.ERROR, error=message)
        return IngestReport(source.name, RunState.ERROR, error=message)
    except BaseException as exc:
        close_interrupted(db, run_id, exc)
        raise
    # Stored: the fetched versions can go before matching reads them back in batches. Holding both had
    # set the peak memory of a large feed's ingest (docs/benchmarks.md, "Feed memory").
    del result
    matches = match_new(db, now=now, index=index)
    return IngestReport(
        source.name,
        state,
        fetched=fetched,
        new_papers=saved.new_papers,
        revisions=saved.revisions,
        duplicates=saved.duplicates,
        matches=matches,
        note=note,
    )


def announced_note(announced: int) -> str | None:
    """The run's note on versions stored as history before (a look-up, a library) that it made news."""
    if not announced:
        return None
    return f"{counted(announced, 'version')} stored before as history, news now that arXiv announced them"


async def ingest_paged(
    db: Database,
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
    run_id = run_records.start_run(db, source.name, now=now)
    cursor = since or run_records.last_cursor(db, source.name)
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
            saved = paper_records.save_versions(db, page.papers, now=now, novelty=novelty)
            fetched += len(page.papers)
            totals.new_papers += saved.new_papers
            totals.revisions += saved.revisions
            totals.duplicates += saved.duplicates
            totals.history += saved.history
            totals.announced += saved.announced
            skipped.extend(page.skipped)
            if page.note:
                notes.append(page.note)
            if page.cursor is not None:
                final_cursor = page.cursor
            if on_page is not None:
                on_page(saved)
    except SourceError as exc:
        run_records.finish_run(db, run_id, RunState.ERROR, error=str(exc), **progress())
        log.warning(
            "source %s failed after %d versions: %s", source.name, fetched, exc, extra={"source": source.name}
        )
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
    except BaseException as exc:  # Ctrl-C, a cancelled task, a bug: closed, then passed on
        close_interrupted(db, run_id, exc, **progress())
        raise
    state = RunState.OK if fetched else RunState.EMPTY
    if totals.history:
        notes.append(f"{counted(totals.history, 'version')} stored as history")
    announced = announced_note(totals.announced)
    if announced:
        notes.append(announced)
    run_records.finish_run(db, run_id, state, cursor=final_cursor, **progress())
    matches = match_new(db, now=now, index=index)
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
    db: Database, source: CommunitySource, day: date, *, now: datetime | None = None
) -> IngestReport:
    """Fetch one day of community picks and attach them to their arXiv papers."""
    run_id = run_records.start_run(db, source.name, now=now)
    try:
        page = await source.fetch_day(day)
        added, unseen = paper_records.save_picks(db, page.picks, now=now)
    except SourceError as exc:
        run_records.finish_run(db, run_id, RunState.ERROR, error=str(exc), cursor=None)
        log.warning("source %s failed: %s", source.name, exc, extra={"source": source.name})
        return IngestReport(source.name, RunState.ERROR, error=str(exc), retry_after=exc.retry_after)
    except BaseException as exc:
        close_interrupted(db, run_id, exc)
        raise
    parts = [
        f"{counted(len(page.picks), 'pick')} on {day.isoformat()}, {added} new, "
        f"{counted(unseen, 'paper')} new to PaperTrail"
    ]
    if page.skipped:
        parts.append(f"skipped {len(page.skipped)}: " + "; ".join(page.skipped[:5]))
    note = "; ".join(parts)
    state = RunState.OK if page.picks else RunState.EMPTY
    run_records.finish_run(
        db,
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
    db: Database,
    source: str,
    batches: Iterable[Batch],
    *,
    now: datetime | None = None,
    on_batch: Callable[[SaveResult], None] | None = None,
) -> IngestReport:
    """Store a backfill as history, batch by batch (each batch one transaction); never news, never sent.

    Interrupting it keeps every batch already stored; running it again skips them as duplicates.
    """
    run_id = run_records.start_run(db, source, now=now)
    totals = SaveResult()
    fetched = 0
    skipped: list[str] = []
    try:
        for batch in batches:
            saved = paper_records.save_versions(db, batch.papers, now=now, novelty=Novelty.HISTORY)
            fetched += len(batch.papers)
            totals.history += saved.history
            totals.duplicates += saved.duplicates
            skipped.extend(batch.skipped)
            if on_batch is not None:
                on_batch(saved)
    except BaseException as exc:  # Ctrl-C included: the run must not stay "running" forever
        close_interrupted(db, run_id, exc, fetched=fetched, duplicates=totals.duplicates)
        raise
    note = f"{counted(totals.history, 'version')} stored as history"
    if skipped:
        note += f"; skipped {counted(len(skipped), 'line')}: " + "; ".join(skipped[:5])
    state = RunState.OK if fetched else RunState.EMPTY
    run_records.finish_run(db, run_id, state, fetched=fetched, duplicates=totals.duplicates, note=note)
    return IngestReport(source, state, fetched=fetched, duplicates=totals.duplicates, note=note)


class PaperLookup(Protocol):
    """Fetches arXiv's metadata for papers by id (the arXiv API)."""

    name: ClassVar[str]

    async def lookup(self, ids: Sequence[str]) -> tuple[PaperIn, ...]:
        """The latest version of each id the service knows."""
        ...


async def complete_papers(db: Database, api: PaperLookup, *, limit: int = 500) -> IngestReport:
    """Fetch arXiv metadata for papers known only from a community source; stored as history.

    Such papers were picked by the community, not announced to PaperTrail's feed: storing them as
    history completes their page without notifying anyone. When arXiv's announcement brings one of those
    versions later, it becomes news then, once (``core.papers.paper_records``).
    """
    ids = paper_records.papers_without_versions(db, limit)
    run_id = run_records.start_run(db, api.name)
    if not ids:
        run_records.finish_run(db, run_id, RunState.EMPTY, note="no papers waiting for arXiv metadata")
        return IngestReport(api.name, RunState.EMPTY, note="no papers waiting for arXiv metadata")
    try:
        papers = await api.lookup(ids)
        saved = paper_records.save_versions(db, papers, novelty=Novelty.HISTORY)
    except SourceError as exc:
        run_records.finish_run(db, run_id, RunState.ERROR, error=str(exc))
        return IngestReport(api.name, RunState.ERROR, error=str(exc), retry_after=exc.retry_after)
    except BaseException as exc:
        close_interrupted(db, run_id, exc)
        raise
    missing = sorted(set(ids) - {p.arxiv_id for p in papers})
    note = f"completed {len(papers)} of {counted(len(ids), 'paper')}" + (
        f"; arXiv does not know {', '.join(missing[:10])}" if missing else ""
    )
    run_records.finish_run(
        db, run_id, RunState.OK, fetched=len(papers), duplicates=saved.duplicates, note=note
    )
    return IngestReport(api.name, RunState.OK, fetched=len(papers), duplicates=saved.duplicates, note=note)


def close_interrupted(db: Database, run_id: int, exc: BaseException, **fields: Any) -> None:
    """Close a run that ``exc`` (Ctrl-C, a cancelled task, a bug) cut short as failed, saying so.

    The one way a run ends early: the caller re-raises ``exc``; what was stored before stays stored (each
    page or batch is its own transaction), and a run is never left ``running`` by a live process.
    """
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        why = f"interrupted ({type(exc).__name__}) before it finished"
    else:
        why = f"unexpected {type(exc).__name__}: {exc}"
    log.warning("source run %d closed: %s", run_id, why)
    run_records.finish_run(db, run_id, RunState.ERROR, error=why, **fields)


@dataclass(frozen=True, slots=True)
class Indexed:
    """One batch of :func:`index_search`: how many papers got their search index entry, and whether the
    batch was full (more may wait)."""

    written: int
    full: bool


def index_search(db: Database) -> Indexed:
    """Write the search index entries of one batch of the papers a backfill left (one transaction)."""
    written = paper_records.index_search(db, INDEX_BATCH)
    return Indexed(written, written >= INDEX_BATCH)


def search_backlog(db: Database) -> int:
    """How many papers wait for their search index entry."""
    return paper_records.search_backlog(db)


def tidy_search_index(db: Database) -> None:
    """Merge the search index's pending entries (PostgreSQL; nothing to do on SQLite)."""
    paper_records.tidy_search_index(db)


def catch_up(
    db: Database, source: PagedSource, *, since: str | None, history: bool
) -> Coroutine[Any, Any, IngestReport]:
    """The run of a paged source over what its cursor (or ``since``) left (``papertrail ingest``): the
    versions announced after the newest announcement already seen are news, or, with ``history``, none."""
    return ingest_paged(db, source, since=since, novelty=Novelty.HISTORY if history else Novelty.GAP)


def running_run(db: Database, source: str) -> SourceRun | None:
    """The newest run of ``source`` if it is still ``running`` (by this process or a dead one)."""
    return run_records.running_run(db, source)


def close_abandoned(db: Db, source: str, *, reason: str) -> list[int]:
    """Close every ``running`` run of ``source`` as failed with ``reason`` (the caller holds its ingest
    lock, so none is live); their ids."""
    return run_records.close_abandoned(db, source, reason=reason)
