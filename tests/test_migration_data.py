"""The data migrations carry frozen copies of the application's rules and SQL; they must leave the data the
application computes today.

* 0007 (AI-related), 0017 (the library's flags and totals) and 0018 (the browser's keys, the search index
  left to the indexer): a library holding the recorded RSS day (news), the recorded snapshot sample
  (history) and recorded Hugging Face picks (stubs among them) is written by the application at the newest
  revision, taken down to the revision before 0007 with every verdict inverted, and migrated up again one
  revision at a time; after each of the three its rows equal what the application wrote.
* 0004 (the normal form of follows): the frozen grammar gives the application's normal form, or refuses,
  for every follow of a generated set, and the migration keeps the older of two follows that share a form.

When one of these rules changes in the application (the grammar, the AI-related rule, the keys), these tests
fail on purpose: the stored data needs a new migration with a copy of the new rule. Point the test at that
migration then; the older copy stays as it was.
"""

from __future__ import annotations

import importlib.util
import json
import random
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from alembic import command

from core.db import Database, make_engine
from core.db_migrate import alembic_config
from core.follows.query import QueryError, parse
from core.papers import classify, paper_records
from core.papers.pipeline import backfill
from core.resources import resource_dir
from ingest.arxiv_rss_parse import parse_feed
from ingest.hf_daily_parse import parse_daily
from papertrail.cli.backfill import snapshot_batches
from tests.browse_oracle import assert_keys_and_index
from tests.conftest import BIG_FEED, CORPUS

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SNAPSHOT = CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"
HF_DAYS = sorted((CORPUS / "hf-daily" / "api-objects-reserialized").glob("*.json"))[:2]
PAPER_COLUMNS = "id, ai_related, revised, picked, news, browse_key, published_key"
TOTALS = "papers, versions, ai_papers, revised_papers, community_papers, news_new, news_revisions"


def _migration(revision: str) -> ModuleType:
    """A migration file loaded as a module, as Alembic loads it (outside sys.modules)."""
    (path,) = (resource_dir("migrations") / "versions").glob(f"{revision}_*.py")
    spec = importlib.util.spec_from_file_location(f"migration_{revision}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(connection: sa.Connection, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in connection.execute(sa.text(sql))]


def _library(db: Database) -> None:
    """History first, then the day's news, then the picks (a stub's key is the newest version id then)."""
    backfill(db, "snapshot", snapshot_batches(SNAPSHOT), now=NOW - timedelta(days=2))
    paper_records.save_versions(db, parse_feed(BIG_FEED.read_bytes()).items, now=NOW - timedelta(hours=5))
    for day_file in HF_DAYS:
        day = datetime.strptime(day_file.stem, "%Y-%m-%d").date()
        paper_records.save_picks(db, parse_daily(day_file.read_bytes(), day).picks, now=NOW)
    while paper_records.index_search(db):
        pass


def test_0007_0017_0018_leave_what_the_application_computes(db: Database) -> None:
    _library(db)
    with db.engine.connect() as connection:
        versions = _rows(
            connection, "SELECT id, categories, title, abstract, ai_related FROM version ORDER BY id"
        )
        papers = _rows(connection, f"SELECT {PAPER_COLUMNS} FROM paper ORDER BY id")
        totals = _rows(connection, f"SELECT {TOTALS} FROM library_total")
        with_versions = set(
            connection.execute(sa.text("SELECT id FROM paper WHERE latest_version > 0")).scalars()
        )
    # The application's rule, applied to the stored text, is what the writes stored.
    verdicts = {
        vid: classify.is_ai_related(json.loads(c) if isinstance(c, str) else c, title or "", abstract or "")
        for vid, c, title, abstract, _ in versions
    }
    assert verdicts == {vid: bool(ai) for vid, *_, ai in versions}
    assert 0 < sum(verdicts.values()) < len(verdicts) and len(with_versions) < len(
        papers
    )  # both kinds, stubs

    engine = db.engine
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0006")
        # Every verdict wrong: 0007 must recompute each one, not keep what it finds.
        connection.execute(sa.text("UPDATE version SET ai_related = NOT ai_related"))

    def upgrade(revision: str) -> sa.Connection:
        connection = engine.connect()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        connection.commit()
        return connection

    with upgrade("0007") as connection:
        after = dict(_rows(connection, "SELECT id, ai_related FROM version"))
        assert {vid: bool(ai) for vid, ai in after.items()} == verdicts
    with upgrade("0017") as connection:
        assert _rows(connection, f"SELECT {TOTALS} FROM library_total") == totals
        flags = _rows(connection, "SELECT id, ai_related, revised, picked FROM paper ORDER BY id")
        assert [(pid, bool(a), bool(r), bool(p)) for pid, a, r, p in flags] == [
            (pid, bool(a), bool(r), bool(p)) for pid, a, r, p, *_ in papers
        ]
    with upgrade("0018") as connection:
        rebuilt = _rows(connection, f"SELECT {PAPER_COLUMNS} FROM paper ORDER BY id")
        assert [(pid, *map(bool, f), int(k), int(p)) for pid, *f, k, p in rebuilt] == [
            (pid, *map(bool, f), int(k), int(p)) for pid, *f, k, p in papers
        ]
        # The index is left to the indexer: every paper with a version waits for it, and no entry is there.
        stale = set(connection.execute(sa.text("SELECT id FROM paper WHERE search_stale = true")).scalars())
        assert stale == with_versions
        assert connection.execute(sa.text("SELECT count(*) FROM search_doc")).scalar_one() == 0
    with upgrade("head"):
        pass
    while paper_records.index_search(db):
        pass
    assert_keys_and_index(db)


# Pieces of follows: every field, quotes (typographic too), TeX, accents, names in both orders, particles,
# categories and their aliases, archives, old and new ids, operators, parentheses, and mistakes of each kind.
PIECES = (
    "learning", "Models", "multi-agent", '"large language models"', "“policy lag”", "ti:Diffusion",
    'abs:"reinforcement learning"', "abs:rollout", "Schr\\\"odinger", "$k$-means", "\\emph{sparse}",
    "au:Li", 'au:"Zeng Li"', 'au:"Li, Zeng"', 'au:"van der Schee"', "au:R\\'emy", 'au:"J.-P. Serre"',
    'au:"Garcia-Lopez, M."', "au:Łukasz", 'au:"John Smith, Jr."', "cat:cs.DC", "cat:math.MP", "cat:CS.lg",
    "cat:cs.*", "cat:hep-th", "cat:hep-th.*", "cat:stat.TH", "cat:math", "id:2611.08864",
    "id:arXiv:2411.17700", "id:math.GT/0309136", "id:quant-ph/0201082", "AND", "OR", "NOT", "ANDNOT", "and",
    "(", ")", "straße",
    "Æther", "ﬁne", "GPT-4o", "cat:cs.ML", "cat:foo", "id:2611.08864v2", "xyz:1", "ti:", "-word", "wild*",
    '""', '"open', "au:,", "$\\alpha$", "title:graphs", "https://arxiv.org/abs/2611.08864", "au:G\\\"odel",
)  # fmt: skip


def _follows(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6))) for _ in range(count)]


def _application_form(text: str) -> str | None:
    try:
        return parse(text).canonical()
    except QueryError:
        return None


def test_0004_frozen_grammar_gives_the_applications_normal_form() -> None:
    frozen = _migration("0004")

    def frozen_form(text: str) -> str | None:
        try:
            return str(frozen._canonical(frozen._parse(text)))
        except frozen._QueryError:
            return None

    follows = [*PIECES, *_follows(3000, seed=4), "x " * 51, "(" * 21 + "x" + ")" * 21, "a" * 1001]
    found = {text: frozen_form(text) for text in follows}
    assert found == {text: _application_form(text) for text in follows}
    refused = sum(form is None for form in found.values())
    assert 0 < refused < len(follows)  # both kinds are exercised


def test_0004_leaves_the_applications_normal_forms_and_the_older_duplicate(db_url: str) -> None:
    # Distinct texts; several share a normal form (an alias and its category, a name in both orders).
    extra = ["cat:math.MP", "cat:math-ph", 'au:"Li, Zeng"', 'au:"Zeng Li"', "Models", "models"]
    follows = list(dict.fromkeys([*PIECES[:30], *extra, *_follows(40, seed=1)]))
    engine = make_engine(db_url)
    config = alembic_config(engine)
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
        conn.execute(
            sa.text(
                "insert into follow (subscriber_id, query, canonical, created_at, revisions, instant) "
                "values (1, :q, :c, :t, true, false)"
            ),
            # The stored form is the old grammar's: here a marked copy of the text, unlike any new form.
            [{"q": query, "c": f"old {query}", "t": "2024-01-01 00:00:00"} for query in follows],
        )
        ids = dict(_rows(conn, "select query, id from follow"))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0004")
        rows = _rows(conn, "select id, query, canonical from follow order by id")
    engine.dispose()
    expected: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    for query in follows:
        form = _application_form(query)
        if form is None:
            expected.append((ids[query], query, f"old {query}"))  # no longer parses: left as it was
        elif form not in seen:
            seen.add(form)
            expected.append((ids[query], query, form))
    assert rows == sorted(expected)
    assert len(rows) < len(follows)  # some were duplicates under the normal form


def test_0007_frozen_rule_lists_the_applications_categories_and_cues() -> None:
    # The recorded texts above need only some cues; the copy must hold every one, in the same order.
    frozen = _migration("0007")
    assert frozen.AI_CATEGORIES == classify.AI_CATEGORIES
    assert [tuple(cue) for cue in frozen.CUES] == [
        (cue.label, cue.spec, cue.title_only, cue.acronym) for cue in classify.CUES
    ]
