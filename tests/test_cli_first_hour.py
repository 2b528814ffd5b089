"""Issue 16, "bugs a new user hit", each through the real command line (typer's runner, real SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from papertrail.cli import app

runner = CliRunner()


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
