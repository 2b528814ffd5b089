"""Apply the Alembic migrations shipped with PaperTrail; called on every start.

A database already at the newest shipped revision is left alone without loading Alembic (about a third
of a second of start-up for every command): the newest revision is read from the migrations' file names
(``NNNN_what.py`` holds revision ``NNNN``, a rule tests/test_migrate_fast.py checks against Alembic), the
database's from its ``alembic_version`` table. Anything else goes through ``alembic upgrade head``.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from core.resources import resource_dir

if TYPE_CHECKING:
    from alembic.config import Config

# A migration's file name: its four-digit revision, an underscore, what it does.
_REVISION_FILE = re.compile(r"(\d{4})_\w+\.py")


def alembic_config(engine: Engine) -> Config:
    """An Alembic config pointing at the shipped migrations and at ``engine``'s database."""
    from alembic.config import Config

    # The stream of this moment: Config's default is the sys.stdout of alembic.config's first import, which
    # may be a stream closed since (a test runner's capture, a CLI test's CliRunner).
    config = Config(stdout=sys.stdout)
    config.set_main_option("script_location", str(resource_dir("migrations")))
    # configparser treats "%" as interpolation: URL-encoded options (e.g. %3D) must be doubled.
    config.set_main_option(
        "sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%")
    )
    return config


def newest_revision() -> str | None:
    """The revision of the newest shipped migration, by file name; None when there is none."""
    found = [
        match.group(1)
        for path in (resource_dir("migrations") / "versions").iterdir()
        if (match := _REVISION_FILE.fullmatch(path.name))
    ]
    return max(found, default=None)


def database_revisions(connection: Connection) -> set[str]:
    """The revisions the database is at (one, unless a branch was merged by hand); empty when new."""
    if not sa.inspect(connection).has_table("alembic_version"):
        return set()
    return {row[0] for row in connection.execute(sa.text("SELECT version_num FROM alembic_version"))}


# Processes starting together (a scheduler, workers, the web server) must not migrate at the same time.
_MIGRATION_LOCK_KEY = 0x5061_7065_7254_726C  # "PaperTrl"


def migrate(engine: Engine) -> None:
    """Bring the database schema up to date (idempotent).

    On PostgreSQL a transaction-scoped advisory lock serialises concurrent starts: the first process
    migrates, the others wait and then find nothing to do. SQLite's write lock does the same there.
    The check for "already up to date" takes no lock: a database at the newest revision stays there.
    """
    newest = newest_revision()
    with engine.connect() as connection:
        if newest is not None and database_revisions(connection) == {newest}:
            return
    from alembic import command

    config = alembic_config(engine)
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
