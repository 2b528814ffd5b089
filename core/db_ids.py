"""Conditions selecting rows by a set of ids (papers' text ids, or integer row ids), as the store's bulk
reads and writes need them.

Part of the store. A write of a batch reads or updates the rows of a few thousand papers at once, and the
recommendation pass reads the ledger of a thousand subscribers at once; how to say ``id IN (...)`` for that
many ids differs by database:

* PostgreSQL gets one array parameter (``id = ANY(:ids)``). A long IN list of separate parameters turns,
  once psycopg prepares the statement (its fifth use), into a generic plan that compares every stored row
  with every parameter: seconds per batch once the table holds a few hundred thousand versions.
* SQLite caps the number of bound parameters per statement, so the ids go in chunks of :data:`ID_CHUNK`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

import sqlalchemy as sa

# Well below SQLite's cap on bound parameters per statement.
ID_CHUNK = 500


def id_conditions(
    connection: sa.Connection, column: sa.ColumnElement[Any], ids: Collection[str] | Collection[int]
) -> Iterator[sa.ColumnElement[bool]]:
    """Conditions on ``column`` that together select ``ids`` (none for no ids), in id order."""
    ordered: list[Any] = sorted(ids)
    if not ordered:
        return
    if connection.dialect.name == "postgresql":
        element = sa.Integer() if isinstance(ordered[0], int) else sa.String()
        yield column == sa.any_(sa.bindparam("ids", ordered, type_=sa.ARRAY(element)))
        return
    for start in range(0, len(ordered), ID_CHUNK):
        yield column.in_(ordered[start : start + ID_CHUNK])
