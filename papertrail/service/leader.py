"""One scheduler per store: whoever holds the lock leads, the others wait and take over when it goes.

The same locks, under another name, keep each source to one ingest at a time
(:mod:`papertrail.service.ingest_claim`).

- PostgreSQL: ``pg_try_advisory_lock(key)`` on a connection kept open for the life of the process. The
  lock is the session's: it goes when the connection goes (process exit, crash, a server that drops the
  connection), and a waiting scheduler's next poll takes it. The key is a fixed 64-bit number derived
  from ``papertrail-scheduler`` and the schema, so that two PaperTrail stores in one database (in two
  schemas) each get their scheduler.
- SQLite: an exclusive ``fcntl.flock`` on ``<database file>.scheduler.lock`` (``.ingest-<source>.lock`` for
  a source); the kernel drops it when the process exits, however it exits.

Waiting schedulers poll every :data:`POLL_SECONDS`. Database calls run in a thread so that a server that
does not answer cannot stall the event loop the web server and the workers share.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import ClassVar, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger(__name__)

LOCK_NAME = "papertrail-scheduler"
POLL_SECONDS = 2.0
# A waiting scheduler says so when it starts waiting, then this often (seconds), not at every poll.
WAIT_LOG_EVERY = 300.0


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``name`` (PostgreSQL's ``bigint``)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class Lock(Protocol):
    """A leadership lock. The calls block (database, file system); :class:`Leader` runs them in a thread."""

    @property
    def description(self) -> str:
        """What is locked, for log lines (no password)."""
        ...

    def try_acquire(self) -> bool:
        """Take the lock if it is free; True when this process holds it now."""
        ...

    def still_held(self) -> bool:
        """Whether the lock is still this process's (False once its connection is gone)."""
        ...

    def release(self) -> None:
        """Give the lock up (safe to call when not held)."""
        ...


class PostgresLock:
    """A session-level advisory lock on a dedicated AUTOCOMMIT connection (never idle in a transaction)."""

    def __init__(self, engine: Engine, name: str = LOCK_NAME) -> None:
        self.engine = engine
        self.name = name
        self.key: int | None = None
        self._conn: Connection | None = None
        self._unreachable = False

    @property
    def unreachable(self) -> bool:
        """Whether the last try failed because the database did not answer (not because the lock is held)."""
        return self._unreachable

    @property
    def description(self) -> str:
        """The database URL (password masked) and the lock key."""
        return f"advisory lock {self.key} on {self.engine.url.render_as_string(hide_password=True)}"

    def try_acquire(self) -> bool:
        """Open the connection if needed and try the lock once."""
        try:
            conn = self._connection()
            taken = bool(
                conn.execute(sa.text("SELECT pg_try_advisory_lock(:key)"), {"key": self.key}).scalar()
            )
        except sa.exc.DBAPIError as exc:
            if not self._unreachable:  # once per outage, not at every poll
                log.warning("%s lock: database unreachable, trying again: %s", self.name, exc.orig or exc)
            self._unreachable = True
            self._drop()
            return False
        self._unreachable = False
        return taken

    def still_held(self) -> bool:
        """A session lock lives as long as its connection: check that the connection still answers."""
        if self._conn is None:
            return False
        try:
            self._conn.execute(sa.text("SELECT 1"))
        except sa.exc.DBAPIError as exc:
            log.error("scheduler lock: its connection broke, so the lock is gone: %s", exc.orig or exc)
            self._drop()
            return False
        return True

    def release(self) -> None:
        """Unlock and close the connection for good (a pooled connection must not keep the lock)."""
        if self._conn is None:
            return
        with contextlib.suppress(sa.exc.DBAPIError):
            self._conn.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
        self._drop()

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            try:
                schema = conn.execute(sa.text("SELECT current_schema()")).scalar() or "public"
                self.key = lock_key(f"{self.name}/{schema}")
                # Visible in pg_stat_activity; and the server probes this connection every 30 s, so a
                # leader whose host vanished loses the lock within about a minute, not hours.
                name = {"name": self.name[:63]}
                conn.execute(sa.text("SELECT set_config('application_name', :name, false)"), name)
                conn.execute(sa.text("SET tcp_keepalives_idle = 30"))
                conn.execute(sa.text("SET tcp_keepalives_interval = 10"))
                conn.execute(sa.text("SET tcp_keepalives_count = 3"))
            except BaseException:
                conn.invalidate()
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        # invalidate(): close the DBAPI connection instead of returning it, with its session state, to
        # the pool.
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.invalidate()
                self._conn.close()
            self._conn = None


class FileLock:
    """An exclusive ``flock`` on a file next to the SQLite database; the file holds the leader's pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def description(self) -> str:
        """The lock file."""
        return f"lock file {self.path}"

    def try_acquire(self) -> bool:
        """Take the lock without blocking; write our pid into the file for operators."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def still_held(self) -> bool:
        """A flock lasts as long as its file descriptor is open."""
        return self._fd is not None

    def release(self) -> None:
        """Unlock and close (the file stays: removing it would race with the next holder)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class ProcessLock:
    """A named lock of an in-memory SQLite database: held per process (the database lives in one), so that
    a second holder in the same process is refused as another process would be."""

    _held: ClassVar[set[tuple[int, str]]] = set()
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, engine: Engine, name: str) -> None:
        self._key = (id(engine), name)
        self._mine = False
        self.description = f"in-memory lock {name}"

    def try_acquire(self) -> bool:
        """Take the name if no one in this process holds it."""
        with self._guard:
            if not self._mine and self._key in self._held:
                return False
            self._held.add(self._key)
            self._mine = True
            return True

    def still_held(self) -> bool:
        """Held until released."""
        return self._mine

    def release(self) -> None:
        """Give the name up."""
        with self._guard:
            if self._mine:
                self._held.discard(self._key)
                self._mine = False


class PrivateLock:
    """An in-memory SQLite database belongs to one process: that process always leads."""

    description = "in-memory database"

    def try_acquire(self) -> bool:
        """Always free."""
        return True

    def still_held(self) -> bool:
        """Always held."""
        return True

    def release(self) -> None:
        """Nothing to give up."""


def lock_for(engine: Engine, name: str = LOCK_NAME) -> Lock:
    """The lock called ``name`` (default: the scheduler's leadership) that fits the store's database.

    On SQLite the lock file is named after ``name`` without its ``papertrail-`` prefix, ``/`` becoming
    ``-``: ``x.db.scheduler.lock``, ``x.db.ingest-arxiv-rss.lock``.
    """
    url = engine.url
    if url.get_backend_name() == "postgresql":
        return PostgresLock(engine, name)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            return PrivateLock() if name == LOCK_NAME else ProcessLock(engine, name)
        suffix = name.removeprefix("papertrail-").replace("/", "-")
        return FileLock(Path(database).with_name(f"{Path(database).name}.{suffix}.lock"))
    raise ValueError(f"no {name} lock for {url.get_backend_name()} databases; use SQLite or PostgreSQL")


class Leader:
    """Waits for and keeps leadership through a :class:`Lock`, polling every ``poll`` seconds."""

    def __init__(self, lock: Lock, *, poll: float = POLL_SECONDS) -> None:
        self.lock = lock
        self.poll = poll

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this process leads (True) or ``stop`` is set (False); says that it waits."""
        said_at: float | None = None
        while not stop.is_set():
            if await asyncio.to_thread(self.lock.try_acquire):
                log.info("scheduler: leading (%s)", self.lock.description, extra={"role": "scheduler"})
                return True
            if said_at is None or time.monotonic() - said_at >= WAIT_LOG_EVERY:
                said_at = time.monotonic()
                log.info(
                    "scheduler: waiting, another scheduler leads (%s); trying again every %g s",
                    self.lock.description,
                    self.poll,
                    extra={"role": "scheduler"},
                )
            await _sleep_unless(stop, self.poll)
        return False

    async def hold(self, stop: asyncio.Event) -> bool:
        """Return when ``stop`` is set (True) or the lock was lost (False, logged)."""
        while not stop.is_set():
            if not await asyncio.to_thread(self.lock.still_held):
                log.error(
                    "scheduler: lost the lock (%s); stopping the jobs",
                    self.lock.description,
                    extra={"role": "scheduler"},
                )
                return False
            await _sleep_unless(stop, self.poll)
        return True

    def release(self) -> None:
        """Give leadership up so that a waiting scheduler takes over at its next poll."""
        self.lock.release()


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
