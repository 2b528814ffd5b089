"""The README's one-minute tour, step by step as written there, offline, against a temporary SQLite store.

The commands are read from the README's "Try it in one minute" block, so a changed tour is tested as
changed; every step must have a check here saying what real output looks like (papers found, a match, a
digest printed), and a step without one fails the test. "Offline": the autouse loopback guard refuses
any connection off 127.0.0.1, and the live feed's URL points at a loopback port that refuses connections.
"""

from __future__ import annotations

import re
import shlex
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.config import Settings
from papertrail.cli.app import app
from tests.servers import closed_port

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx (installed) works the same here.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

README = Path(__file__).resolve().parents[1] / "README.md"
PAPERTRAIL = ".venv/bin/papertrail"

Check = Callable[[int, str, str], None]


def tour_steps() -> list[list[str]]:
    """The tour's commands as ``papertrail`` arguments (``make demo`` is ``papertrail demo``)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Try it in one minute") :]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start : section.index("```", start)]
    steps: list[list[str]] = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words == ["make", "demo"]:
            steps.append(["demo"])
        elif words:
            assert words[0] == PAPERTRAIL, f"a tour step this test cannot run: {line}"
            steps.append(words[1:])
    return steps


def count(pattern: str, out: str) -> int:
    """The number ``pattern``'s group finds in ``out`` (0 when absent)."""
    found = re.search(pattern, out)
    return int(found.group(1)) if found else 0


def demo(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert "--- digest for console:demo ---" in out and "Why:" in out
    assert re.search(r"and \d+ more", out), "the demo's 10-item cap shows its 'and N more' line"


def demo_load(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert "1504 items" in out and count(r"(\d+) new papers", out) > 900
    # Both of the tour's follows matched the recorded day.
    assert count(r"\((\d+) for subscribers\)", out) > 2


def follow(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert "now follows:" in out


def try_(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert count(r"(\d+) match(?:es)?\b", out) > 0 and "why: title:" in out


def show(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert "https://arxiv.org/abs/" in out and re.search(r"^\s+v1\s+2024-11-2\d", out, re.M)


def digest_now(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert "--- digest for console:me ---" in out and "Why: category cs.DC" in out


def status(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert count(r"(\d+) new papers", out) > 900 and "arxiv-rss" in out and "stale" in out
    # ada's matches are kept, waiting for the email channel, and the reason is given.
    assert "wait for the email channel" in err and "PAPERTRAIL_SMTP_HOST" in err


def ingest(code: int, out: str, err: str) -> None:
    # Offline: the failure and its reason, recorded as a run (the README says so right below the tour).
    assert code == 1 and "cannot connect" in err


CHECKS: dict[str, Check] = {
    "demo": demo,
    "demo --load": demo_load,
    "follow": follow,
    "try": try_,
    "show": show,
    "digest --now": digest_now,
    "status": status,
    "ingest": ingest,
}


def check_for(args: list[str]) -> Check:
    """The check of a step: by command and option (``demo --load``), else by command."""
    two = " ".join(args[:2])
    if two in CHECKS:
        return CHECKS[two]
    assert args[0] in CHECKS, f"the README's tour has a step this test does not check: {args}"
    return CHECKS[args[0]]


@pytest.mark.db
def test_the_readme_tour_runs_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "tour.db"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", f"http://127.0.0.1:{closed_port()}/rss/")
    monkeypatch.setenv("PAPERTRAIL_HTTP_BACKOFF", "0.01")
    steps = tour_steps()
    assert ["demo"] in steps and ["demo", "--load"] in steps and ["digest", "--now"] in steps
    runner = CliRunner()
    for args in steps:
        result = runner.invoke(app, args)
        try:
            check_for(args)(result.exit_code, result.stdout, result.stderr)
        except AssertionError as exc:
            raise AssertionError(
                f"tour step `papertrail {shlex.join(args)}`: {exc}\n{result.stdout}\n{result.stderr}"
            ) from exc
    # A second load stores nothing and says why nothing matched.
    again = runner.invoke(app, ["demo", "--load"])
    assert again.exit_code == 0 and "0 new papers" in again.stdout and "already in this store" in again.stdout
    # The status page of `make run` shows the recorded day too.
    from papertrail.service.context import build_context
    from papertrail.web.app import build_app

    ctx = build_context(Settings())
    try:
        page = TestClient(build_app(ctx)).get("/")
    finally:
        ctx.db.engine.dispose()
    assert page.status_code == 200
    assert re.search(r'data-count="new_24h">9\d\d<', page.text)


def test_the_readme_lists_every_setting() -> None:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Settings") : text.index("## How it fits together")]
    missing = []
    for name in Settings.model_fields:
        words = name.upper().split("_")
        # A row may group settings as `PAPERTRAIL_TELEGRAM_MAX_PER_SECOND` / `_CHAT_INTERVAL`.
        forms = [f"`PAPERTRAIL_{name.upper()}`"] + [f"`_{'_'.join(words[i:])}`" for i in range(1, len(words))]
        if not any(form in table for form in forms):
            missing.append(f"PAPERTRAIL_{name.upper()}")
    assert not missing, f"settings missing from the README's table: {missing}"
