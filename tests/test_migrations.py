"""Data migrations on real databases: follows get the current normal form, versions the current AI rule."""

from __future__ import annotations

import ast
import json
import tomllib
from pathlib import Path

import sqlalchemy as sa
from alembic import command

from core.db import make_engine
from core.db_migrate import alembic_config
from core.follows.query import parse
from core.resources import resource_dir

ROOT = Path(__file__).resolve().parent.parent


def _application_packages() -> set[str]:
    """The packages the project installs (pyproject.toml): what a migration may not import."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])


def _imported_modules(source: str) -> set[str]:
    """Every module a Python source imports, at any depth (inside functions too); relative ones as ``.x``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return found


def _application_imports(source: str, packages: set[str]) -> set[str]:
    return {m for m in _imported_modules(source) if m.startswith(".") or m.split(".")[0] in packages}


def test_no_migration_imports_the_application() -> None:
    # A migration carries its own SQL (and a frozen copy of any rule it needs): an import of the
    # application would make an old migration change whenever that code does.
    packages = _application_packages()
    assert {"core", "ingest", "notifiers", "bot", "papertrail"} <= packages
    versions = sorted((resource_dir("migrations") / "versions").glob("*.py"))
    assert versions
    offenders = {
        path.name: sorted(found)
        for path in versions
        if (found := _application_imports(path.read_text(encoding="utf-8"), packages))
    }
    assert offenders == {}


def test_the_import_check_finds_every_form_of_import() -> None:
    packages = _application_packages()
    planted = (
        "import core.store\n"
        "def upgrade():\n"
        "    from papertrail import cli\n"
        "    from . import sibling\n"
        "    importlib.import_module('bot.commands')\n"
        "    __import__('ingest.http')\n"
        "import sqlalchemy as sa\n"
        "from alembic import op\n"
    )
    assert _application_imports(planted, packages) == {
        "core.store",
        "papertrail",
        ".",
        "bot.commands",
        "ingest.http",
    }


def test_0004_recomputes_canonical_forms(db_url: str) -> None:
    engine = make_engine(db_url)
    config = alembic_config(engine)
    old_forms = [("cat:math.MP", "cat:math.mp"), ('au:"Li, Zeng"', 'au:"li, zeng"'), ("ti:(", "ti:(")]
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0003")
        conn.execute(
            sa.text(
                "insert into subscriber (address, timezone, schedule, status, created_at, failures) "
                "values ('console:x', 'UTC', 'daily 08:00', 'active', :t, 0)"
            ),
            {"t": "2024-01-01 00:00:00"},
        )
        for query, canonical in old_forms:
            conn.execute(
                sa.text(
                    "insert into follow (subscriber_id, query, canonical, created_at, revisions, instant) "
                    "values (1, :q, :c, :t, true, false)"
                ),
                {"q": query, "c": canonical, "t": "2024-01-01 00:00:00"},
            )
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        rows: dict[str, str] = {q: c for q, c in conn.execute(sa.text("select query, canonical from follow"))}
    engine.dispose()
    assert rows["cat:math.MP"] == parse("cat:math.MP").canonical() == "cat:math-ph"
    assert rows['au:"Li, Zeng"'] == parse('au:"Zeng Li"').canonical()
    assert rows["ti:("] == "ti:("  # no longer parses: left as it was


def test_0007_recomputes_ai_related_in_batches(db_url: str) -> None:
    """Stored versions get the current rule: new categories, title and abstract cues, stale values cleared."""
    engine = make_engine(db_url)
    config = alembic_config(engine)
    # (categories, title, abstract, stored value) -> the value 0007 must leave.
    cases: list[tuple[list[str], str, str, bool, bool]] = [
        (["hep-ex"], "Dark Matter Axion Detection with Neural Networks", "We search.", False, True),
        (["cs.RO", "eess.SY"], "A soft gripper", "We build a gripper.", False, True),  # cs.RO is new
        (["cs.LG"], "Anything", "", True, True),
        (["math.CO"], "Generating trees", "We count trees.", True, False),  # a stale True goes too
        (
            ["physics.optics"],
            "An optical switch",
            "for artificial intelligence compute clusters",
            False,
            False,
        ),
        (["astro-ph.GA"], "Galaxy mergers", "We use generative adversarial networks.", False, True),
    ]
    filler = 2 * 2000 + 150  # more than two batches of 0007.BATCH, so the keyset paging is exercised
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0006")
        t = "2024-01-01 00:00:00"
        conn.execute(
            sa.text("insert into paper (id, latest_version, first_seen_at) values ('2411.00001', 1, :t)"),
            {"t": t},
        )
        rows = [
            {"n": n, "ti": title, "ab": abstract, "cat": json.dumps(cats), "ai": stored}
            for n, (cats, title, abstract, stored, _) in enumerate(cases, start=1)
        ]
        # Filler: history that is not AI-related, with a cue every 1,000 rows (in the title of one batch,
        # the abstract of the next), stored with the old answer False.
        for n in range(len(cases) + 1, len(cases) + 1 + filler):
            title, abstract = f"Paper {n}", "Ordinary text."
            if n % 1000 == 0:
                title, abstract = (
                    (f"Paper {n} via deep learning", abstract) if n % 2000 else (title, "A CNN.")
                )
            rows.append({"n": n, "ti": title, "ab": abstract, "cat": '["math.NT"]', "ai": False})
        conn.execute(
            sa.text(
                "insert into version (paper_id, number, title, abstract, authors, categories, announce_type,"
                " source, ai_related, first_seen_at, news) values ('2411.00001', :n, :ti, :ab, '[]', :cat,"
                " 'new', 'arxiv-rss', :ai, :t, false)"
            ),
            [{**row, "t": t} for row in rows],
        )
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        stored: dict[int, bool] = {
            n: bool(v) for n, v in conn.execute(sa.text("select number, ai_related from version"))
        }
    engine.dispose()
    assert [stored[n] for n in range(1, len(cases) + 1)] == [case[4] for case in cases]
    flagged = sorted(n for n, value in stored.items() if value and n > len(cases))
    assert flagged == list(range(1000, len(cases) + filler + 1, 1000))


def test_the_migrations_build_the_schema_the_models_describe(db_url: str) -> None:
    # Autogenerate's comparison finds any table, column, index or nullability the models have and the
    # migrations forgot (or the other way round).
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlmodel import SQLModel

    import core.models  # noqa: F401 - registers every table on SQLModel.metadata
    from core.db_migrate import migrate

    engine = make_engine(db_url)
    try:
        migrate(engine)
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": False})
            # The search index is no model: its table differs by database (core.papers.search_index); the
            # migrations' environment leaves it out the same way.
            diffs = [
                d
                for d in compare_metadata(context, SQLModel.metadata)
                if "alembic_version" not in str(d) and "search_doc" not in str(d)
            ]
    finally:
        engine.dispose()
    assert diffs == []
