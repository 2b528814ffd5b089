"""The tests' schema template (tests/schema_template.py) gives exactly what running the migrations gives."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from core.db import make_engine
from core.db_migrate import alembic_config, migrate
from tests.conftest import migrated_store
from tests.schema_template import apply_template

Catalog = dict[str, list[tuple[object, ...]]]


def sqlite_catalog(engine: sa.Engine) -> Catalog:
    """Columns, keys, indexes and constraints of every table. A table that a batch migration rebuilt may
    list its foreign keys in another order from one process to the next, so each table's SQL is compared
    with its lines sorted, and columns in their order from ``table_xinfo``."""
    catalog: Catalog = {}
    with engine.connect() as conn:
        objects = conn.exec_driver_sql("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
        for kind, name, table, sql in objects:
            lines = sorted(line.strip().rstrip(",") for line in str(sql).splitlines())
            catalog[f"{kind} {name}"] = [(table, *lines)]
            if kind == "table":
                catalog[f"columns {name}"] = [
                    tuple(r) for r in conn.exec_driver_sql(f'PRAGMA table_xinfo("{name}")')
                ]
                catalog[f"foreign keys {name}"] = sorted(
                    tuple(r)[2:] for r in conn.exec_driver_sql(f'PRAGMA foreign_key_list("{name}")')
                )
                catalog[f"indexes {name}"] = sorted(
                    tuple(r)[1:] for r in conn.exec_driver_sql(f'PRAGMA index_list("{name}")')
                )
        catalog["alembic"] = [
            tuple(r) for r in conn.exec_driver_sql("SELECT version_num FROM alembic_version")
        ]
    return catalog


def postgres_catalog(engine: sa.Engine) -> Catalog:
    """Tables, columns, defaults, indexes, constraints and sequences of the connection's schema, with the
    schema's own name taken out so that two schemas compare."""
    queries = {
        "columns": "SELECT table_name, column_name, ordinal_position, data_type, character_maximum_length,"
        " is_nullable, column_default FROM information_schema.columns WHERE table_schema = current_schema()"
        " ORDER BY 1, 3",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        " ORDER BY 1, 2",
        "constraints": "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid)"
        " FROM pg_constraint WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2",
        "sequences": "SELECT sequence_name, data_type, start_value, increment"
        " FROM information_schema.sequences WHERE sequence_schema = current_schema() ORDER BY 1",
        "alembic": "SELECT version_num FROM alembic_version",
    }
    with engine.connect() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        return {
            name: [
                tuple(str(v).replace(schema, "<schema>") if isinstance(v, str) else v for v in row)
                for row in conn.exec_driver_sql(sql)
            ]
            for name, sql in queries.items()
        }


@pytest.fixture
def second_postgres_url(postgres_url: str, _pg_admin: sa.Engine) -> Iterator[str]:
    """Another fresh schema beside ``postgres_url``'s."""
    schema = f"pt_{uuid.uuid4().hex[:12]}"
    with _pg_admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield postgres_url.rsplit("%3D", 1)[0] + f"%3D{schema}"
    finally:
        with _pg_admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


def _head(engine: sa.Engine) -> str:
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    assert head is not None
    return head


def _revision(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@pytest.mark.db
def test_sqlite_template_equals_a_migration(tmp_path: object) -> None:
    migrated = make_engine(f"sqlite:///{tmp_path}/migrated.db")
    migrate(migrated)
    copied = make_engine(f"sqlite:///{tmp_path}/copied.db")
    apply_template(copied)
    try:
        assert sqlite_catalog(copied) == sqlite_catalog(migrated)
        assert _revision(copied) == _head(copied)
    finally:
        migrated.dispose()
        copied.dispose()


def test_postgres_template_equals_a_migration(postgres_url: str, second_postgres_url: str) -> None:
    migrated = make_engine(postgres_url)
    migrate(migrated)
    replayed = make_engine(second_postgres_url)
    apply_template(replayed)
    try:
        catalog = postgres_catalog(replayed)
        assert catalog == postgres_catalog(migrated)
        assert {row[0] for row in catalog["columns"]} >= {"paper", "version", "subscriber", "digest", "match"}
        assert _revision(replayed) == _head(replayed)
        # Sequences belong to the new schema: rows get ids there, independent of any other schema.
        with replayed.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO subscriber (address, timezone, schedule, status, created_at, failures)"
                " VALUES ('console:a', 'UTC', 'instant', 'active', now(), 0)"
            )
        with migrated.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO subscriber (address, timezone, schedule, status, created_at, failures)"
                " VALUES ('console:a', 'UTC', 'instant', 'active', now(), 0)"
            )
            assert conn.exec_driver_sql("SELECT id FROM subscriber").scalar_one() == 1
    finally:
        migrated.dispose()
        replayed.dispose()


def test_a_database_that_has_tables_is_migrated_not_overwritten(db_url: str) -> None:
    """An old schema with rows is upgraded by the migrations themselves, keeping its rows."""
    engine = make_engine(db_url)
    config = alembic_config(engine)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0003")
        conn.execute(
            sa.text("insert into paper (id, latest_version, first_seen_at) values ('2411.00001', 1, :t)"),
            {"t": "2024-01-01 00:00:00"},
        )
    engine.dispose()
    for db in migrated_store(db_url):
        assert _revision(db.engine) == _head(db.engine)
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT id FROM paper").scalar_one() == "2411.00001"
