"""``papertrail run``: roles, the scheduler's jobs, a dead network survived, a clean stop on SIGTERM."""

from __future__ import annotations

import asyncio
import io
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from typer.testing import CliRunner

from core.config import Settings
from core.db import Database, make_engine
from core.follows.manage import follow
from core.models import RunState
from core.papers import run_records
from papertrail.cli.app import app
from papertrail.service.context import AppContext, build_context
from papertrail.service.runtime import (
    ANNOUNCEMENT,
    NEW_YORK,
    ROLES,
    Jobs,
    RoleError,
    RoleFailed,
    add_jobs,
    parse_roles,
    run_forever,
    web_port_problem,
    web_role,
)
from tests.conftest import BIG_FEED, CORPUS
from tests.servers import Reply, closed_port, feed_server, free_port, serving
from tests.support.due_digests import seed_due_digests
from tests.support.service_process import ServiceProcess, service_env, wait_until

# The tests start the service's roles on local ports and processes (left out of `make test-quick`).
pytestmark = pytest.mark.net

EMPTY_FEED = CORPUS / "arxiv-rss" / "aioarxiv_empty_rss_mock_feed.xml"


def test_the_service_runs_every_role_survives_a_dead_network_and_stops_on_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    port = free_port()
    dead = f"http://127.0.0.1:{closed_port()}"
    env = service_env(
        tmp_path,
        database_url=f"sqlite:///{db}",
        arxiv_rss_url=f"{dead}/rss/",
        hf_api_url=f"{dead}/api/",
        arxiv_api_url=f"{dead}/api/query",
        http_backoff="0.01",
        web_port=str(port),
    )
    service = ServiceProcess(["run"], env)
    try:

        def error_runs() -> list[object]:
            try:
                return [
                    r
                    for r in run_records.latest_runs(Database(make_engine(f"sqlite:///{db}")))
                    if r.state == RunState.ERROR
                ]
            except Exception:  # the schema may still be migrating
                return []

        assert wait_until(error_runs, timeout=60), service.output
        service.wait_for_line(f"running on http://127.0.0.1:{port}")
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        assert health.status_code == 200 and health.text == "ok"
        assert service.proc.poll() is None, "the service must keep running after a source error"
        code = service.stop()
    finally:
        service.kill()
    assert code == 0, service.output
    assert "cannot connect" in service.output and "bots: no Telegram bot" in service.output
    assert re.search(r"worker \S+ started", service.output) and "stopped" in service.output


async def test_run_forever_ingests_and_sends_instant_digests(tmp_path: Path) -> None:
    out = io.StringIO()
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/rt.db",
            arxiv_rss_url=server.url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            http_backoff=0.01,
            digest_check_seconds=1,
        )
        ctx = build_context(settings, console=out)
        follow(ctx.db, "console:me", "cat:cs.DC", schedule="instant")
        stop = asyncio.Event()
        task = asyncio.create_task(run_forever(ctx, stop, roles=("scheduler", "worker")))
        for _ in range(120):
            await asyncio.sleep(0.25)
            if "--- digest for console:me ---" in out.getvalue():
                break
        stop.set()
        await asyncio.wait_for(task, 30)
        await ctx.aclose()
    assert "Why: category cs.DC" in out.getvalue()


@contextmanager
def slow_feed(body: bytes, delay: float) -> Iterator[tuple[str, list[float]]]:
    """A feed server that waits ``delay`` seconds before answering; yields its URL and the arrival times."""
    arrivals: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            arrivals.append(time.monotonic())
            time.sleep(delay)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with serving(server):
        yield f"http://127.0.0.1:{server.server_address[1]}/rss/", arrivals


async def test_stopping_lets_an_ingest_in_flight_finish_and_be_recorded(tmp_path: Path) -> None:
    with slow_feed(EMPTY_FEED.read_bytes(), delay=1.0) as (url, arrivals):
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/inflight.db",
            arxiv_rss_url=url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            http_backoff=0.01,
        )
        ctx = build_context(settings)
        stop = asyncio.Event()
        task = asyncio.create_task(run_forever(ctx, stop, roles=("scheduler",)))
        try:
            for _ in range(250):
                if arrivals:
                    break
                await asyncio.sleep(0.02)
            assert len(arrivals) == 1  # the feed request is on the wire
            stop.set()
            await asyncio.wait_for(task, 30)
        finally:
            await ctx.aclose()
    runs = [r for r in run_records.latest_runs(ctx.db) if r.source == "arxiv-rss"]
    assert [(r.state, r.finished_at is not None) for r in runs] == [(RunState.EMPTY, True)]


async def test_stopping_cuts_the_retry_back_off_short(tmp_path: Path) -> None:
    """A stop during a source's back-off ends its run at once with the error it had, instead of
    sitting out the retries (3 more after a 503 with Retry-After: 5 would hold the stop for 15 s)."""
    with feed_server(Reply(503, b"busy", {"Retry-After": "5"})) as server:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/backoff.db",
            arxiv_rss_url=server.url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            http_retries=3,
        )
        ctx = build_context(settings)
        stop = asyncio.Event()
        task = asyncio.create_task(run_forever(ctx, stop, roles=("scheduler",)))
        try:
            for _ in range(500):
                if server.requests:
                    break
                await asyncio.sleep(0.02)
            assert len(server.requests) == 1  # answered 503: the source now waits 5 s to retry
            await asyncio.sleep(0.3)
            started = time.monotonic()
            stop.set()
            await asyncio.wait_for(task, 30)
            took = time.monotonic() - started
        finally:
            await ctx.aclose()
    # Generous: the point is "not after the retries" (15 s), not a timing benchmark.
    assert took < 5, f"the stop waited {took:.1f} s for the back-off"
    assert len(server.requests) == 1  # nothing retried after the stop
    (run,) = [r for r in run_records.latest_runs(ctx.db) if r.source == "arxiv-rss"]
    assert run.state == RunState.ERROR and run.finished_at is not None and "503" in (run.error or "")


async def test_a_long_retry_after_pauses_that_source(tmp_path: Path) -> None:
    from papertrail.service.runtime import ingest_all

    with feed_server(Reply(429, b"slow down", {"Retry-After": "3600"})) as server:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/ra.db",
            arxiv_rss_url=server.url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            http_backoff=0.01,
            http_max_retry_wait=5,
        )
        ctx = build_context(settings)
        try:
            await ingest_all(ctx)
            await ingest_all(ctx)  # within the hour: arXiv is not asked again
        finally:
            await ctx.aclose()
    assert len(server.requests) == 1
    assert "arxiv-rss" in ctx.not_before


async def test_a_failed_delivery_pass_is_logged_and_the_worker_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from papertrail.service.worker import run_worker

    out = io.StringIO()
    ctx = build_context(
        Settings(database_url=f"sqlite:///{tmp_path}/w.db", digest_check_seconds=1), console=out
    )
    seed_due_digests(ctx.db.engine, 1)
    with ctx.db.engine.begin() as conn:  # the ledger's table disappears for a moment
        conn.exec_driver_sql("ALTER TABLE digest RENAME TO digest_away")
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(ctx, stop=stop, handle_signals=False))
    try:
        for _ in range(250):
            if "delivery pass failed" in caplog.text:
                break
            await asyncio.sleep(0.02)
        assert "delivery pass failed; next try in 1 s" in caplog.text and not task.done()
        with ctx.db.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE digest_away RENAME TO digest")
        for _ in range(250):
            if "--- digest for console:s00000 ---" in out.getvalue():
                break
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        totals = await asyncio.wait_for(task, 10)
        await ctx.aclose()
    assert totals.sent == 1 and "--- digest for console:s00000 ---" in out.getvalue()


@pytest.mark.parametrize(
    ("given", "roles"),
    [
        ([], ROLES),
        (["all"], ROLES),
        (["worker,scheduler"], ("scheduler", "worker")),
        (["web", " Worker ", "web"], ("web", "worker")),
    ],
)
def test_roles_are_comma_separated_or_repeated(given: list[str], roles: tuple[str, ...]) -> None:
    assert parse_roles(given) == roles


def test_an_unknown_role_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{tmp_path}/never.db")
    result = CliRunner().invoke(app, ["run", "--role", "scheduler,mailer"])
    assert result.exit_code == 2
    assert "unknown role 'mailer'" in result.stderr and "scheduler, bots, web, worker" in result.stderr
    assert not (tmp_path / "never.db").exists()  # refused before touching anything


def test_the_scheduler_has_a_named_job_per_cadence(tmp_path: Path) -> None:
    ctx = build_context(Settings(database_url=f"sqlite:///{tmp_path}/jobs.db", ingest_interval_minutes=15))
    try:
        scheduler = AsyncIOScheduler(timezone="UTC")

        async def run(*args: object) -> None:
            pass

        add_jobs(scheduler, Jobs(ctx), run)
        jobs = {job.id: job for job in scheduler.get_jobs()}
    finally:
        asyncio.run(ctx.aclose())
    assert set(jobs) == {"arxiv-rss", "arxiv-rss-announcement", "hf-daily", "search-index"}
    assert "every 15 min" in jobs["arxiv-rss"].name and "every 60 min" in jobs["hf-daily"].name
    assert jobs["arxiv-rss"].trigger.interval.total_seconds() == 15 * 60


def test_the_announcement_runs_fire_at_20_05_and_20_35_new_york_sunday_to_thursday() -> None:
    friday = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    fires = []
    moment = friday
    for _ in range(4):
        moment = ANNOUNCEMENT.get_next_fire_time(None, moment)
        fires.append(moment.astimezone(NEW_YORK))
        moment = moment.replace(second=1)
    # No run on Friday or Saturday evening; Sunday's announcement is the first.
    assert [(f.strftime("%a"), f.hour, f.minute) for f in fires] == [
        ("Sun", 20, 5),
        ("Sun", 20, 35),
        ("Mon", 20, 5),
        ("Mon", 20, 35),
    ]


async def test_a_failing_role_stops_the_others_cleanly(tmp_path: Path) -> None:
    stopped_cleanly = asyncio.Event()

    async def patient(ctx: AppContext, stop: asyncio.Event) -> None:
        await stop.wait()
        stopped_cleanly.set()

    async def broken(ctx: AppContext, stop: asyncio.Event) -> None:
        raise OSError("address already in use")

    ctx = build_context(Settings(database_url=f"sqlite:///{tmp_path}/f.db"))
    try:
        with pytest.raises(RoleFailed, match="the web role failed: address already in use"):
            await run_forever(ctx, roles=("worker", "web"), runners={"worker": patient, "web": broken})
    finally:
        await ctx.aclose()
    assert stopped_cleanly.is_set()


async def test_work_still_running_after_the_grace_period_is_cancelled(tmp_path: Path) -> None:
    cancelled = asyncio.Event()

    async def stubborn(ctx: AppContext, stop: asyncio.Event) -> None:
        try:
            await asyncio.sleep(3600)  # ignores stop, like a send that hangs
        except asyncio.CancelledError:
            cancelled.set()
            raise

    ctx = build_context(Settings(database_url=f"sqlite:///{tmp_path}/g.db"))
    stop = asyncio.Event()
    stop.set()
    try:
        await asyncio.wait_for(
            run_forever(ctx, stop, roles=("worker",), grace=0.2, runners={"worker": stubborn}), 10
        )
    finally:
        await ctx.aclose()
    assert cancelled.is_set()


@contextmanager
def held_port() -> Iterator[int]:
    """A port on 127.0.0.1 another socket listens on, as another `papertrail run` would."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_run_refuses_a_taken_web_port_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reason comes at once and last, not after 19 s twelve lines above the last one."""
    db = tmp_path / "port.db"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{db}")
    with held_port() as port:
        monkeypatch.setenv("PAPERTRAIL_WEB_PORT", str(port))
        started = time.monotonic()
        result = CliRunner().invoke(app, ["run"])
        took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert f"cannot listen on 127.0.0.1:{port}" in last and "in use" in last.lower()
    assert "PAPERTRAIL_WEB_PORT" in last
    assert not db.exists()  # nothing was started, not even the migrations
    assert took < 10  # generous: the point is "not after the other roles started and stopped"


def test_web_port_problem() -> None:
    with held_port() as port:
        assert "in use" in (web_port_problem("127.0.0.1", port) or "").lower()
    assert web_port_problem("127.0.0.1", free_port()) is None


async def test_the_web_role_names_the_reason_when_the_port_went_meanwhile(tmp_path: Path) -> None:
    """Taken between the check and uvicorn's bind: the role's error still says why, not 'the line above'."""
    with held_port() as port:
        ctx = build_context(Settings(database_url=f"sqlite:///{tmp_path}/race.db", web_port=port))
        try:
            with pytest.raises(RoleError, match=f"cannot listen on 127.0.0.1:{port}: .*in use"):
                await asyncio.wait_for(web_role(ctx, asyncio.Event()), 30)
        finally:
            await ctx.aclose()
