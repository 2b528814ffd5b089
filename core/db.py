"""The database: the engine, and the unit of work that the capabilities' SQL runs in.

Every package keeps its own SQL in functions that take ``db: Db`` first. ``Db`` is either the
:class:`Database` (built once per process from an engine) or a :class:`Transaction` opened on it:

* On a ``Database``, ``db.session()`` / ``db.connection()`` open a transaction of their own that commits
  on success and rolls back on any exception: one call, one transaction.
* On a ``Transaction``, they join the transaction already open and commit nothing; it commits when its
  ``with database.transaction() as tx:`` block ends and rolls back everything if the block raises.

So steps compose by passing the transaction down::

    with database.transaction() as tx:
        paper_records.save_batch(tx, ...)
        run_records.finish_run(tx, ...)   # one commit for both

The transaction is passed explicitly, never kept in a context variable: asyncio tasks and threads copy
contexts, and an ambient transaction would follow work into places it was never meant to reach.
A function talks to the database one way, said in its docstring: through an ORM session
(``db.session()``: model objects, ``session.exec``/``get``/``add``, and Core statements run by that
session) or through a Core connection only (``db.connection()``), which is the same transaction's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session


class DatabaseFolderMissing(ValueError):
    """The folder of a SQLite database URL does not exist (a mistyped path, most likely)."""


def make_engine(url: str, *, create_folder: bool = True) -> Engine:
    """Create an engine for ``url``; for a SQLite file use WAL with foreign keys.

    A SQLite file's missing folder is created when ``create_folder``, else refused with
    ``DatabaseFolderMissing``: the command line creates only the default ``./data/`` (a mistyped
    ``sqlite:////nonexistent/dir/pt.db`` once silently made the folders and an empty database).
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1].split("?", 1)[0]
        if path and path != ":memory:":
            folder = Path(path).parent
            if create_folder:
                folder.mkdir(parents=True, exist_ok=True)
            elif not folder.is_dir():
                raise DatabaseFolderMissing(
                    f"the folder {folder} of the SQLite database {path} does not exist; check "
                    f"PAPERTRAIL_DATABASE_URL, or create the folder first (mkdir -p {folder})"
                )
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            # 64 MiB of page cache instead of SQLite's 2 MiB: a day's matches insert into the ledger's
            # indexes in no useful order, and with the default cache most of those inserts miss it
            # (measured: 2.4x less CPU for 531k rows; docs/benchmarks.md).
            cursor.execute("PRAGMA cache_size=-65536")
            cursor.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


class Database:
    """The database of one process: build it once from an engine and pass it down."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A unit of work: everything run on the yielded transaction commits together when the block ends,
        or rolls back together when it raises."""
        with self.session() as session:
            yield Transaction(session)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose own transaction commits on success and rolls back on any exception."""
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def connection(self) -> Iterator[sa.Connection]:
        """The Core connection of such a transaction, for the SQL that speaks Core only (no ORM objects):
        the same transaction :meth:`session` opens, committed or rolled back the same way."""
        with self.session() as session:
            yield session.connection()


class Transaction:
    """A transaction open on a :class:`Database` (see :meth:`Database.transaction`). Its ``session()`` and
    ``connection()`` join it and commit nothing; the ``with`` block that opened it commits."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def engine(self) -> Engine:
        """The engine the transaction runs on (for its dialect)."""
        bind = self._session.get_bind()
        return bind if isinstance(bind, Engine) else bind.engine

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """This transaction again: a step that opens a unit of work joins the caller's."""
        yield self

    @contextmanager
    def savepoint(self) -> Iterator[Transaction]:
        """A part of this transaction that rolls back alone when its block raises (a SAVEPOINT), so that the
        rest can still commit; the exception goes on to the caller, who decides what its failure means.

        On SQLite the driver opens a transaction only before a write: one that has only read yet is begun
        here first, or the SAVEPOINT would begin one of its own (and its release commit it).
        """
        connection = self._session.connection()
        driver = connection.connection.dbapi_connection
        if connection.dialect.name == "sqlite" and not getattr(driver, "in_transaction", True):
            connection.exec_driver_sql("BEGIN")
        with self._session.begin_nested():
            yield self

    @contextmanager
    def session(self) -> Iterator[Session]:
        """The transaction's session, as it is: nothing is committed when the block ends."""
        yield self._session

    @contextmanager
    def connection(self) -> Iterator[sa.Connection]:
        """The transaction's Core connection."""
        yield self._session.connection()


# What the capabilities' SQL takes: the database (one transaction per call) or an open transaction.
Db = Database | Transaction
