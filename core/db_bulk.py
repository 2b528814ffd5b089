"""One fast bulk INSERT, shared by the repositories that load many rows at once (versions, query matches).

Runs on the caller's Core connection inside its transaction.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

if TYPE_CHECKING:
    pass


def dialect_insert(connection: sa.Connection, table: sa.Table) -> Any:
    """The connection's own INSERT into ``table`` (PostgreSQL's or SQLite's), for its ON CONFLICT clause."""
    if connection.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def bulk_insert(
    connection: sa.Connection,
    table: sa.Table,
    columns: Sequence[str],
    rows: list[list[Any]],
    *,
    encoded: Collection[str] = (),
) -> None:
    """INSERT ``rows`` (values of ``columns``) into ``table`` in the connection's transaction, fast.

    SQLAlchemy's own executemany processes every value of every row in Python, and its ORM bulk insert also
    splits the rows into small groups wherever a None moves from one column to another. Here each column's
    bind processor (the same conversion SQLAlchemy applies: JSON text, naive UTC for SQLite, ...) runs once
    per distinct value, and the rows go to the driver in one call: ``executemany`` for SQLite, ``COPY`` for
    PostgreSQL (several times faster than psycopg's per-row executemany). Any other database gets plain
    SQLAlchemy executemany. Values must be hashable; ``rows`` is modified in place. Values of the
    ``encoded`` columns are already in the database's form (JSON text) and pass unconverted.
    """
    dialect = connection.dialect
    if dialect.name not in ("sqlite", "postgresql"):
        decoded = [
            [json.loads(v) if c in encoded else v for c, v in zip(columns, row, strict=True)] for row in rows
        ]
        connection.execute(table.insert(), [dict(zip(columns, row, strict=True)) for row in decoded])
        return
    for index, name in enumerate(columns):
        if name in encoded:
            continue
        process = table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
        if process is None:
            continue
        # Keyed by the value: repeated dates, categories and the author list shared by the versions of
        # one paper are converted once. (Values that compare equal convert equally: a datetime is stored
        # as its UTC instant.)
        seen: dict[Any, Any] = {}
        for row in rows:
            value = row[index]
            try:
                row[index] = seen[value]
            except KeyError:
                row[index] = seen[value] = process(value)
    quote = dialect.identifier_preparer.quote
    target = f"{dialect.identifier_preparer.format_table(table)} ({', '.join(quote(c) for c in columns)})"
    if dialect.name == "sqlite":
        # The DBAPI cursor directly: SQLAlchemy's exec_driver_sql would want every row copied into a tuple.
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(f"INSERT INTO {target} VALUES ({', '.join('?' for _ in columns)})", rows)
        finally:
            cursor.close()
        return
    # psycopg's own connection: the COPY runs in the transaction SQLAlchemy has open on it.
    driver = connection.connection.driver_connection
    assert driver is not None
    with driver.cursor() as cursor, cursor.copy(f"COPY {target} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
