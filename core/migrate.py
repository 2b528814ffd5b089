"""Apply the Alembic migrations shipped with PaperTrail; called on every start."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

from core.resources import resource_dir


def alembic_config(engine: Engine) -> Config:
    """An Alembic config pointing at the shipped migrations and at ``engine``'s database."""
    config = Config()
    config.set_main_option("script_location", str(resource_dir("migrations")))
    # configparser treats "%" as interpolation: URL-encoded options (e.g. %3D) must be doubled.
    config.set_main_option(
        "sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%")
    )
    return config


# Processes starting together (a scheduler, workers, the web server) must not migrate at the same time.
_MIGRATION_LOCK_KEY = 0x5061_7065_7254_726C  # "PaperTrl"


def migrate(engine: Engine) -> None:
    """Bring the database schema up to date (idempotent).

    On PostgreSQL a transaction-scoped advisory lock serialises concurrent starts: the first process
    migrates, the others wait and then find nothing to do. SQLite's write lock does the same there.
    """
    config = alembic_config(engine)
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
