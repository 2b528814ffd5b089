"""Issue 16, "bugs a new user hit", each through the real command line (typer's runner, real SQLite)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from papertrail.cli import app
from tests.conftest import BIG_FEED
from tests.servers import Reply, feed_server

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    db = tmp_path / "cli.db"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{db}")
    return db


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def one_line(text: str) -> str:
    """``text`` with rich's soft wraps and runs of spaces undone."""
    return " ".join(text.split())


# ----------------------------------------------------------------------------------------------------------
# 3. follow --schedule/--timezone for an existing subscriber


def test_follow_applies_schedule_and_timezone_to_an_existing_subscriber_and_says_so(env: Path) -> None:
    code, out, err = invoke("follow", "console:ada", "cat:cs.DC")
    assert code == 0, err
    code, out, err = invoke(
        "follow", "console:ada", "cat:cs.OS", "--schedule", "weekly MON 9:00", "--timezone", "Europe/Berlin"
    )
    assert code == 0, err
    assert "console:ada: schedule weekly mon 09:00 (Europe/Berlin), was daily 08:00 (UTC)" in one_line(out)
    assert "now follows: cat:cs.OS" in out
    code, out, _ = invoke("follows", "console:ada")
    assert "schedule weekly mon 09:00 (Europe/Berlin)" in out
    # Only what is given changes; the same values again change nothing and say nothing of it.
    code, out, _ = invoke("follow", "console:ada", "cat:cs.OS", "--timezone", "Asia/Tokyo")
    assert "schedule weekly mon 09:00 (Asia/Tokyo), was weekly mon 09:00 (Europe/Berlin)" in one_line(out)
    code, out, _ = invoke("follow", "console:ada", "cat:cs.OS", "--timezone", "Asia/Tokyo")
    assert code == 0 and "was" not in out and "already follows" in out
    # A bad value is refused before anything changes.
    code, _, err = invoke("follow", "console:ada", "cat:cs.LG", "--schedule", "hourly")
    assert code == 2 and "cannot read schedule" in err
    code, out, _ = invoke("follows", "console:ada")
    assert "schedule weekly mon 09:00 (Asia/Tokyo)" in out and "cat:cs.LG" not in out


# ----------------------------------------------------------------------------------------------------------
# 7. digest for an unknown subscriber; 8. a console digest whose output could not be written


def test_digest_for_an_unknown_address_says_so_and_fails(env: Path) -> None:
    invoke("follow", "console:me", "cat:cs.DC")
    code, out, err = invoke("digest", "--now", "email:nobody@example.org")
    assert code == 1 and out == ""
    assert "no subscriber email:nobody@example.org" in one_line(err)
    code, out, err = invoke("digest", "--now", "console:me")
    assert code == 0 and "nothing pending" in out  # a known subscriber with nothing pending is no error


@pytest.fixture
def pending(env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """console:me follows cat:cs.DC, and the recorded feed is ingested: a digest is pending."""
    assert invoke("follow", "console:me", "cat:cs.DC")[0] == 0
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        assert invoke("ingest")[0] == 0
    return env


def test_a_console_digest_that_cannot_be_written_is_not_sent(pending: Path, tmp_path: Path) -> None:
    # Standard output is a pipe whose reader is gone before anything is written: every write fails.
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "papertrail", "digest", "--now"],
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.returncode == 1
    assert "not sent to console:me (will retry): cannot write the digest to standard output" in done.stderr
    assert "Traceback" not in done.stderr and "crashed" not in done.stderr
    code, out, _ = invoke("digest", "--now")  # still pending: it goes out whole the next time
    assert code == 0 and "--- digest for console:me ---" in out and "Why: category cs.DC" in out


class _ReaderLeavesAfterTheDigest(io.StringIO):
    """Standard output whose reader (``| head``) exits once it has read the digest: later writes fail."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = False

    def write(self, text: str) -> int:
        if self.gone:
            raise BrokenPipeError(32, "Broken pipe")
        self.gone = text.startswith("--- digest for")
        return super().write(text)


def test_digest_piped_to_head_says_on_stderr_what_was_recorded(
    pending: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 16: `digest --now | head` exited 1 with nothing said, the digest recorded sent. The reader
    # took the digest whole; only the summary after it found the pipe closed.
    stdout = _ReaderLeavesAfterTheDigest()
    monkeypatch.setattr(sys, "stdout", stdout)
    app(["digest", "--now"], standalone_mode=False)  # no exit code: it succeeded
    assert "--- digest for console:me ---" in stdout.getvalue()
    err = one_line(capsys.readouterr().err)
    assert "standard output was closed before this summary (`| head`?); recorded: sent 19 " in err
    assert "to console:me" in err
    code, out, _ = invoke("digest", "--now")
    assert code == 0 and "nothing pending" in out
