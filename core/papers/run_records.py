"""Source runs and the HTTP validators of the sources' fetches; ``core.papers.run_records``.

Talks to the database through the store's ORM session (``db.session()``), one transaction per method.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from core.db import Db
from core.models import (
    HttpValidator,
    RunState,
    SourceRun,
    utcnow,
)
from core.values import ResponseValidator


# Source runs (start, finish, cursors, receipts) and HTTP validators.
def validator_for(db: Db, url: str) -> ResponseValidator | None:
    """The stored ETag / Last-Modified for ``url``, if any."""
    with db.session() as session:
        row = session.get(HttpValidator, url)
        if row is None:
            return None
        return ResponseValidator(
            url=row.url, etag=row.etag, last_modified=row.last_modified, updated_at=row.updated_at
        )


def save_validator(db: Db, validator: ResponseValidator) -> None:
    """Remember ETag / Last-Modified for a URL (used when a response carried nothing to store)."""
    with db.session() as session:
        session.merge(validator_row(validator, utcnow()))


def start_run(db: Db, source: str, *, now: datetime | None = None) -> int:
    """Open a source run in state ``running`` and return its id."""
    with db.session() as session:
        run = SourceRun(source=source, started_at=now or utcnow())
        session.add(run)
        session.flush()
        assert run.id is not None
        return run.id


def finish_run(db: Db, run_id: int, state: RunState, *, now: datetime | None = None, **fields: Any) -> None:
    """Close a source run with its final state and counts (``fetched``, ``new_papers``, ``error`` ...)."""
    with db.session() as session:
        run = session.get(SourceRun, run_id)
        if run is None:
            raise LookupError(f"source run {run_id} does not exist")
        run.state = state
        run.finished_at = now or utcnow()
        for name, value in fields.items():
            setattr(run, name, value)
        session.add(run)


def running_run(db: Db, source: str) -> SourceRun | None:
    """The newest run of ``source`` still in state ``running``, if its newest run is one."""
    with db.session() as session:
        newest = select(SourceRun).where(SourceRun.source == source).order_by(col(SourceRun.id).desc())
        last = session.exec(newest.limit(1)).first()
        return last if last is not None and last.state == RunState.RUNNING else None


def close_abandoned(db: Db, source: str, *, reason: str, now: datetime | None = None) -> list[int]:
    """Close every ``running`` run of ``source`` as failed with ``reason``; returns their ids.

    Only for a caller that holds the source's ingest lock (papertrail.service.ingest_claim): then no live
    process owns such a run, its owner died without closing it.
    """
    with db.session() as session:
        rows = list(
            session.exec(
                select(SourceRun).where(SourceRun.source == source, SourceRun.state == RunState.RUNNING)
            )
        )
        for run in rows:
            run.state = RunState.ERROR
            run.finished_at = now or utcnow()
            run.error = reason
            session.add(run)
        return [run.id or 0 for run in rows]


def last_cursor(db: Db, source: str) -> str | None:
    """The newest cursor a run of ``source`` recorded: where an incremental source resumes."""
    with db.session() as session:
        return session.exec(
            select(SourceRun.cursor)
            .where(SourceRun.source == source, col(SourceRun.cursor).is_not(None))
            .order_by(col(SourceRun.id).desc())
            .limit(1)
        ).first()


def receipt_runs(
    db: Db,
    since: datetime,
    until: datetime,
    *,
    overlap: timedelta,
    sources: Collection[str] = (),
    page: int = 1000,
) -> list[SourceRun]:
    """The runs a scan receipt of the window (since, until] is computed from (core.delivery.receipts), by
    id.

    Every run finished in the window, and for each source that has one (and each of ``sources``) the
    runs that say how it stood when the window opened: its last run finished before, its newest good
    run with a cursor (the mailing it served) and, when that last run failed, the first run of the
    failure streak.

    No index on the runs' times is needed: the window's runs are read by id, newest first, a page at
    a time, until a run started ``overlap`` before the window (ids follow start times); the few runs
    of each source before the window through the (source) index, each a probe from the window's end.
    So the cost is the window's runs, not the table's (a year of runs every 30 minutes is ~20,000).
    """
    found: dict[int, SourceRun] = {}
    with db.session() as session:
        before: int | None = None
        while True:
            query = select(SourceRun).order_by(col(SourceRun.id).desc()).limit(page)
            if before is not None:
                query = query.where(col(SourceRun.id) < before)
            rows = list(session.exec(query))
            for run in rows:
                if run.finished_at is not None and since < run.finished_at <= until:
                    found[run.id or 0] = run
            if len(rows) < page or rows[-1].started_at <= since - overlap:
                break
            before = rows[-1].id
        names = sorted({run.source for run in found.values()} | set(sources))
        for name in names:
            for run in runs_before(session, name, since):
                found[run.id or 0] = run
    return [found[key] for key in sorted(found)]


def latest_runs(db: Db, limit: int = 20) -> list[SourceRun]:
    """The most recent source runs, newest first."""
    with db.session() as session:
        rows = session.exec(select(SourceRun).order_by(col(SourceRun.id).desc()).limit(limit))
        return list(rows)


GOOD_STATES = (RunState.OK, RunState.EMPTY, RunState.NOT_MODIFIED)


def runs_before(session: Session, source: str, moment: datetime) -> list[SourceRun]:
    """How ``source`` stood at ``moment``: its last run finished by then, its newest good run with a cursor
    by then, and when the last run failed, the first run of that failure streak (see receipt_runs)."""
    mine = select(SourceRun).where(
        SourceRun.source == source,
        col(SourceRun.finished_at).is_not(None),
        col(SourceRun.finished_at) <= moment,
    )
    newest = col(SourceRun.id).desc()
    last = session.exec(mine.order_by(newest).limit(1)).first()
    if last is None:
        return []
    found = [last]
    good = mine.where(col(SourceRun.state).in_(GOOD_STATES))
    served = session.exec(good.where(col(SourceRun.cursor).is_not(None)).order_by(newest).limit(1)).first()
    if served is not None:
        found.append(served)
    if last.state == RunState.ERROR:
        recovered = session.exec(
            good.where(col(SourceRun.id) < (last.id or 0)).order_by(newest).limit(1)
        ).first()
        streak = mine.where(col(SourceRun.id) <= (last.id or 0))
        if recovered is not None:
            streak = streak.where(col(SourceRun.id) > (recovered.id or 0))
        first = session.exec(streak.order_by(col(SourceRun.id)).limit(1)).first()
        if first is not None:
            found.append(first)
    return found


def validator_row(validator: ResponseValidator, now: datetime) -> HttpValidator:
    """The ``http_validator`` row of ``validator`` (saved ``now`` when it carries no time of its own): the
    one place a source's plain validator becomes a database row."""
    return HttpValidator(
        url=validator.url,
        etag=validator.etag,
        last_modified=validator.last_modified,
        updated_at=validator.updated_at or now,
    )
