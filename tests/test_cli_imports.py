"""What a ``papertrail`` process imports: ``--help`` loads no database, network or chat library.

Each case runs ``python -m papertrail ...`` in a fresh process (an in-process run would see whatever the
test session imported) and records ``sys.modules`` at exit. The CLI used to import every
adapter for every command, about a second of CPU before ``--help`` printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs the command as `python -m papertrail` does and writes the name of every imported module to the file
# named by argv[1] when the process exits (typer ends with SystemExit; atexit still runs).
_PROBE = """
import atexit, json, runpy, sys
record = sys.argv[1]
def dump():
    with open(record, "w") as file:
        json.dump(sorted(sys.modules), file)
atexit.register(dump)
sys.argv = ["papertrail", *sys.argv[2:]]
runpy.run_module("papertrail", run_name="__main__", alter_sys=True)
"""

# Nothing --help shows needs these: the store (sqlalchemy, sqlmodel, alembic, psycopg), the settings
# (pydantic_settings: the help texts name no setting's value), the network (httpx, aiohttp), the chat
# clients (slack_sdk, slack_bolt, telegram), parsers (feedparser, lxml), templates (jinja2), the
# scheduler and the web server (apscheduler, starlette, uvicorn), and none of PaperTrail's own layers
# below the shell. Allowed: typer and what typer itself loads to print help (click, rich, markdown_it,
# and pydantic, which typer uses to convert parameters), and the standard library.
HEAVY = frozenset(
    {
        "alembic",
        "sqlmodel",
        "sqlalchemy",
        "psycopg",
        "pydantic_settings",
        "aiohttp",
        "httpx",
        "slack_sdk",
        "slack_bolt",
        "telegram",
        "feedparser",
        "lxml",
        "jinja2",
        "apscheduler",
        "starlette",
        "uvicorn",
        "core",
        "ingest",
        "notifiers",
        "bot",
    }
)
# A command that only reads or changes the store opens it alone: no network, chat, parser or scheduler
# library, and no Alembic once the database is at the newest revision.
NOT_FOR_THE_STORE = frozenset(
    {
        "alembic",
        "aiohttp",
        "httpx",
        "slack_sdk",
        "slack_bolt",
        "telegram",
        "feedparser",
        "lxml",
        "apscheduler",
        "starlette",
        "uvicorn",
        "ingest",
        "notifiers.telegram.notifier",
        "bot",
    }
)


def imported(tmp_path: Path, *args: str) -> tuple[set[str], str]:
    """The modules ``papertrail ARGS`` imported, and what it printed; fails on a bad exit."""
    record = tmp_path / "modules.json"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(record), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(record.read_text())), done.stdout


def among(modules: set[str], names: frozenset[str]) -> list[str]:
    """Which of ``names`` (packages or modules) are in ``modules``, themselves or a submodule."""
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


@pytest.mark.parametrize(
    ("args", "shown"),
    [(["--help"], "follow"), (["follow", "--help"], "follow"), (["import", "library", "--help"], "library")],
    ids=["help", "follow-help", "import-library-help"],
)
@pytest.mark.net
def test_help_imports_no_heavy_module(tmp_path: Path, args: list[str], shown: str) -> None:
    modules, out = imported(tmp_path, *args)
    assert "Usage:" in out and shown in out  # the help was printed, not an error
    assert "typer" in modules and "papertrail.cli.app" in modules  # the probe saw the run
    # Every family's sub-app is added to the root app, `import library` (the last command) included.
    assert "papertrail.cli.import_export" in modules
    assert among(modules, HEAVY) == []


@pytest.mark.net
def test_a_store_command_opens_the_store_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{tmp_path}/pt.db")
    first, _ = imported(tmp_path, "follow", "console:ada", "cat:cs.DC")
    assert "alembic" in first  # a new database is migrated (and the probe sees such an import)
    modules, out = imported(tmp_path, "follows", "console:ada")
    assert "1. cat:cs.DC" in out
    assert "sqlalchemy" in modules and "core.db" in modules
    assert among(modules, NOT_FOR_THE_STORE) == []
    # The vote commands (papertrail/cli/votes.py) too.
    modules, out = imported(tmp_path, "likes", "console:ada")
    assert "(no votes)" in out
    assert among(modules, NOT_FOR_THE_STORE) == []
