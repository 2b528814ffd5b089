"""``papertrail run``: one asyncio process that runs any of four roles until SIGTERM or Ctrl-C.

- ``scheduler``: ingest jobs (APScheduler), each source on its own cadence, plus extra arXiv runs just
  after the 20:00 America/New_York announcement. One scheduler leads per store
  (:mod:`papertrail.service.leader`); others wait and take over when it goes.
- ``worker``: the digest delivery loop (:func:`papertrail.service.worker.run_worker`).
- ``web``: uvicorn serving :func:`papertrail.web.app.build_app` in the same event loop.
- ``bots``: the chat bots of a later release; this build has none and says so.

The first SIGTERM or SIGINT stops new work (no job fires, the worker claims nothing, the web server
accepts no connection) and gives the work in flight :data:`STOP_GRACE` seconds to finish and be recorded;
what is still running then is cancelled. A second signal cancels at once. A send cancelled half-way keeps
its claim on the digest until the lease runs out (its batch's renewals stop with it); another worker then
sends it: nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar
from zoneinfo import ZoneInfo

import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from core.guides.service import make_reader_guides
from core.models import utcnow
from core.papers import pipeline
from core.papers.pipeline import complete_papers, ingest_community, ingest_once
from papertrail.service.context import AppContext
from papertrail.service.ingest_claim import SourceBusy, claim_source
from papertrail.service.leader import POLL_SECONDS, Leader, lock_for

if TYPE_CHECKING:
    from notifiers.telegram.chat import TelegramBot

log = logging.getLogger(__name__)

ROLES = ("scheduler", "bots", "web", "worker")
# Seconds the work in flight gets after a stop request; with the cancellation and the clean-up after it
# the process exits within 30 s (Kubernetes' default grace period; `docker stop -t 30`).
STOP_GRACE = 25.0
# The web server's limits (see web_role): an idle keep-alive connection is closed after this many seconds;
# a request head (request line and headers) larger than this is refused with 400; beyond this many open
# connections and tasks new requests get 503 at once instead of queueing without bound.
WEB_KEEP_ALIVE_SECONDS = 5
WEB_MAX_HEADER_BYTES = 16 * 1024
WEB_MAX_CONNECTIONS = 500
# Seconds cancelled tasks get to run their clean-up (release the scheduler lock, close a connection).
CANCEL_GRACE = 3.0
# Hugging Face's daily list grows and its upvotes move during the day; hourly is plenty.
COMMUNITY_INTERVAL_MINUTES = 60
# The search indexer (Jobs.index_search): a run every minute writes entries for up to 40 s, a batch
# (core.papers.pipeline.index_search) per transaction, so a backfill's million papers are searchable within
# the hour or so.
INDEX_INTERVAL_SECONDS = 60
INDEX_RUN_SECONDS = 40
# arXiv announces at 20:00 America/New_York, Sunday to Thursday; the feed follows within minutes.
ANNOUNCEMENT = CronTrigger(
    day_of_week="sun,mon,tue,wed,thu", hour=20, minute="5,35", timezone="America/New_York"
)
NEW_YORK = ZoneInfo("America/New_York")
# A job that could not start on time (the loop was busy) still runs if it is at most this late.
MISFIRE_GRACE_SECONDS = 300

T = TypeVar("T")
Role = Callable[[AppContext, asyncio.Event], Coroutine[Any, Any, None]]


class RoleFailed(RuntimeError):
    """A role stopped with an error; the others were stopped cleanly."""


class RoleError(RuntimeError):
    """A role cannot go on for a reason its message explains (logged without a traceback)."""


def parse_roles(values: Sequence[str]) -> tuple[str, ...]:
    """``["scheduler,web", "worker"]`` -> the roles in canonical order; none or ``all`` -> every role.

    Raises ValueError naming the unknown role and the valid ones.
    """
    names = [part.strip().lower() for value in values for part in value.split(",") if part.strip()]
    if not names or "all" in names:
        return ROLES
    unknown = [name for name in names if name not in ROLES]
    if unknown:
        raise ValueError(
            f"unknown role {unknown[0]!r}; choose from {', '.join(ROLES)} or all "
            "(comma-separated, or --role repeated)"
        )
    return tuple(role for role in ROLES if role in names)


# -- the scheduler's jobs -----------------------------------------------------------------------------


class Jobs:
    """The ingest jobs over one context; a source never runs twice at once (interval and cron overlap).

    Once ``stop`` is set a job starts no further source or guide: what it had started finishes (its
    back-offs cut short by :func:`run_forever`), the rest waits for the next start.
    """

    def __init__(self, ctx: AppContext, stop: asyncio.Event | None = None) -> None:
        self.ctx = ctx
        self.stop = stop or asyncio.Event()
        self._busy: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def ingest(self, name: str) -> None:
        """One run of the source ``name``, unless its server asked us (Retry-After) to wait longer."""
        ctx = self.ctx
        async with self._busy[name]:
            if self.stop.is_set():
                return
            resume_at = ctx.not_before.get(name)
            if resume_at is not None and utcnow() < resume_at:
                log.info(
                    "%s: skipped; the server asked us to wait until %s",
                    name,
                    resume_at.isoformat(),
                    extra={"source": name},
                )
                return
            try:
                with claim_source(ctx.db, name, with_run=True) as claim:
                    report = await ingest_once(
                        ctx.db, ctx.sources[name], index=ctx.follows, opening=claim.close_abandoned
                    )
            except SourceBusy as exc:  # a `papertrail ingest` (or another service) runs it: it does the work
                log.info("skipped: %s", exc, extra={"source": name})
                return
            if report.retry_after:
                ctx.not_before[name] = utcnow() + timedelta(seconds=report.retry_after)
            if not report.error:  # failures are logged where they are recorded, in core.papers.pipeline
                log.info(
                    "%s: %s, %d fetched, %d new papers, %d revisions, %d query matches",
                    report.source,
                    report.state,
                    report.fetched,
                    report.new_papers,
                    report.revisions,
                    report.matches,
                    extra={"source": name},
                )
        if report.matches:
            await self.guides()

    async def community(self) -> None:
        """Today's list (UTC) of every community source, then arXiv's metadata for papers first seen there."""
        ctx = self.ctx
        async with self._busy["community"]:
            for source in ctx.community.values():
                if self.stop.is_set():
                    return
                try:
                    with claim_source(ctx.db, source.name):
                        report = await ingest_community(ctx.db, source, utcnow().date())
                except SourceBusy as exc:
                    log.info("skipped: %s", exc, extra={"source": source.name})
                    continue
                if not report.error:
                    log.info("%s: %s", report.source, report.note, extra={"source": report.source})
            if ctx.api is not None and not self.stop.is_set():
                try:
                    with claim_source(ctx.db, ctx.api.name):
                        report = await complete_papers(ctx.db, ctx.api)
                except SourceBusy as exc:
                    log.info("skipped: %s", exc, extra={"source": ctx.api.name})
                else:
                    if report.fetched:
                        log.info("%s: %s", report.source, report.note, extra={"source": report.source})
        # Also retries the guides an earlier run could not make (endpoint down, daily cap): hourly.
        await self.guides()

    async def index_search(self) -> None:
        """Write the search index entries a backfill or migration 0018 left (core.papers.search_index), a
        batch at a time (core.papers.pipeline.index_search), for at most INDEX_RUN_SECONDS a run: the rest
        waits for the next run.
        Then merge the index's pending entries (PostgreSQL), the day's news among them."""
        db = self.ctx.db
        async with self._busy["index"]:
            started = time.monotonic()
            written = 0
            while not self.stop.is_set() and time.monotonic() - started < INDEX_RUN_SECONDS:
                batch = await asyncio.to_thread(pipeline.index_search, db)
                written += batch.written
                if not batch.full:
                    break
            if written:
                left = await asyncio.to_thread(pipeline.search_backlog, db)
                log.info("search index: %d papers indexed, %d to go", written, left)
            # The news written since the last run, merged into PostgreSQL's GIN index proper.
            await asyncio.to_thread(pipeline.tidy_search_index, db)

    async def guides(self) -> None:
        """Make the AI guides readers are waiting for (core.guides.service); nothing without an endpoint.

        Runs after the matching it depends on, never before a digest: a digest due meanwhile goes out
        without the guides rather than late.
        """
        ctx = self.ctx
        if ctx.guide_model is None or self.stop.is_set():
            return
        async with self._busy["guides"]:
            for report in await make_reader_guides(ctx.db, ctx.guide_model, ctx.settings, now=utcnow()):
                if report.made or report.failures or report.capped:
                    log.info(
                        "guides (%s): %d made, %d failed%s",
                        report.language,
                        report.made,
                        len(report.failures),
                        f"; {report.note}" if report.note else "",
                    )


async def ingest_all(ctx: AppContext) -> None:
    """Run every source once, one after another, then the community sources (``Jobs`` per source)."""
    jobs = Jobs(ctx)
    for name in ctx.sources:
        await jobs.ingest(name)
    await jobs.community()


def add_jobs(scheduler: AsyncIOScheduler, jobs: Jobs, run: Callable[..., Awaitable[None]]) -> None:
    """Register every ingest job on ``scheduler``; ``run(func, *args)`` wraps each call (for tracking)."""
    settings = jobs.ctx.settings
    common: dict[str, Any] = {
        "max_instances": 1,
        "coalesce": True,
        "misfire_grace_time": MISFIRE_GRACE_SECONDS,
    }
    for name in jobs.ctx.sources:
        scheduler.add_job(
            run,
            IntervalTrigger(minutes=settings.ingest_interval_minutes),
            args=[jobs.ingest, name],
            next_run_time=utcnow(),
            id=name,
            name=f"{name} every {settings.ingest_interval_minutes} min",
            **common,
        )
    if "arxiv-rss" in jobs.ctx.sources:
        scheduler.add_job(
            run,
            ANNOUNCEMENT,
            args=[jobs.ingest, "arxiv-rss"],
            id="arxiv-rss-announcement",
            name="arxiv-rss after the announcement (20:05 and 20:35 New York, Sunday to Thursday)",
            **common,
        )
    scheduler.add_job(
        run,
        IntervalTrigger(seconds=INDEX_INTERVAL_SECONDS),
        args=[jobs.index_search],
        next_run_time=utcnow(),
        id="search-index",
        name=f"search index entries a backfill left, every {INDEX_INTERVAL_SECONDS} s",
        **common,
    )
    if jobs.ctx.community or jobs.ctx.api is not None:
        scheduler.add_job(
            run,
            IntervalTrigger(minutes=COMMUNITY_INTERVAL_MINUTES),
            args=[jobs.community],
            next_run_time=utcnow(),
            id="hf-daily",
            name=f"hf-daily, then arxiv-api completion, every {COMMUNITY_INTERVAL_MINUTES} min",
            **common,
        )


# -- the roles ------------------------------------------------------------------------------------------


async def scheduler_role(ctx: AppContext, stop: asyncio.Event, *, poll: float = POLL_SECONDS) -> None:
    """Lead (or wait to lead), run the ingest jobs while leading, release the lock when stopping."""
    leader = Leader(lock_for(ctx.db.engine), poll=poll)
    jobs = Jobs(ctx, stop)
    try:
        while await leader.acquire(stop):
            if await _lead(jobs, leader, stop):
                break
    finally:
        # Only now, with every job finished: a successor must not run a source this process still runs.
        await asyncio.to_thread(leader.release)


async def _lead(jobs: Jobs, leader: Leader, stop: asyncio.Event) -> bool:
    """Run the jobs until ``stop`` (True) or the lock is lost (False); wait for the jobs in flight."""
    running: set[asyncio.Task[Any]] = set()

    async def tracked(func: Callable[..., Awaitable[None]], *args: Any) -> None:
        task = asyncio.current_task()
        assert task is not None
        running.add(task)
        try:
            await func(*args)
        finally:
            running.discard(task)

    scheduler = AsyncIOScheduler(timezone="UTC")
    add_jobs(scheduler, jobs, tracked)
    scheduler.start()
    for job in scheduler.get_jobs():
        log.info(
            "scheduler: job %s, next run %s",
            job.name,
            job.next_run_time.isoformat(),
            extra={"role": "scheduler"},
        )
    try:
        stopped = await leader.hold(stop)
    finally:
        # pause(), not shutdown(): APScheduler's asyncio executor cancels running jobs when it shuts down.
        scheduler.pause()
        try:
            if running:
                log.info(
                    "scheduler: waiting for %d running job(s)", len(running), extra={"role": "scheduler"}
                )
                await asyncio.wait(set(running))
        finally:
            scheduler.shutdown(wait=False)  # cancels only what outlived the grace period
    return stopped


async def worker_role(ctx: AppContext, stop: asyncio.Event) -> None:
    """The delivery loop; the process's signal handling stays with :func:`run_forever`."""
    from papertrail.service.worker import run_worker

    await run_worker(ctx, stop=stop, handle_signals=False)


async def web_role(ctx: AppContext, stop: asyncio.Event) -> None:
    """Serve the web app on ``web_host:web_port`` until ``stop``; in-flight requests finish first."""
    from notifiers.telegram.chat import TelegramBotError
    from papertrail.web.app import build_app  # the web app's templates and metrics only when serving

    settings = ctx.settings
    try:
        app = build_app(ctx)
    except TelegramBotError as exc:  # webhook mode without a secret
        raise RoleError(f"the web app cannot serve the Telegram webhook: {exc}") from None
    config = uvicorn.Config(
        app,
        host=settings.web_host,
        port=settings.web_port,
        log_config=None,  # records go to the root logger: our format, our secret filter
        timeout_graceful_shutdown=int(STOP_GRACE),
        # Bounds against slow or greedy clients. uvicorn (0.54, h11) has no timeout for reading a
        # request's headers: its keep-alive timer runs only between requests. What it offers is set here;
        # a reverse proxy in front must time out slow headers (docs/operations.md).
        timeout_keep_alive=WEB_KEEP_ALIVE_SECONDS,
        h11_max_incomplete_event_size=WEB_MAX_HEADER_BYTES,
        limit_concurrency=WEB_MAX_CONNECTIONS,
        # uvicorn would believe X-Forwarded-For from 127.0.0.1 (or $FORWARDED_ALLOW_IPS) unasked; the
        # client's address counts for the sign-up limits, so PAPERTRAIL_TRUSTED_PROXIES alone decides
        # whose header is read (papertrail.web.client_address).
        proxy_headers=False,
    )
    server = EmbeddedServer(config)
    serving = asyncio.create_task(_serve(server, f"{settings.web_host}:{settings.web_port}"))
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        server.should_exit = True  # closes the listening sockets, lets open requests finish
    await serving


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its own SIGINT/SIGTERM handlers.

    uvicorn would replace the process's handlers while serving and re-raise the signal when done; here
    :func:`run_forever`'s handlers stay in charge and stop the server through ``should_exit``.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave the signal handlers alone."""
        yield


def web_port_problem(host: str, port: int) -> str | None:
    """Why the web server could not listen on ``host:port`` (taken, not allowed, no such address); None
    when it can. Binds and closes a socket on each of the host's addresses, as uvicorn will: ``papertrail
    run`` asks before it starts anything, so that a taken port is said at once and on the last line,
    not after the other roles started and stopped again."""
    where = f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"cannot listen on {where}: the host is not known ({exc.strerror or exc})"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            # As uvicorn (asyncio) does: a port whose old connections linger in TIME_WAIT is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                taken = exc.errno == errno.EADDRINUSE
                return f"cannot listen on {where}: {reason}" + (
                    " (another process listens there: another `papertrail run`?)" if taken else ""
                )
    return None


# What to do about it; the other roles as --role takes them.
WEB_PORT_HINT = (
    "set PAPERTRAIL_WEB_PORT (or PAPERTRAIL_WEB_HOST), "
    f"or leave out the web role (--role {','.join(r for r in ROLES if r != 'web')})"
)


async def _serve(server: EmbeddedServer, where: str) -> None:
    try:
        await server.serve()
    except SystemExit:  # uvicorn exits the process when it cannot listen; one role must not do that
        # Taken since papertrail run checked it: ask again, so that the reason is in this message.
        config = server.config
        reason = web_port_problem(config.host, config.port) or f"the web server could not start on {where}"
        raise RoleError(f"{reason}; {WEB_PORT_HINT}") from None
    if not server.started:
        raise RoleError(f"the web server on {where} did not start (see the error above)")


async def bots_role(ctx: AppContext, stop: asyncio.Event) -> None:
    """The chat bots until ``stop``: Telegram (long polling, or its webhook registered and served by the
    web role) and Slack in Socket Mode (in HTTP mode the web role serves Slack's endpoint)."""
    from notifiers.slack.chat import SlackSetupError, uses_socket_mode
    from notifiers.telegram.chat import TelegramBotError

    async def telegram(bot: TelegramBot) -> None:
        try:
            await bot.run(stop)
        except TelegramBotError as exc:
            raise RoleError(f"the Telegram bot cannot run: {exc}") from None

    async def slack() -> None:
        try:
            await ctx.slack_bot().run_socket_mode(stop)
        except SlackSetupError as exc:
            raise RoleError(f"the Slack app cannot run: {exc}") from None

    running: list[Awaitable[None]] = []
    telegram_bot = ctx.telegram_bot()
    if telegram_bot is not None:
        running.append(telegram(telegram_bot))
    if uses_socket_mode(ctx.settings.slack_bot()):
        running.append(slack())
    if not running:
        log.info(
            "bots: no Telegram bot (set PAPERTRAIL_TELEGRAM_TOKEN) and no Slack Socket Mode "
            "(set PAPERTRAIL_SLACK_APP_TOKEN; in HTTP mode the web role serves /slack/events); "
            "digests to telegram: and slack: addresses still go out through the worker",
            extra={"role": "bots"},
        )
        return
    await asyncio.gather(*running)


RUNNERS: dict[str, Role] = {
    "scheduler": scheduler_role,
    "bots": bots_role,
    "web": web_role,
    "worker": worker_role,
}


# -- the process ---------------------------------------------------------------------------------------


async def run_forever(
    ctx: AppContext,
    stop: asyncio.Event | None = None,
    roles: Sequence[str] = ROLES,
    *,
    grace: float = STOP_GRACE,
    runners: dict[str, Role] | None = None,
) -> None:
    """Run ``roles`` until ``stop`` is set, a SIGINT/SIGTERM arrives, or a role fails.

    Raises :class:`RoleFailed` when a role failed (after stopping the others the same clean way).
    """
    stop = stop or asyncio.Event()
    hurry = asyncio.Event()
    table = runners or RUNNERS
    with _stop_on_signals(stop, hurry):
        group = _RoleGroup(
            {asyncio.create_task(table[role](ctx, stop), name=f"papertrail-{role}"): role for role in roles}
        )
        log.info("PaperTrail running: %s; Ctrl-C or SIGTERM to stop", ", ".join(roles))
        try:
            await group.until_stopped(stop)
            log.info("stopping: no new work; up to %g s for the work in flight", grace)
            # A source or the LLM endpoint in a back-off before a retry (2, 4, 8 s; a Retry-After up to
            # PAPERTRAIL_HTTP_MAX_RETRY_WAIT) is not work in flight: its run ends now with the error it
            # had, instead of holding the stop for the retries.
            _stop_retrying(ctx)
            await group.drain(grace, hurry)
        finally:
            group.cancel()  # only reached with tasks left when run_forever itself was cancelled
    if group.failure is not None:
        role, exc = group.failure
        raise RoleFailed(f"the {role} role failed: {exc}") from exc
    log.info("stopped")


class Interrupted(RuntimeError):
    """:func:`run_once`'s work was cancelled by a signal (its clean-up ran); the message names the signal."""


async def run_once(ctx: AppContext, work: Coroutine[Any, Any, T], *, grace: float = STOP_GRACE) -> T:
    """Run one piece of work (``papertrail ingest``) under :func:`run_forever`'s stop rule.

    The first SIGINT/SIGTERM cuts the HTTP and LLM back-offs short and gives the work ``grace`` seconds
    to finish and be recorded; a second signal, or the end of the grace, cancels it: its clean-up runs
    (a source run is closed as interrupted, core.papers.pipeline.close_interrupted) and
    :class:`Interrupted` is raised. Work that finished returns its result, signal or not.
    """
    stop = asyncio.Event()
    hurry = asyncio.Event()
    task = asyncio.ensure_future(work)
    with _stop_on_signals(stop, hurry):
        waiting = asyncio.create_task(stop.wait())
        hurrying = asyncio.create_task(hurry.wait())
        try:
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                log.info("stopping: up to %g s for the work in flight", grace)
                _stop_retrying(ctx)
                await asyncio.wait({task, hurrying}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=CANCEL_GRACE)
        finally:
            waiting.cancel()
            hurrying.cancel()
            if not task.done():  # run_once itself was cancelled
                task.cancel()
    if not task.done() or task.cancelled():
        raise Interrupted("stopped by a signal before it finished")
    return task.result()


def _stop_retrying(ctx: AppContext) -> None:
    """Cut short the back-offs of the context's HTTP and LLM clients (see :func:`run_forever`)."""
    ctx.http.stop_retrying()
    if ctx.guide_model is not None:
        ctx.guide_model.stop_retrying()


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event, hurry: asyncio.Event) -> Iterator[None]:
    """First SIGINT/SIGTERM: ``stop``; the second: ``hurry`` (cancel what is still running)."""
    loop = asyncio.get_running_loop()

    def received(sig: signal.Signals) -> None:
        if not stop.is_set():
            log.info("%s received: stopping", sig.name)
            stop.set()
        else:
            log.warning("%s received again: cancelling the work still in flight", sig.name)
            hurry.set()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Not available off the main thread or on some platforms; Ctrl-C then ends the loop instead.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, received, sig)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


class _RoleGroup:
    """The role tasks of one process, and the first failure among them."""

    def __init__(self, tasks: dict[asyncio.Task[None], str]) -> None:
        self.tasks = tasks
        self.failure: tuple[str, BaseException] | None = None
        self._seen: set[asyncio.Task[None]] = set()

    async def until_stopped(self, stop: asyncio.Event) -> None:
        """Wait for ``stop``; a role that fails sets it. A role that simply returns is left alone."""
        stopping = asyncio.create_task(stop.wait())
        running: set[asyncio.Task[Any]] = set(self.tasks)
        try:
            while not stop.is_set():
                done, running = await asyncio.wait({stopping, *running}, return_when=asyncio.FIRST_COMPLETED)
                running.discard(stopping)
                self._collect(done - {stopping})
                if self.failure is not None:
                    stop.set()
        finally:
            stopping.cancel()

    async def drain(self, grace: float, hurry: asyncio.Event) -> None:
        """Give the roles ``grace`` seconds to finish (less after a second signal), then cancel the rest."""
        deadline = time.monotonic() + grace
        pending: set[asyncio.Task[Any]] = {task for task in self.tasks if not task.done()}
        hurrying = asyncio.create_task(hurry.wait())
        try:
            while pending and not hurry.is_set() and (left := deadline - time.monotonic()) > 0:
                _, pending = await asyncio.wait(
                    {*pending, hurrying}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(hurrying)
        finally:
            hurrying.cancel()
        if pending:
            log.warning(
                "still busy: cancelling %s; a send cancelled half-way stays claimed until its lease runs "
                "out, then another worker sends it",
                ", ".join(sorted(self.tasks[task] for task in pending)),
            )
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=CANCEL_GRACE)
        self._collect({task for task in self.tasks if task.done()})

    def cancel(self) -> None:
        """Cancel every role task still running."""
        for task in self.tasks:
            task.cancel()

    def _collect(self, done: set[asyncio.Task[Any]]) -> None:
        # Log each role's error once and keep the first.
        for task in done - self._seen:
            self._seen.add(task)
            if task.cancelled() or task.exception() is None:
                continue
            exc = task.exception()
            assert exc is not None
            role = self.tasks[task]
            trace = None if isinstance(exc, RoleError) else exc  # a bug gets its traceback
            log.error("the %s role failed: %s", role, exc, exc_info=trace, extra={"role": role})
            self.failure = self.failure or (role, exc)
