"""The store alone, for the commands that read or change it and nothing else.

:func:`papertrail.service.context.build_context` also wires the HTTP client, the sources, the notifiers and
the AI-guide client, whose libraries (httpx, lxml, aiohttp, slack, telegram) cost a command like ``follow``
more start-up time than its own work. Commands that need only the store and the settings open this.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.config import DEFAULT_DATABASE_URL, Settings
from core.db import Database, make_engine
from core.db_migrate import migrate


def open_store(settings: Settings) -> Database:
    """The store at ``settings.database_url``, its schema brought up to date.

    Only the default SQLite file's folder (``./data/``) is created; any other database URL names a
    folder that must exist (``core.db.DatabaseFolderMissing`` otherwise).
    """
    url = settings.database_url
    engine = make_engine(url, create_folder=url == DEFAULT_DATABASE_URL)
    migrate(engine)
    return Database(engine)


@dataclass
class StoreContext:
    """The settings and the store of one command that needs nothing else."""

    settings: Settings
    db: Database

    def close(self) -> None:
        """Release the database connections."""
        self.db.engine.dispose()
