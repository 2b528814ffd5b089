"""A check in flight reads as "checking", with the last finished verdict: never as a success.

A source whose every run failed, with one more run in flight (its ingest lock held, as a live ingest holds
it), on the status page in English and Chinese, on its source page, and in ``papertrail status``; on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from core.db import Database
from core.models import RunState, utcnow
from core.papers import run_records
from papertrail.service.ingest_claim import claim_source
from papertrail.web.app import build_app
from tests.support.service_process import service_env
from tests.support.web import web_context

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette 1.x suggests httpx2 for its test client
    from starlette.testclient import TestClient

ERROR = "HTTP 503 from export.arxiv.org; retry later"


@contextmanager
def failures_then_a_check_in_flight(db: Database) -> Iterator[None]:
    """Three failed checks of arxiv-oai, then one in flight for the block: its lock held and its run
    open, as a live ingest has them."""
    now = utcnow()
    for minutes in (90, 60, 30):
        run = run_records.start_run(db, "arxiv-oai", now=now - timedelta(minutes=minutes))
        run_records.finish_run(db, run, RunState.ERROR, now=now - timedelta(minutes=minutes - 1), error=ERROR)
    with claim_source(db, "arxiv-oai"):
        run_records.start_run(db, "arxiv-oai", now=now - timedelta(seconds=5))
        yield


def source_row(page: str, source: str) -> str:
    found = re.search(rf'<tr data-source="{source}" data-state="(\w+)">(.*?)</tr>', page, re.S)
    assert found is not None, page
    return found[1] + " " + found[2]


def test_a_check_in_flight_reads_as_checking_with_the_last_verdict(db: Database, tmp_path: Path) -> None:
    client = TestClient(build_app(web_context(db)))
    with failures_then_a_check_in_flight(db):
        english = source_row(client.get("/?lang=en").text, "arxiv-oai")
        chinese = source_row(client.get("/?lang=zh").text, "arxiv-oai")
        detail = client.get("/sources/arxiv-oai?lang=en").text
        env = service_env(tmp_path, database_url=db.engine.url.render_as_string(hide_password=False))
        shown = subprocess.run(
            [sys.executable, "-m", "papertrail", "status", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        table = subprocess.run(
            [sys.executable, "-m", "papertrail", "status"],
            env={**env, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert english.startswith("checking ") and "✓" not in english and "succeeded" not in english
    assert "⟳ checking…" in english and f"last check: failing — {ERROR}" in english
    assert chinese.startswith("checking ") and "检查中…" in chinese and f"上次检查：故障——{ERROR}" in chinese
    assert "⟳ checking…" in detail and f"last check: failing — {ERROR}" in detail
    assert shown.returncode == 0, shown.stderr
    (source,) = [s for s in json.loads(shown.stdout)["sources"] if s["source"] == "arxiv-oai"]
    assert source["state"] == "checking" and source["reason"] == f"last check: failing — {ERROR}"
    assert source["checking_since"] is not None and source["last_run"] == "error"
    assert table.returncode == 0, table.stderr
    (line,) = [x for x in table.stdout.splitlines() if "arxiv-oai" in x]
    assert "checking" in line and "last check: failing" in line and "ok" not in line.split()


def test_the_banner_and_metrics_keep_the_standing_while_checking(db: Database) -> None:
    client = TestClient(build_app(web_context(db)))
    with failures_then_a_check_in_flight(db):
        page = client.get("/?lang=en").text
        metrics = client.get("/metrics").text
    assert "Broken: arxiv-oai failing" in page  # a check in flight does not make a broken source healthy
    assert 'papertrail_source_state{source="arxiv-oai",state="failing"} 1.0' in metrics
