"""Apply the Alembic migrations shipped with PaperTrail; called on every start."""

from __future__ import annotations

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


def migrate(engine: Engine) -> None:
    """Bring the database schema up to date (idempotent)."""
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
