"""Shared fixtures: the loopback guard, real SQLite and PostgreSQL stores, the recorded corpus; the `db` and
`net` marks that `make test-quick` leaves out, and its guard."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from core.db import Database, make_engine
from papertrail.service import channels
from tests.schema_template import apply_template

# Recorded responses: the copies in tests/corpus (see its README), or another corpus folder.
CORPUS = Path(os.environ.get("PAPERTRAIL_CORPUS") or Path(__file__).resolve().parent / "corpus")
BIG_FEED = CORPUS / "arxiv-rss" / "aioarxiv_rss_mock_feed.xml"
POSTGRES_URL = os.environ.get(
    "PAPERTRAIL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)

_LOOPBACK = {"127.0.0.1", "::1", "localhost", "::ffff:127.0.0.1"}
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex

# `make test-quick` sets this: it runs only the tests that touch no database and no network (README,
# Testing), and refuses every connection, SQLAlchemy engine and process so that a test left in that set by
# mistake fails at once instead of slowing the loop down.
QUICK = os.environ.get("PAPERTRAIL_TEST_QUICK") == "1"

# A test that uses one of these fixtures (directly or through another fixture) is marked `db`: each builds a
# database or hands a test one to build (`env` sets PAPERTRAIL_DATABASE_URL for the command-line tests).
# Fixtures of one module count too when they build a database without going through the ones here.
DB_FIXTURES = frozenset(
    {
        "_pg_admin",
        "_pg_ok",
        "db_url",
        "env",
        "pg_store",
        "postgres_url",
        "sqlite_store",
        "sqlite_url",
        "db",
        # of one module each: tests/support/chat_commands.py, test_web.py, test_claim_race.py,
        # test_match_pipeline.py, tests/support/subscription_export.py
        "migrated_template",
        "seeded",
        "file_store",
        "fresh_sqlite",
        "two_servers",
    }
)
# ... and `net` when it uses one of these: each starts a server (fake Telegram, Slack, OpenAI, SMTP, webhook
# receivers), a browser or `papertrail` processes. A module that starts servers inline says so itself:
# `pytestmark = pytest.mark.net`.
# Register the channels as every process does at start-up: tests call core's steps directly, and some
# modules build addresses as they are collected.
channels.install()

NET_FIXTURES = frozenset(
    {
        "api",
        "benches",
        "chromium",
        "fake",
        "llm",
        "mailbox",
        "receiver",
        "receivers",
        "slack",
        "smtp",
        "telegram",
        "telegram_api",
    }
)


@pytest.fixture(scope="session", autouse=True)
def _quick_guard() -> Iterator[None]:
    """In quick mode, refuse connections, engines and processes for the whole session (fixtures of module
    or session scope included), not only inside each test; in the test processes only, since xdist's
    controller starts its workers as processes."""
    if not QUICK:
        yield
        return
    saved = (socket.socket.connect, socket.socket.connect_ex, sa.create_engine)
    saved_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    socket.socket.connect = _quick_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = _quick_connect_ex  # type: ignore[method-assign,assignment]
    sa.create_engine = _quick_create_engine
    # Every way of starting a process (subprocess.run, asyncio's subprocesses) goes through this one.
    subprocess.Popen._execute_child = _quick_execute_child  # type: ignore[attr-defined]
    yield
    socket.socket.connect, socket.socket.connect_ex, sa.create_engine = saved  # type: ignore[method-assign]
    subprocess.Popen._execute_child = saved_child  # type: ignore[attr-defined]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `db` and `net` the tests whose fixtures build a database or start a server."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & DB_FIXTURES:
            item.add_marker(pytest.mark.db)
        if names & NET_FIXTURES:
            item.add_marker(pytest.mark.net)


class QuickModeRefusal(BaseException):
    """What the quick-mode guard raises: a BaseException, so that no `except Exception` of the code under
    test (a retry loop, a notifier's error mapping) swallows it and the test fails with this message."""


def _quick_refusal(what: str) -> QuickModeRefusal:
    return QuickModeRefusal(
        f"{what} in `make test-quick`, which runs only the tests that touch no database and no network and "
        "start no process: "
        "mark this test `db` or `net` (`pytestmark = pytest.mark.net` for its module, or "
        "`@pytest.mark.db` on it), or add the fixture that does it to DB_FIXTURES or NET_FIXTURES in "
        "tests/conftest.py"
    )


def _quick_connect(self: socket.socket, address: Any) -> None:
    raise _quick_refusal(f"connection to {address!r}")


def _quick_connect_ex(self: socket.socket, address: Any) -> int:
    raise _quick_refusal(f"connection to {address!r}")


def _quick_execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any) -> None:
    raise _quick_refusal(f"process {args!r}")


def _quick_create_engine(*args: Any, **kwargs: Any) -> sa.Engine:
    raise _quick_refusal(f"SQLAlchemy engine for {args[0] if args else kwargs.get('url')!r}")


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        if QUICK:
            raise _quick_refusal(f"connection to {address!r}")
        host = address[0]
        if host not in _LOOPBACK:
            raise AssertionError(f"test tried to connect off loopback to {address!r}")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that opens a connection to anything but 127.0.0.1 / ::1."""

    def connect(self: socket.socket, address: Any) -> None:
        _check(self, address)
        _real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check(self, address)
        return _real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Settings come only from what a test sets: no stray PAPERTRAIL_* or papertrail.toml."""
    for name in list(os.environ):
        if name.startswith("PAPERTRAIL_") and name not in (
            "PAPERTRAIL_CORPUS",
            "PAPERTRAIL_TEST_POSTGRES_URL",
            "PAPERTRAIL_TEST_QUICK",
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAPERTRAIL_CONFIG", str(tmp_path / "absent.toml"))


def postgres_available() -> bool:
    """True when the test PostgreSQL answers."""
    try:
        engine = sa.create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
        engine.dispose()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def _pg_ok() -> bool:
    return postgres_available()


@pytest.fixture(scope="session")
def _pg_admin(_pg_ok: bool) -> Iterator[sa.Engine | None]:
    """One connection pool per test process for creating and dropping the tests' schemas."""
    if not _pg_ok:
        yield None
        return
    admin = sa.create_engine(POSTGRES_URL)
    yield admin
    admin.dispose()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A SQLite database in the test's folder as PAPERTRAIL_DATABASE_URL, for the command-line tests;
    returns its path."""
    db = tmp_path / "cli.db"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{db}")
    return db


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file URL."""
    return f"sqlite:///{tmp_path}/papertrail.db"


@pytest.fixture
def postgres_url(_pg_admin: sa.Engine | None) -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards."""
    if _pg_admin is None:
        pytest.skip(f"PostgreSQL unreachable at {POSTGRES_URL}")
    schema = f"pt_{uuid.uuid4().hex[:12]}"
    with _pg_admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with _pg_admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each store test runs on SQLite and on PostgreSQL."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


def migrated_store(url: str) -> Iterator[Database]:
    """A store on ``url`` with every migration applied; the engine is disposed afterwards.

    An empty database gets the schema from this process's template (tests/schema_template.py): the same
    statements the migrations run, without running Alembic again for each test.
    """
    engine = make_engine(url)
    apply_template(engine)
    yield Database(engine)
    engine.dispose()


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    """A migrated store on each database."""
    yield from migrated_store(db_url)


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Database]:
    """A migrated store on SQLite only (for tests about the pipeline, not the database)."""
    yield from migrated_store(sqlite_url)


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[Database]:
    """A migrated store on PostgreSQL only (for tests of what only PostgreSQL does: workers, locks)."""
    yield from migrated_store(postgres_url)
