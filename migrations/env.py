"""Alembic environment: runs on the connection that core.migrate hands over."""

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


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite can only alter tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
