"""``papertrail worker``: a process that only delivers digests, for scaling out on PostgreSQL.

Each worker plans and claims digests through the ledger (``FOR UPDATE SKIP LOCKED``), so any number of
them can share one database without sending anything twice. On SQLite one worker (or ``papertrail run``)
is enough: SQLite has a single writer anyway.

A stop request (SIGTERM, Ctrl-C, or ``papertrail run`` stopping) ends the claiming: the digests already
claimed are sent and recorded, nothing more is taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass

from core.delivery.digests import DigestReport, send_due_digests, worker_name
from papertrail.service.context import AppContext

log = logging.getLogger(__name__)


@dataclass
class WorkerTotals:
    """What a worker did over its life."""

    passes: int = 0
    sent: int = 0
    failed: int = 0
    # Delivered after this worker's claim had passed to another worker (it stalled past its lease): not
    # recorded by this worker, possibly delivered twice (core.delivery.digests.SentRecorder).
    late: int = 0

    def add(self, reports: list[DigestReport]) -> None:
        """Count one pass."""
        self.passes += 1
        self.sent += sum(1 for r in reports if r.sent)
        self.late += sum(1 for r in reports if r.late)
        self.failed += sum(1 for r in reports if not (r.sent or r.late))


async def run_worker(
    ctx: AppContext,
    *,
    name: str | None = None,
    until_idle: bool = False,
    stop: asyncio.Event | None = None,
    handle_signals: bool = True,
) -> WorkerTotals:
    """Deliver due digests until stopped, or until a pass finds nothing to do (``until_idle``).

    A stop request lets the digests in flight finish and be recorded; nothing new is claimed after it.
    With ``handle_signals`` SIGINT and SIGTERM set ``stop`` (``papertrail run`` handles them itself).
    """
    stop = stop or asyncio.Event()
    name = name or worker_name()
    if handle_signals:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
    totals = WorkerTotals()
    log.info("worker %s started", name, extra={"worker": name})
    while not stop.is_set():
        reports = await _one_pass(ctx, stop, name, until_idle=until_idle)
        totals.add(reports)
        if reports:
            log.info(
                "worker %s: %d digests sent, %d failed%s",
                name,
                totals.sent,
                totals.failed,
                f", {totals.late} delivered after losing their claim" if totals.late else "",
                extra={"worker": name},
            )
            continue
        if until_idle:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=ctx.settings.digest_check_seconds)
    passes = "1 pass" if totals.passes == 1 else f"{totals.passes} passes"
    log.info("worker %s stopped after %s", name, passes, extra={"worker": name})
    return totals


async def _one_pass(
    ctx: AppContext, stop: asyncio.Event, name: str, *, until_idle: bool
) -> list[DigestReport]:
    """One plan-claim-send pass, each sent digest logged with its subscriber and id."""
    try:
        reports = await send_due_digests(
            ctx.db, ctx.notifiers, ctx.renderer, policy=ctx.policy, worker=name, stop=stop
        )
    except Exception:
        if until_idle:
            raise
        # A database that went away for a moment must not end the service; claims are safe (leases).
        log.exception(
            "worker %s: delivery pass failed; next try in %d s",
            name,
            ctx.settings.digest_check_seconds,
            extra={"worker": name},
        )
        return []
    for report in reports:
        if report.sent:
            log.info(
                "digest %s to %s: %d items",
                report.digest_id,
                report.address,
                report.items,
                extra={"worker": name, "subscriber": report.address, "digest": report.digest_id},
            )
    return reports
