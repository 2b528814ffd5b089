"""One ingest of a source at a time, and no source run left ``running`` by a process that is gone.

Every ingest (``papertrail ingest``, the scheduler's jobs) first claims its source: it takes the source's
lock (:func:`papertrail.service.leader.lock_for` named ``papertrail-ingest/<source>``: an advisory lock on
PostgreSQL, a ``flock`` on SQLite), which the database or the kernel drops when the holder dies, SIGKILL
included. Whoever holds the lock is the only live owner a ``running`` run of that source can have; so a
``running`` run found while holding it was left by a process that died, and is closed as failed with
:data:`ABANDONED`. The next ingest does that when it claims the source, and the status readers
(``papertrail status``, the status page) do it for a source whose lock is free (:func:`reap_abandoned`).

A claim that finds the lock held raises :class:`SourceBusy`: the other ingest is doing the work.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from core.db import Database, Db
from core.overview import screens
from core.papers import pipeline
from papertrail.service.leader import Lock, PostgresLock, lock_for

if TYPE_CHECKING:
    from core.overview.dashboard_records import StatusSummary

log = logging.getLogger(__name__)

# The error an abandoned run is closed with (it is worded in the status page's languages as it is).
ABANDONED = (
    "abandoned: the process running this check ended without recording it "
    "(killed, or its host or database connection went away)"
)


class SourceBusy(RuntimeError):
    """Another process is ingesting this source now; nothing was done."""

    def __init__(self, source: str, started_at: datetime | None) -> None:
        since = f" since {started_at:%Y-%m-%d %H:%M:%S} UTC" if started_at else ""
        super().__init__(
            f"{source}: another ingest of this source is running{since}; nothing was done. "
            "It stores what this one would have; run again after it has finished if you want a fresh check"
        )
        self.source = source
        self.started_at = started_at


def _lock(db: Database, source: str) -> Lock:
    return lock_for(db.engine, f"papertrail-ingest/{source}")


def _take(lock: Lock) -> bool:
    taken = lock.try_acquire()
    if not taken and isinstance(lock, PostgresLock) and lock.unreachable:
        # Not busy: the database did not answer. Say so the way every other store call does.
        raise ConnectionError(f"cannot reach the database to take the {lock.description}")
    return taken


class SourceClaim:
    """A source's ingest lock, held: it closes the runs a dead process left ``running`` once."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.closed = False

    def close_abandoned(self, db: Db) -> int:
        """Close the source's abandoned runs in ``db`` (the transaction that opens the new run, with
        ``ingest_once(..., opening=claim.close_abandoned)``); how many. Only the first call closes."""
        if self.closed:
            return 0
        self.closed = True
        return _close_abandoned(db, self.source)


@contextmanager
def claim_source(db: Database, source: str, *, with_run: bool = False) -> Iterator[SourceClaim]:
    """Hold ``source``'s ingest lock for the block, closing the runs a dead process left ``running``: first,
    in a transaction of their own, or with ``with_run`` in the caller's transaction that opens its run
    (:meth:`SourceClaim.close_abandoned`; if the block never called it, they are closed when it ends).

    Raises :class:`SourceBusy` when another process holds it.
    """
    lock = _lock(db, source)
    if not _take(lock):
        running = pipeline.running_run(db, source)
        raise SourceBusy(source, running.started_at if running else None)
    claim = SourceClaim(source)
    try:
        if not with_run:
            claim.close_abandoned(db)
        yield claim
        claim.close_abandoned(db)  # nothing left to do when the block closed them
    finally:
        lock.release()


def reap_abandoned(db: Database, sources: Iterable[str]) -> int:
    """Close the abandoned ``running`` runs of ``sources`` whose lock is free; returns how many.

    For the status readers: they call it for the sources whose newest run is ``running``, so that a
    SIGKILLed ingest does not read as "checking" until the next run.
    """
    closed = 0
    for source in sources:
        lock = _lock(db, source)
        try:
            if not _take(lock):
                continue  # a live ingest holds it: its run is really in flight
        except OSError as exc:  # a lock file this reader may not create: it cannot tell, so it leaves it
            log.warning("%s: cannot look at the ingest lock: %s", source, exc, extra={"source": source})
            continue
        try:
            closed += _close_abandoned(db, source)
        finally:
            lock.release()
    return closed


def _close_abandoned(db: Db, source: str) -> int:
    ids = pipeline.close_abandoned(db, source, reason=ABANDONED)
    if ids:
        log.warning(
            "%s: closed %d run(s) left running by a process that is gone (%s)",
            source,
            len(ids),
            ", ".join(map(str, ids)),
            extra={"source": source},
        )
    return len(ids)


def status_summary(db: Database, sources: Iterable[str], now: datetime | None = None) -> StatusSummary:
    """The store's status summary for the status readers (``papertrail status``, the status page), with
    the runs a dead process left ``running`` closed first: a source reads "checking" only while a live
    process checks it."""
    summary = screens.status(db, now, sources=sources)
    checking = [facts.source for facts in summary.sources if facts.checking_since is not None]
    if checking and reap_abandoned(db, checking):
        summary = screens.status(db, now, sources=sources)
    return summary
