"""Alembic environment: runs on the connection that core.db_migrate hands over."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import core.models  # noqa: F401  (registers the tables on SQLModel.metadata)

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_online() -> None:
    """Migrate over the caller's connection, or one made from the configured URL."""
    connection = config.attributes.get("connection")
    if connection is None:
        import sqlalchemy as sa

        engine = sa.create_engine(config.get_main_option("sqlalchemy.url") or "")
        with engine.begin() as conn:
            _run(conn)
        return
    _run(connection)


def _is_model_object(
    _object: object, name: str | None, type_: str, _reflected: bool, _compare_to: object
) -> bool:
    """Leave the search index out of autogenerate and ``alembic check``: it is not a model (its table
    differs by database: FTS5 and its shadow tables on SQLite, a tsvector table on PostgreSQL; see
    core.papers.search_index), so a comparison would otherwise propose to drop it."""
    return not (type_ in ("table", "index") and (name or "").startswith("search_doc"))


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite can only alter tables by copying them
        compare_type=True,
        include_object=_is_model_object,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
