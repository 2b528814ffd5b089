"""Shared fixtures: the loopback guard, real SQLite and PostgreSQL stores, the recorded corpus."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from core.store.facade import Store, make_engine
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


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6):
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


def migrated_store(url: str) -> Iterator[Store]:
    """A store on ``url`` with every migration applied; the engine is disposed afterwards.

    An empty database gets the schema from this process's template (tests/schema_template.py): the same
    statements the migrations run, without running Alembic again for each test.
    """
    engine = make_engine(url)
    apply_template(engine)
    yield Store(engine)
    engine.dispose()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A migrated store on each database."""
    yield from migrated_store(db_url)


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    """A migrated store on SQLite only (for tests about the pipeline, not the database)."""
    yield from migrated_store(sqlite_url)


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[Store]:
    """A migrated store on PostgreSQL only (for tests of what only PostgreSQL does: workers, locks)."""
    yield from migrated_store(postgres_url)
