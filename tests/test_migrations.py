"""Data migrations on real databases: follows stored under an older grammar get the current normal form."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

from core.migrate import alembic_config
from core.query import parse
from core.store import make_engine


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
