"""The migrated schema, made once per test process and handed to each test's empty database.

Running Alembic from nothing to head costs ~0.15-0.2 s of CPU (it loads every migration file and builds
every table object again); with a thousand store tests that was a third of the suite. Each process now
migrates once and then:

* SQLite: migrates a template file once and copies it to each test's own file (one file per test, as
  before, so tests stay isolated);
* PostgreSQL: runs the migrations once inside a transaction that is rolled back, records every statement
  they sent (DDL, the ``alembic_version`` rows; reads are not needed), and replays those statements into
  each test's own fresh schema. The statements are unqualified, so they land in the schema on the
  connection's search_path, exactly as a migration would.

A database that is not empty is migrated the ordinary way, so a test that builds an old schema first still
tests the real upgrade. tests/test_schema_template.py checks that both copies equal a real migration.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Engine

from core.db import make_engine
from core.db_migrate import alembic_config, migrate

# Statements a migration sends that only read: not needed to rebuild the schema.
_READS = ("select", "show")
_lock = threading.Lock()  # a test may open stores from several threads; the template is made once


@dataclass(frozen=True)
class Statement:
    """One statement as the migrations sent it to the driver."""

    sql: str
    parameters: Any
    many: bool


@cache
def sqlite_template() -> Path:
    """A migrated SQLite file in a per-process temporary folder, removed when the process ends."""
    folder = Path(tempfile.mkdtemp(prefix="papertrail-schema-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    migrate(engine)
    engine.dispose()  # closing the last connection checkpoints the WAL into the file, which is then whole
    for extra in ("-wal", "-shm"):
        if Path(f"{path}{extra}").exists():
            raise RuntimeError(f"the SQLite template {path} still has a {extra} file after closing")
    return path


def record_postgres_migrations(engine: Engine) -> tuple[Statement, ...]:
    """The statements a full migration sends, recorded in a scratch schema and rolled back."""
    scratch = f"pt_template_{uuid.uuid4().hex[:12]}"
    config = alembic_config(engine)
    recorded: list[Statement] = []

    def record(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, executemany: bool
    ) -> None:
        if not statement.lstrip().lower().startswith(_READS):
            recorded.append(Statement(statement, parameters, executemany))

    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            conn.exec_driver_sql(f'CREATE SCHEMA "{scratch}"')
            conn.exec_driver_sql(f'SET LOCAL search_path TO "{scratch}"')
            sa.event.listen(conn, "before_cursor_execute", record)
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            sa.event.remove(conn, "before_cursor_execute", record)
        finally:
            transaction.rollback()  # PostgreSQL's DDL is transactional: the scratch schema never existed
    leaked = [s.sql for s in recorded if scratch in s.sql]
    if leaked:
        raise RuntimeError(f"a migration named its schema, so it cannot be replayed elsewhere: {leaked[0]}")
    return tuple(recorded)


_postgres_statements: dict[str, tuple[Statement, ...]] = {}


def postgres_statements(engine: Engine) -> tuple[Statement, ...]:
    """The recorded migration for ``engine``'s server, recorded on first use in this process."""
    key = engine.url.set(query={}).render_as_string(hide_password=False)
    with _lock:
        if key not in _postgres_statements:
            _postgres_statements[key] = record_postgres_migrations(engine)
        return _postgres_statements[key]


def _postgres_schema_is_empty(conn: sa.Connection) -> bool:
    count = conn.execute(
        sa.text(
            "SELECT count(*) FROM pg_catalog.pg_class c WHERE c.relnamespace = current_schema()::regnamespace"
        )
    ).scalar_one()
    return int(count) == 0


def apply_template(engine: Engine) -> None:
    """Bring ``engine``'s database to the migrated schema: from the template when it is empty, else by
    migrating."""
    if engine.dialect.name == "sqlite":
        database = engine.url.database or ""
        path = Path(database)
        if database not in ("", ":memory:") and not any(
            Path(f"{path}{suffix}").exists() for suffix in ("", "-wal", "-shm", "-journal")
        ):
            with _lock:
                template = sqlite_template()
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, path)
            return
    elif engine.dialect.name == "postgresql":
        statements = postgres_statements(engine)
        with engine.begin() as conn:
            if _postgres_schema_is_empty(conn):
                cursor = conn.connection.cursor()
                for statement in statements:
                    if statement.many:
                        cursor.executemany(statement.sql, statement.parameters)
                    else:
                        cursor.execute(statement.sql, statement.parameters)
                cursor.close()
                return
    migrate(engine)
