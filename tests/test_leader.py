"""One scheduler per store: a second one waits, and takes over when the leader goes.

PostgreSQL: two real ``papertrail run --role scheduler`` processes on one database, and the advisory lock
seen from the server's side. SQLite: two schedulers in one process on one file (flock conflicts between
two open files even within a process).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from core.config import Settings
from core.db import Database
from core.models import RunState
from core.papers import run_records
from papertrail.service.context import build_context
from papertrail.service.leader import FileLock, PostgresLock, PrivateLock, lock_for, lock_key
from papertrail.service.runtime import scheduler_role
from tests.conftest import CORPUS
from tests.servers import Reply, closed_port, feed_server
from tests.support.service_process import ServiceProcess, service_env, wait_until

EMPTY_FEED = CORPUS / "arxiv-rss" / "aioarxiv_empty_rss_mock_feed.xml"


def rss_runs(db: Database) -> list[str]:
    """States of the finished arxiv-rss runs, oldest first."""
    return [
        r.state
        for r in reversed(run_records.latest_runs(db, 100))
        if r.source == "arxiv-rss" and r.finished_at
    ]


def test_lock_key_is_a_fixed_signed_64_bit_number() -> None:
    key = lock_key("papertrail-scheduler/public")
    assert key == lock_key("papertrail-scheduler/public") != lock_key("papertrail-scheduler/other")
    assert -(2**63) <= key < 2**63


@pytest.mark.db
def test_lock_fits_the_database(tmp_path: Path) -> None:
    file_lock = lock_for(sa.create_engine(f"sqlite:///{tmp_path}/x.db"))
    assert isinstance(file_lock, FileLock) and file_lock.path == tmp_path / "x.db.scheduler.lock"
    assert isinstance(lock_for(sa.create_engine("sqlite://")), PrivateLock)


def test_two_scheduler_processes_on_postgres_one_leads_the_other_takes_over(
    pg_store: Database, postgres_url: str, tmp_path: Path
) -> None:
    with feed_server(Reply(200, EMPTY_FEED.read_bytes())) as server:
        dead = f"http://127.0.0.1:{closed_port()}"
        env = service_env(
            tmp_path,
            database_url=postgres_url,
            arxiv_rss_url=server.url,
            hf_api_url=f"{dead}/api/",
            arxiv_api_url=f"{dead}/api/query",
            http_backoff="0.01",
            log_format="json",
        )
        services = [ServiceProcess(["run", "--role", "scheduler"], env) for _ in range(2)]
        try:
            leading = wait_until(lambda: [s for s in services if "scheduler: leading" in s.output])
            assert leading and len(leading) == 1, [s.output for s in services]
            leader = leading[0]
            follower = services[1 - services.index(leader)]
            follower.wait_for_line("scheduler: waiting, another scheduler leads")
            assert wait_until(lambda: len(rss_runs(pg_store)) == 1)
            assert len(server.requests) == 1  # the leader's; the follower fetches nothing while it waits
            assert leader.stop() == 0, leader.output
            assert '"message": "stopped"' in leader.output
            follower.wait_for_line("scheduler: leading")
            assert wait_until(lambda: len(rss_runs(pg_store)) == 2), follower.output
            assert len(server.requests) == 2
            assert follower.stop() == 0, follower.output
        finally:
            for service in services:
                service.kill()
    for service in services:  # every line of both processes is one JSON object
        for line in service.lines:
            assert {"time", "level", "logger", "message"} <= json.loads(line).keys(), line


def test_postgres_lock_is_visible_and_goes_with_its_connection(pg_store: Database) -> None:
    first, second = PostgresLock(pg_store.engine), PostgresLock(pg_store.engine)
    try:
        assert first.try_acquire() and not second.try_acquire()
        assert first.key is not None and first.still_held()
        with pg_store.engine.connect() as conn:
            # A bigint advisory key shows in pg_locks as (classid, objid) = its high and low 32 bits.
            holder = conn.execute(
                sa.text(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND classid = :high AND objid = :low AND objsubid = 1"
                ),
                {"high": (first.key >> 32) & 0xFFFFFFFF, "low": first.key & 0xFFFFFFFF},
            ).scalar_one()
            # The leader's connection goes away (a crash, a restarted server): the lock goes with it.
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": holder})
        assert wait_until(second.try_acquire, timeout=10)
        assert not first.still_held()
    finally:
        first.release()
        second.release()


@pytest.mark.db
async def test_sqlite_file_lock_one_scheduler_leads_and_the_other_takes_over(tmp_path: Path) -> None:
    with feed_server(Reply(200, EMPTY_FEED.read_bytes())) as server:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/lead.db",
            arxiv_rss_url=server.url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
            http_backoff=0.01,
        )
        contexts = [build_context(settings), build_context(settings)]
        stops = [asyncio.Event(), asyncio.Event()]
        first = asyncio.create_task(scheduler_role(contexts[0], stops[0], poll=0.05))
        try:
            assert await async_wait(lambda: len(server.requests) == 1)
            second = asyncio.create_task(scheduler_role(contexts[1], stops[1], poll=0.05))
            await asyncio.sleep(0.5)  # ten polls of the second scheduler
            assert len(server.requests) == 1 and not second.done()
            stops[0].set()
            await asyncio.wait_for(first, 10)
            assert await async_wait(lambda: len(server.requests) == 2)
            stops[1].set()
            await asyncio.wait_for(second, 10)
        finally:
            for stop in stops:
                stop.set()
            for ctx in contexts:
                await ctx.aclose()
    assert rss_runs(contexts[0].db) == [RunState.EMPTY, RunState.EMPTY]


async def async_wait(probe: object, timeout: float = 10.0) -> bool:
    """Poll ``probe()`` (a callable) every 20 ms until it is true, at most ``timeout`` seconds."""
    assert callable(probe)
    for _ in range(int(timeout / 0.02)):
        if probe():
            return True
        await asyncio.sleep(0.02)
    return False
