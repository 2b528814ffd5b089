"""Snapshot backfill: the recorded snapshot sample, plain and gzip, stored as history with a run record."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.db import Database
from core.follows import match_records
from core.overview import dashboard_records
from core.papers import paper_records, run_records
from papertrail.cli.app import app
from papertrail.cli.backfill import snapshot_batches
from tests.conftest import CORPUS

SAMPLE = CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"


def expected_versions() -> int:
    return sum(len(json.loads(line)["versions"]) for line in SAMPLE.read_text(encoding="utf-8").splitlines())


def test_batches_cover_every_version_and_report_position(tmp_path: Path) -> None:
    packed = tmp_path / "sample.jsonl.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    positions: list[int] = []
    batches = list(snapshot_batches(packed, positions.append))
    assert sum(len(b.papers) for b in batches) == expected_versions()
    assert positions[-1] == packed.stat().st_size


@pytest.mark.parametrize("packed", [False, True], ids=["jsonl", "jsonl.gz"])
def test_cli_backfill_is_history_and_idempotent(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, packed: bool
) -> None:
    path = SAMPLE
    if packed:
        path = tmp_path / "snapshot.json.gz"
        path.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", str(sqlite_store.engine.url))
    runner = CliRunner()
    first = runner.invoke(app, ["backfill", "snapshot", str(path)])
    assert first.exit_code == 0, first.stderr
    total = expected_versions()
    assert f"{total} versions read, 0 already known" in first.stdout
    again = runner.invoke(app, ["backfill", "snapshot", str(path)])
    assert f"{total} already known" in again.stdout
    summary = dashboard_records.status(sqlite_store)
    assert summary.versions == total and summary.papers == 200
    assert (summary.new_papers_24h, summary.revisions_24h) == (0, 0)  # history, not news
    assert match_records.unmatched_versions(sqlite_store) == []
    first_run, second_run = reversed(run_records.latest_runs(sqlite_store, 2))
    assert first_run.note == f"{total} versions stored as history" and first_run.state == "ok"
    assert second_run.duplicates == total
    # The backfill's papers wait for the search indexer; `papertrail index` writes their entries now.
    assert "search: 200 papers to index" in first.stdout and "papertrail index" in first.stdout
    status = runner.invoke(app, ["status", "--json"])
    assert json.loads(status.stdout)["search_index"] == {"waiting": 200}
    indexed = runner.invoke(app, ["index"])
    assert indexed.exit_code == 0, indexed.stderr
    assert "search index: 200 papers to index" in indexed.stdout and "200 papers indexed" in indexed.stdout
    assert paper_records.search_backlog(sqlite_store) == 0
    assert runner.invoke(app, ["index"]).stdout.strip() == "search index: up to date"


def test_cli_backfill_missing_file(sqlite_store: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", str(sqlite_store.engine.url))
    result = CliRunner().invoke(app, ["backfill", "snapshot", "/nonexistent/snapshot.json"])
    assert result.exit_code == 2 and "is not a file" in result.stderr


def _broken(tmp_path: Path, kind: str) -> Path:
    """The recorded sample gzipped, then broken: cut short, or with bytes of its deflate data overwritten."""
    packed = bytearray(gzip.compress(SAMPLE.read_bytes()))
    path = tmp_path / f"{kind}.jsonl.gz"
    if kind == "truncated":
        path.write_bytes(packed[: len(packed) // 3])
    elif kind == "corrupt":
        packed[5000:5100] = b"x" * 100
        path.write_bytes(packed)
    else:  # "header": the gzip magic, then a compression method gzip does not know
        packed[2] = 0x99
        path.write_bytes(packed)
    return path


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("truncated", "the gzip stream ends early (the file is cut short"),
        ("corrupt", "the gzip data is corrupt (Error -3 while decompressing data"),
        ("header", "it is not valid gzip (Unknown compression method)"),
    ],
)
def test_cli_backfill_of_a_broken_gzip_says_what_is_wrong_and_that_nothing_was_stored(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str, problem: str
) -> None:
    # A truncated file printed only "Aborted." (click's answer to EOFError), a corrupt one a
    # zlib/BadGzipFile traceback.
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", str(sqlite_store.engine.url))
    path = _broken(tmp_path, kind)
    result = CliRunner().invoke(app, ["backfill", "snapshot", str(path)])
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert f"error: {path}: unreadable " in message and problem in message
    assert message.endswith("; nothing was stored"), message
    assert "Aborted" not in result.output and "Traceback" not in result.output
    assert dashboard_records.status(sqlite_store).versions == 0
    (run,) = run_records.latest_runs(sqlite_store, 1)
    assert run.state == "error"  # the run record says it failed too


def test_cli_backfill_of_a_truncated_gzip_says_what_it_stored_before(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", str(sqlite_store.engine.url))
    monkeypatch.setattr("papertrail.cli.backfill.BATCH_VERSIONS", 20)  # so batches are stored before the cut
    path = _broken(tmp_path, "truncated")
    result = CliRunner().invoke(app, ["backfill", "snapshot", str(path)])
    assert result.exit_code == 1
    stored = dashboard_records.status(sqlite_store).versions
    assert stored > 0
    message = " ".join(result.stderr.split())
    assert f"; {stored:,} versions from the lines before it were stored as history" in message
    again = CliRunner().invoke(app, ["backfill", "snapshot", str(path)])
    assert "nothing new was stored (" in " ".join(again.stderr.split())
    assert dashboard_records.status(sqlite_store).versions == stored
