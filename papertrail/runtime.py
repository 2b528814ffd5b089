"""``papertrail run``: one process that ingests on an interval and sends due digests every minute.

APScheduler drives both jobs on one asyncio loop; SIGINT and SIGTERM stop it cleanly, letting a job
that is running finish its transaction first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from datetime import timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from core.digests import send_due_digests
from core.models import utcnow
from core.service import complete_papers, ingest_community, ingest_once
from papertrail.context import AppContext

log = logging.getLogger(__name__)


async def ingest_all(ctx: AppContext) -> None:
    """Run every source once, one after another (they share the polite HTTP client).

    A source whose server asked for a longer pause (Retry-After beyond what one run sits out) is skipped
    until that time has passed.
    """
    for source in ctx.sources.values():
        resume_at = ctx.not_before.get(source.name)
        if resume_at is not None and utcnow() < resume_at:
            log.info("%s: skipped; the server asked us to wait until %s", source.name, resume_at.isoformat())
            continue
        report = await ingest_once(ctx.store, source, index=ctx.follows)
        if report.retry_after:
            ctx.not_before[source.name] = utcnow() + timedelta(seconds=report.retry_after)
        if not report.error:  # failures are logged where they are recorded, in core.service
            log.info(
                "%s: %s, %d fetched, %d new papers, %d revisions, %d matches",
                report.source,
                report.state,
                report.fetched,
                report.new_papers,
                report.revisions,
                report.matches,
            )
    await community_all(ctx)


async def community_all(ctx: AppContext) -> None:
    """Fetch today's list (UTC) of every community source; upvotes move during the day."""
    for source in ctx.community.values():
        report = await ingest_community(ctx.store, source, utcnow().date())
        if not report.error:
            log.info("%s: %s", report.source, report.note)
    if ctx.api is not None:
        # Papers first seen on a community source get arXiv's metadata right away.
        report = await complete_papers(ctx.store, ctx.api)
        if report.fetched:
            log.info("%s: %s", report.source, report.note)


async def digest_tick(ctx: AppContext) -> None:
    """Send whatever digests are due now."""
    for report in await send_due_digests(ctx.store, ctx.notifiers, ctx.renderer, policy=ctx.policy):
        if report.sent:
            log.info("digest to %s: %d items", report.address, report.items)
        else:
            log.warning("digest to %s not sent: %s", report.address, report.error)


async def run_forever(ctx: AppContext, stop: asyncio.Event | None = None) -> None:
    """Schedule ingest and digests until ``stop`` is set or a SIGINT/SIGTERM arrives."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Not available off the main thread or on some platforms; Ctrl-C then ends the loop instead.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    scheduler = AsyncIOScheduler(timezone="UTC")
    settings = ctx.settings
    running: set[asyncio.Task[None]] = set()

    async def tracked(job: Callable[[AppContext], Awaitable[None]], ctx: AppContext) -> None:
        # Remember running jobs so that shutdown can let them finish their transaction.
        task = asyncio.current_task()
        assert task is not None
        running.add(task)
        try:
            await job(ctx)
        finally:
            running.discard(task)

    scheduler.add_job(
        tracked,
        "interval",
        args=[ingest_all, ctx],
        minutes=settings.ingest_interval_minutes,
        next_run_time=utcnow(),
        id="ingest",
        name="ingest",
        max_instances=1,
        coalesce=True,
    )
    scheduler.add_job(
        tracked,
        "interval",
        args=[digest_tick, ctx],
        seconds=settings.digest_check_seconds,
        next_run_time=utcnow() + timedelta(seconds=5),
        id="digests",
        name="digests",
        max_instances=1,
        coalesce=True,
    )
    scheduler.start()
    log.info(
        "PaperTrail running: ingest every %d min, digests checked every %d s; Ctrl-C to stop",
        settings.ingest_interval_minutes,
        settings.digest_check_seconds,
    )
    try:
        await stop.wait()
    finally:
        log.info("stopping: waiting for running jobs to finish")
        scheduler.shutdown(wait=False)
        if running:
            await asyncio.wait(set(running), timeout=30)
        log.info("stopped")
