"""Conditions selecting rows by a set of paper ids, as the store's bulk writes need them.

Part of the store. A write of a batch reads or updates the rows of a few thousand papers at once; how to
say ``id IN (...)`` for that many ids differs by database:

* PostgreSQL gets one array parameter (``id = ANY(:ids)``). A long IN list of separate parameters turns,
  once psycopg prepares the statement (its fifth use), into a generic plan that compares every stored row
  with every parameter: seconds per batch once the table holds a few hundred thousand versions.
* SQLite caps the number of bound parameters per statement, so the ids go in chunks of :data:`ID_CHUNK`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import sqlalchemy as sa

# Well below SQLite's cap on bound parameters per statement.
ID_CHUNK = 500


def id_conditions(
    connection: sa.Connection, column: sa.ColumnElement[str], ids: Collection[str]
) -> Iterator[sa.ColumnElement[bool]]:
    """Conditions on ``column`` that together select ``ids`` (none for no ids), in id order."""
    ordered = sorted(ids)
    if not ordered:
        return
    if connection.dialect.name == "postgresql":
        yield column == sa.any_(sa.bindparam("ids", ordered, type_=sa.ARRAY(sa.String())))
        return
    for start in range(0, len(ordered), ID_CHUNK):
        yield column.in_(ordered[start : start + ID_CHUNK])
