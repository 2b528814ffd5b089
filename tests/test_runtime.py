"""``papertrail run``: schedules ingest and digests, survives a dead network, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from core.config import Settings
from core.follows import follow
from core.models import RunState
from core.store import Store, make_engine
from papertrail.context import build_context
from papertrail.runtime import run_forever
from tests.conftest import BIG_FEED
from tests.servers import Reply, feed_server, free_port


def test_run_records_source_error_and_stops_on_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PAPERTRAIL_")},
        "PAPERTRAIL_DATABASE_URL": f"sqlite:///{db}",
        "PAPERTRAIL_ARXIV_RSS_URL": f"http://127.0.0.1:{free_port()}/rss/",
        "PAPERTRAIL_HTTP_BACKOFF": "0.01",
        "PAPERTRAIL_HF_API_URL": f"http://127.0.0.1:{free_port()}/api/",
        "PAPERTRAIL_CONFIG": str(tmp_path / "absent.toml"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "papertrail", "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        runs: list[object] = []
        while time.monotonic() < deadline and not runs:
            time.sleep(0.5)
            if db.exists():
                try:
                    runs = [
                        r
                        for r in Store(make_engine(f"sqlite:///{db}")).latest_runs()
                        if r.state == RunState.ERROR
                    ]
                except Exception:  # the schema may still be migrating
                    runs = []
        assert runs, "no error run was recorded"
        assert proc.poll() is None, "the service must keep running after a source error"
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    assert "cannot connect" in output and "stopped" in output


async def test_run_forever_ingests_and_sends_instant_digests(tmp_path: Path) -> None:
    out = io.StringIO()
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/rt.db",
            arxiv_rss_url=server.url,
            hf_api_url=f"http://127.0.0.1:{free_port()}/api/",
            http_backoff=0.01,
            digest_check_seconds=1,
        )
        ctx = build_context(settings, console=out)
        follow(ctx.store, "console:me", "cat:cs.DC", schedule="instant")
        stop = asyncio.Event()
        task = asyncio.create_task(run_forever(ctx, stop))
        for _ in range(120):
            await asyncio.sleep(0.25)
            if "--- digest for console:me ---" in out.getvalue():
                break
        stop.set()
        await asyncio.wait_for(task, 30)
        await ctx.aclose()
    assert "Why: category cs.DC" in out.getvalue()


async def test_a_long_retry_after_pauses_that_source(tmp_path: Path) -> None:
    from papertrail.runtime import ingest_all

    with feed_server(Reply(429, b"slow down", {"Retry-After": "3600"})) as server:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path}/ra.db",
            arxiv_rss_url=server.url,
            hf_api_url=f"http://127.0.0.1:{free_port()}/api/",
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
