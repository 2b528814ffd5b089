"""One ingest of a source at a time, and no source run left ``running`` by a process that is gone.

Real ``papertrail ingest`` processes against the loopback feed server serving the recorded arXiv feed, on
SQLite and PostgreSQL: two at once (the second is refused clearly or both succeed; every version stored
once), Ctrl-C mid-run (the run is closed), SIGKILL mid-run (the next run or ``papertrail status`` closes the
run the dead process left).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from core.config import Settings
from core.db import Database
from core.models import RunState, SourceRun
from papertrail.service.context import AppContext, build_context
from papertrail.service.ingest_claim import ABANDONED, SourceBusy, claim_source
from papertrail.service.leader import lock_for
from papertrail.service.runtime import Jobs
from tests.conftest import BIG_FEED
from tests.servers import Reply, closed_port, feed_server
from tests.support.service_process import service_env, wait_until

FEED = BIG_FEED.read_bytes()


def ingest(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """A ``papertrail ingest`` process (arxiv-rss unless ``args`` say otherwise)."""
    return subprocess.Popen(
        [sys.executable, "-m", "papertrail", "ingest", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def runs(db: Database) -> list[SourceRun]:
    """Every source run, oldest first."""
    with db.session() as session:
        return list(session.exec(select(SourceRun).order_by(col(SourceRun.id))))


def versions(db: Database) -> tuple[int, int]:
    """(stored versions, distinct (paper, number) pairs among them)."""
    with db.engine.connect() as conn:
        total = conn.execute(sa.text("SELECT count(*) FROM version")).scalar_one()
        distinct = conn.execute(
            sa.text("SELECT count(*) FROM (SELECT DISTINCT paper_id, number FROM version) AS v")
        ).scalar_one()
    return int(total), int(distinct)


def running_run(db: Database) -> SourceRun | None:
    """The run a live ingest has open, once it has one."""
    return next((run for run in runs(db) if run.state == RunState.RUNNING), None)


def started(proc: subprocess.Popen[str], db: Database) -> None:
    """Wait until ``proc`` has its run open; fail with its output if it exits first or takes too long."""
    if not wait_until(lambda: running_run(db) or proc.poll() is not None, timeout=180):
        proc.kill()
    assert running_run(db) is not None, f"the ingest never started its run: {proc.communicate()}"


@contextmanager
def slow_feed(delay: float) -> Iterator[str]:
    """The recorded feed, each answer ``delay`` seconds late; yields its URL."""
    with feed_server(Reply(200, FEED, delay=delay)) as server:
        yield server.url


def environment(tmp_path: Path, db: Database, feed_url: str) -> dict[str, str]:
    url = db.engine.url.render_as_string(hide_password=False)
    return service_env(tmp_path, database_url=url, arxiv_rss_url=feed_url)


def test_two_ingests_at_once_one_is_refused_clearly_or_both_succeed(db: Database, tmp_path: Path) -> None:
    # Each answer comes 3 s late, so the two processes (started together) are in flight at the same time.
    with slow_feed(3.0) as feed:
        env = environment(tmp_path, db, feed)
        procs = [ingest(env), ingest(env)]
        results = [(proc.wait(timeout=120), *proc.communicate()) for proc in procs]
    for code, _, err in results:
        assert "Traceback" not in err and "IntegrityError" not in err, err
        assert code in (0, 75), err
    assert any(code == 0 for code, _, _ in results)
    for code, out, err in results:
        if code == 75:  # the operator is told what happened, and that nothing failed
            assert "another ingest of this source is running" in err and "nothing was done" in err
        else:
            assert "arxiv-rss: ok" in out
    done = runs(db)
    assert done and all(run.state != RunState.RUNNING for run in done)
    assert all(run.state == RunState.OK for run in done), [(r.state, r.error) for r in done]
    total, distinct = versions(db)
    # Every version stored once, and counted once: as new by exactly one run.
    assert total == distinct > 1000
    assert sum(run.new_papers + run.revisions for run in done) == total


def test_a_claimed_source_refuses_a_second_claim_and_frees_itself(db: Database) -> None:
    with claim_source(db, "arxiv-rss"):
        busy = pytest.raises(SourceBusy, match="another ingest of this source is running")
        with busy, claim_source(db, "arxiv-rss"):
            pass
        with claim_source(db, "hf-daily"):  # another source is another lock
            pass
    with claim_source(db, "arxiv-rss"):
        pass


def test_sigint_mid_run_lets_the_run_finish_and_closes_it(db: Database, tmp_path: Path) -> None:
    with slow_feed(2.0) as feed:
        proc = ingest(environment(tmp_path, db, feed))
        try:
            started(proc, db)
            proc.send_signal(signal.SIGINT)  # Ctrl-C while the feed is on its way
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        _, err = proc.communicate()
    assert "Traceback" not in err, err
    assert code == 0, err  # as `papertrail run`: the work in flight finishes and is recorded
    (run,) = runs(db)
    assert run.state == RunState.OK and run.finished_at is not None and run.new_papers + run.revisions > 1000


def test_second_sigint_cancels_and_the_run_is_closed_as_interrupted(db: Database, tmp_path: Path) -> None:
    with slow_feed(60.0) as feed:  # a feed that does not answer in time
        proc = ingest(environment(tmp_path, db, feed))
        try:
            started(proc, db)
            proc.send_signal(signal.SIGINT)
            assert wait_until(lambda: False, timeout=0.5) is None
            proc.send_signal(signal.SIGINT)  # the impatient second Ctrl-C: cancel now
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        _, err = proc.communicate()
    assert "Traceback" not in err, err
    assert code == 130 and "stopped by a signal" in err, err
    (run,) = runs(db)
    assert run.state == RunState.ERROR and run.finished_at is not None
    assert run.error is not None and run.error.startswith("interrupted")


@pytest.mark.parametrize("closer", ["status", "ingest"])
def test_a_sigkilled_ingest_run_is_closed_by_the_next_reader(
    closer: str, db: Database, tmp_path: Path
) -> None:
    with slow_feed(60.0) as feed:
        env = environment(tmp_path, db, feed)
        proc = ingest(env)
        try:
            started(proc, db)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        proc.communicate()
        if db.engine.dialect.name == "postgresql":  # the server lets the lock go with the connection
            assert wait_until(lambda: lock_free(db), timeout=30)
        assert running_run(db) is not None  # nobody closed it: the process had no chance
    with feed_server(Reply(200, FEED)) as fresh:
        env["PAPERTRAIL_ARXIV_RSS_URL"] = fresh.url
        args = ["status", "--json"] if closer == "status" else ["ingest"]
        done = subprocess.run(
            [sys.executable, "-m", "papertrail", *args], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    first, *later = runs(db)
    assert first.state == RunState.ERROR and first.error == ABANDONED and first.finished_at is not None
    assert all(run.state == RunState.OK for run in later)
    if closer == "status":
        (source,) = [s for s in json.loads(done.stdout)["sources"] if s["source"] == "arxiv-rss"]
        assert (
            source["checking_since"] is None
            and source["state"] == "failing"
            and "abandoned" in source["reason"]
        )


def lock_free(db: Database) -> bool:
    """Whether no session holds arxiv-rss's ingest lock (taken and given back at once to find out)."""
    lock = lock_for(db.engine, "papertrail-ingest/arxiv-rss")
    if not lock.try_acquire():
        return False
    lock.release()
    return True


def service_context(db: Database, feed_url: str) -> AppContext:
    """The service's context over ``store`` with the feed at ``feed_url`` (the other sources unreachable)."""
    return build_context(
        Settings(
            database_url=db.engine.url.render_as_string(hide_password=False),
            arxiv_rss_url=feed_url,
            hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
            arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
        )
    )


async def test_the_scheduler_skips_a_source_another_process_ingests(db: Database) -> None:
    with feed_server(Reply(200, FEED)) as server:
        ctx = service_context(db, server.url)
        try:
            with claim_source(db, "arxiv-rss"):  # as a `papertrail ingest` elsewhere holds it
                await Jobs(ctx).ingest("arxiv-rss")
            skipped = (len(server.requests), len(runs(db)))
            await Jobs(ctx).ingest("arxiv-rss")
        finally:
            await ctx.aclose()
    assert skipped == (0, 0)
    assert [run.state for run in runs(db)] == [RunState.OK]


async def test_a_scheduled_ingest_cancelled_mid_fetch_closes_its_run(db: Database) -> None:
    # What `papertrail run` does to work still running at the end of its grace period.
    with slow_feed(60.0) as feed:
        ctx = service_context(db, feed)
        try:
            job = asyncio.create_task(Jobs(ctx).ingest("arxiv-rss"))
            while running_run(db) is None and not job.done():
                await asyncio.sleep(0.05)
            job.cancel()
            with pytest.raises(asyncio.CancelledError):
                await job
        finally:
            await ctx.aclose()
    (run,) = runs(db)
    assert run.state == RunState.ERROR and run.error == "interrupted (CancelledError) before it finished"
    assert lock_free(db)
