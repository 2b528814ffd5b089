"""``migrate`` leaves a database at the newest revision alone without Alembic, and migrates any other.

The shortcut reads the newest revision from the migrations' file names; the rule it rests on (file
``NNNN_what.py`` holds revision ``NNNN``, one head) is checked here against Alembic itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory

from core.db import make_engine
from core.db_migrate import alembic_config, database_revisions, migrate, newest_revision
from core.resources import resource_dir


def _assigned(path: Path, name: str) -> object:
    """The value a migration file assigns to ``name`` at the top level."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name} assigns no {name}")


def test_file_names_hold_the_revisions_and_the_newest_is_alembics_one_head(sqlite_url: str) -> None:
    versions = sorted((resource_dir("migrations") / "versions").glob("*.py"))
    assert versions
    for path in versions:
        assert path.name[:5] == f"{_assigned(path, 'revision')}_", path.name
    engine = make_engine(sqlite_url)
    heads = ScriptDirectory.from_config(alembic_config(engine)).get_heads()
    engine.dispose()
    assert heads == [newest_revision()]


def test_an_up_to_date_database_is_not_handed_to_alembic(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(db_url)
    migrate(engine)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("alembic upgrade ran on a database at the newest revision")

    monkeypatch.setattr(command, "upgrade", refuse)
    migrate(engine)
    with engine.connect() as connection:
        assert database_revisions(connection) == {newest_revision()}
    engine.dispose()


def test_an_older_database_is_migrated_to_the_newest_revision(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    with engine.connect() as connection:
        assert database_revisions(connection) == set()
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0017")
    migrate(engine)
    with engine.connect() as connection:
        assert database_revisions(connection) == {newest_revision()}
        # The newest migration's work is there, not just its version row (0018 added paper.browse_key).
        assert "browse_key" in {column["name"] for column in sa.inspect(connection).get_columns("paper")}
    engine.dispose()
