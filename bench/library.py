"""Benchmark: the whole of arXiv in the library — the web pages at 10k, 1M and 3M stored versions.

What it does, per database (SQLite, PostgreSQL) and per size (stored versions):

1. **A synthetic snapshot** in the Kaggle ``arxiv-metadata-oai-snapshot`` format (JSON Lines, one paper per
   line with its whole version history), seeded, so every run sees the same papers; written once to the
   cache folder (``snapshot-N.jsonl``) and reused. What is in it:

   - new-style ids (``0704.00001``), months from April 2007 on, the same number of papers each month;
   - 1..5 versions per paper (55%, 28%, 10%, 4%, 3%: 1.72 versions per paper, the issue's store had
     1,000,254 versions of 589k papers, 1.70), each ``created`` a few weeks after the one before;
   - a title of 6..16 words and an abstract of 80..220 words (about 1,000 characters, as arXiv's), drawn
     from a Zipf-like vocabulary (weight of rank r is 1 / (r + 3)): the words of the recorded snapshot
     sample and RSS feed first (most frequent first), then made-up words to 40,000, so a few words are
     in nearly every abstract and most are in a handful;
   - the benchmark's search words are planted, so their frequency does not depend on the vocabulary:
     ``COMMON`` ("transformer", in 4% of the papers, title or abstract), ``RARE`` (a made-up word in 1 of
     2,500 papers: 4 papers at 10k versions, 240 at 1M) and the phrase ``PHRASE`` ("language model",
     adjacent, in 2% of the abstracts);
   - 1..8 authors from a pool of 600 first and 2,400 last names, with ``authors_parsed``; 1..3
     categories, primary first, drawn by weight from 40 categories of every archive (a third AI-related).

2. **A store per (database, size)**, built through the production path: ``core.db_migrate.migrate``, then
   ``core.papers.pipeline.backfill`` over ``papertrail.cli.backfill.snapshot_batches`` (exactly what
   ``papertrail backfill snapshot`` runs, minus its progress bar), then 30 days of news through
   ``paper_records.save_versions`` (``Novelty.NEWS``, what the daily ingest calls) at
   ``--news-per-day`` versions a day (two thirds new papers, one third revisions of backfilled ones), 5
   Hugging Face picks a day (``paper_records.save_picks``, one of them a stub paper) and one
   ``arxiv-rss`` source run a day. The news is the same at every size: the day's news does not grow with the
   library. The size is the backfill's versions; the news comes on top. A PostgreSQL store is then
   ``ANALYZE``d: the planner needs the statistics of the new tables and of the search index's tsvector column
   (``search_doc.doc``) to pick the indexes, and production's autovacuum would have gathered them by the time
   anyone reads the pages; a store built in one go has none yet. Built stores are kept (SQLite:
   ``library-N.db`` in ``--cache``; PostgreSQL: schema ``library_N`` in the database ``--pg-database``,
   created with ``createdb`` when missing) with their build figures in ``built.json``, so a re-run measures at
   once; ``--rebuild`` builds again.

3. **The backfill rate**: ``--rate-versions`` versions of the snapshot backfilled into a fresh, empty store
   (the same calls as step 2), versions stored per second; the figure to compare before and after a
   change of the write path (the issue's 15% bound). The build's own rate (into a growing store) is
   reported as well.

4. **The pages**, through the real web app: ``papertrail.web.app.build_app`` served by uvicorn in a separate
   process on 127.0.0.1 (one worker, like ``papertrail run``), requested over HTTP with httpx, one request
   at a time: 2 warm-up requests, then ``--requests`` timed ones (wall time of the whole response, client
   side), p50 and p95. A page slower than ``--page-budget`` seconds in all stops early, after at least 5
   timed requests (the table says n). The app's clock is fixed at the end of the build's news, so the "last
   24 hours" hold the same news however long after the build the pages are measured.

The pages (:data:`PAGES`; add a line for a new page; ``--pages status,metrics`` measures some only):
``/``; ``/papers`` (news before history, newest update first), its second page (``older``: the href of
the first page's ``rel="next"`` link, a keyset cursor ``?after=<paper id>``, read once per store, then
timed) and the history (``from=history``); the two other sorts; ``/papers?q=`` with the common word, its
second page (by its ``rel="next"`` link), the common word ranked by relevance (``sort=relevance``), the
rare word, the phrase in quotes (``q="language model"``: the search reads the follow language, so quotes
make a phrase) and an author (``q=au:NAME``, the surname most often among the snapshot's first authors;
the pool of surnames is drawn uniformly, so it is on about 0.1% of the papers); a paper page (a paper
with 3 versions, in the middle of the library) and ``/metrics``.

Usage: python bench/library.py [--sizes 10000,1000000] [--databases sqlite,postgresql] [--requests 20]
       [--rate-versions 50000] [--news-per-day 150] [--cache DIR] [--rebuild] [--json FILE]
       [--pages status,papers,older,history,ingested,published,common,commonolder,relevance,rare,phrase,
                author,paper,metrics] [--build-only]
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from core.papers import paper_records, run_records

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from core.db import (  # noqa: E402
    Database,
    make_engine,
)
from core.db_migrate import migrate  # noqa: E402
from core.models import RunState  # noqa: E402
from core.papers.paper_records import Novelty  # noqa: E402
from core.papers.pipeline import backfill  # noqa: E402
from core.values import AnnounceType, CommunityPick, PaperIn  # noqa: E402
from papertrail.cli.backfill import snapshot_batches  # noqa: E402

POSTGRES_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
DEFAULT_CACHE = Path(os.environ.get("PAPERTRAIL_BENCH_CACHE", "/tmp/papertrail-bench-library"))
CORPUS = ROOT / "tests" / "corpus"

COMMON = "transformer"
COMMON_SHARE = 0.04
RARE = "quorvexine"
RARE_SHARE = 1 / 2500
PHRASE = "language model"
PHRASE_SHARE = 0.02
NEWS_DAYS = 30
PICKS_PER_DAY = 5
VOCABULARY = 40_000
SEED = 15

# A page's address: a path and query ("{paper}" is replaced by a paper id), or a function that finds it
# with the running app (a cursor's link, read once per store) or from the snapshot.
Target = str | Callable[[httpx.Client, "Built"], str]


def next_link(path: str) -> Callable[[httpx.Client, Built], str]:
    """The address of ``path``'s second page: the href of its ``rel="next"`` link (a cursor)."""

    def find(client: httpx.Client, built: Built) -> str:
        response = client.get(path)
        match = re.search(r'<a href="([^"]+)" rel="next"', response.text)
        if match is None:
            raise LookupError(f"{path} has no rel=next link (HTTP {response.status_code})")
        return html.unescape(match[1])

    return find


def author_search(client: httpx.Client, built: Built) -> str:
    """``/papers?q=au:NAME`` for the surname most often among the authors (:func:`common_surname`)."""
    return f"/papers?q=au:{common_surname()}"


@functools.cache
def common_surname() -> str:
    """The surname most often among the authors of the first 10,000 versions of every snapshot.

    The snapshot draws each author's surname uniformly from 2,400 (so every surname is on about 0.1% of
    the papers: about 600 papers at 1M versions), and a size's first papers are the same at every size
    (one seeded draw), so this is the same name for every store.
    """
    counts: Counter[str] = Counter()
    for record in snapshot_records(10_000):
        counts.update({last for last, _, _ in record["authors_parsed"]})
    return counts.most_common(1)[0][0]


# (key for --pages, name in the table, target). Add a line to measure another page.
PAGES: tuple[tuple[str, str, Target], ...] = (
    ("status", "/", "/"),
    ("papers", "/papers (updated)", "/papers"),
    ("older", "/papers, second page (older →)", next_link("/papers")),
    ("history", "/papers?from=history", "/papers?from=history"),
    ("ingested", "/papers?sort=ingested", "/papers?sort=ingested"),
    ("published", "/papers?sort=published", "/papers?sort=published"),
    ("common", f"/papers?q={COMMON} (common)", f"/papers?q={COMMON}"),
    ("commonolder", f"/papers?q={COMMON}, second page", next_link(f"/papers?q={COMMON}")),
    ("relevance", f"/papers?q={COMMON}&sort=relevance", f"/papers?q={COMMON}&sort=relevance"),
    ("rare", f"/papers?q={RARE} (rare)", f"/papers?q={RARE}"),
    ("phrase", f'/papers?q="{PHRASE}" (phrase)', "/papers?q=" + quote_plus(f'"{PHRASE}"')),
    ("author", "/papers?q=au:NAME (a surname on ~0.1% of papers)", author_search),
    ("paper", "/papers/ID", "/papers/{paper}"),
    ("metrics", "/metrics", "/metrics"),
)


# Categories and their weights (primary or cross-list); the first block is AI-related (core.papers.classify).
CATEGORIES: tuple[tuple[str, int], ...] = (
    ("cs.LG", 30),
    ("cs.CV", 22),
    ("cs.CL", 16),
    ("cs.AI", 14),
    ("stat.ML", 8),
    ("cs.RO", 5),
    ("cs.IR", 3),
    ("cs.NE", 2),
    ("cs.CR", 6),
    ("cs.DC", 4),
    ("cs.DS", 4),
    ("cs.SE", 4),
    ("cs.IT", 4),
    ("cs.NI", 3),
    ("cs.HC", 3),
    ("cs.PL", 2),
    ("math.OC", 6),
    ("math.PR", 6),
    ("math.AP", 6),
    ("math.CO", 6),
    ("math.NT", 4),
    ("math.AG", 4),
    ("math.ST", 4),
    ("hep-th", 10),
    ("hep-ph", 10),
    ("hep-ex", 4),
    ("gr-qc", 6),
    ("quant-ph", 14),
    ("astro-ph.GA", 8),
    ("astro-ph.CO", 6),
    ("astro-ph.SR", 6),
    ("astro-ph.HE", 5),
    ("cond-mat.mtrl-sci", 8),
    ("cond-mat.str-el", 5),
    ("cond-mat.stat-mech", 5),
    ("physics.optics", 4),
    ("physics.flu-dyn", 3),
    ("eess.SP", 4),
    ("eess.IV", 3),
    ("q-bio.NC", 2),
)
VERSION_WEIGHTS = ((1, 55), (2, 28), (3, 10), (4, 4), (5, 3))
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
FIRST_MONTH = (2007, 4)
MONTHS = 220  # April 2007 .. July 2025


# -- the synthetic snapshot ----------------------------------------------------------------------------


def _corpus_words() -> list[str]:
    """The words of the recorded snapshot sample and RSS feed, most frequent first."""
    counts: Counter[str] = Counter()
    for path in [*CORPUS.glob("arxiv-snapshot/*.jsonl"), *CORPUS.glob("arxiv-rss/*.xml")]:
        counts.update(re.findall(r"[a-z]{3,14}", path.read_text(errors="replace").lower()))
    return [word for word, _ in counts.most_common() if word not in (COMMON, RARE)]


def _made_up_words(rng: random.Random, count: int, taken: set[str]) -> list[str]:
    """Pronounceable made-up words, none of them a real one already in the vocabulary."""
    onsets = [*"bcdfghklmnprstvz", "br", "cr", "dr", "fl", "gr", "pl", "pr", "st", "tr", "ch", "sh", "th"]
    vowels = [*"aeiou", "ai", "ea", "io", "ou"]
    words: list[str] = []
    while len(words) < count:
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
        if word not in taken and word != RARE:
            taken.add(word)
            words.append(word)
    return words


@dataclass
class Generator:
    """Draws the synthetic papers; one seeded random source, so a size's snapshot is always the same."""

    rng: random.Random = field(default_factory=lambda: random.Random(SEED))

    def __post_init__(self) -> None:
        real = _corpus_words()
        self.vocabulary = real + _made_up_words(self.rng, VOCABULARY - len(real), set(real))
        weights = [1.0 / (rank + 3) for rank in range(len(self.vocabulary))]
        self.cumulative = list(_accumulate(weights))
        firsts = _made_up_words(self.rng, 600, set(self.vocabulary))
        lasts = _made_up_words(self.rng, 2400, set(self.vocabulary) | set(firsts))
        self.firsts = [w.capitalize() for w in firsts]
        self.lasts = [w.capitalize() for w in lasts]
        self.categories = [name for name, _ in CATEGORIES]
        self.category_cumulative = list(_accumulate([float(w) for _, w in CATEGORIES]))
        self.version_counts = [n for n, _ in VERSION_WEIGHTS]
        self.version_cumulative = list(_accumulate([float(w) for _, w in VERSION_WEIGHTS]))

    def words(self, count: int) -> list[str]:
        """``count`` words drawn from the Zipf-like vocabulary."""
        return self.rng.choices(self.vocabulary, cum_weights=self.cumulative, k=count)

    def text(self, low: int, high: int) -> list[str]:
        """Between ``low`` and ``high`` words."""
        return self.words(self.rng.randint(low, high))

    def plant(self, words: list[str], term: str) -> None:
        """Put ``term`` (one or more words, kept adjacent) at a random place of ``words``."""
        at = self.rng.randrange(len(words) + 1)
        words[at:at] = term.split()

    def title_and_abstract(self) -> tuple[str, str]:
        """A title and an abstract, with the benchmark's search words planted at their shares."""
        title, abstract = self.text(6, 16), self.text(80, 220)
        roll = self.rng.random()
        if roll < COMMON_SHARE:
            self.plant(title if roll < COMMON_SHARE / 2 else abstract, COMMON)
        if self.rng.random() < RARE_SHARE:
            self.plant(abstract, RARE)
        if self.rng.random() < PHRASE_SHARE:
            self.plant(abstract, PHRASE)
        return " ".join(title).capitalize(), " ".join(abstract).capitalize() + "."

    def authors(self) -> list[tuple[str, str]]:
        """1..8 (last, first) names."""
        count = min(8, 1 + int(self.rng.expovariate(0.45)))
        return [(self.rng.choice(self.lasts), self.rng.choice(self.firsts)) for _ in range(count)]

    def category_list(self) -> list[str]:
        """1..3 distinct categories, primary first."""
        count = self.rng.choice((1, 1, 2, 2, 3))
        picked = self.rng.choices(self.categories, cum_weights=self.category_cumulative, k=count)
        return list(dict.fromkeys(picked))

    def version_count(self) -> int:
        """How many versions a paper has."""
        return self.rng.choices(self.version_counts, cum_weights=self.version_cumulative, k=1)[0]


def _accumulate(values: Sequence[float]) -> Iterator[float]:
    total = 0.0
    for value in values:
        total += value
        yield total


def _rfc822(moment: datetime) -> str:
    return (
        f"{_DAYS[moment.weekday()]}, {moment.day} {_MONTHS[moment.month - 1]} {moment.year} "
        f"{moment:%H:%M:%S} GMT"
    )


def snapshot_records(versions: int) -> Iterator[dict[str, Any]]:
    """Kaggle snapshot records holding ``versions`` versions in all (the last paper may be cut short)."""
    gen = Generator()
    per_month = max(1, round(versions / 1.72 / MONTHS))
    stored = 0
    index = 0
    while stored < versions:
        month_index, serial = divmod(index, per_month)
        year = FIRST_MONTH[0] + (FIRST_MONTH[1] - 1 + month_index) // 12
        month = (FIRST_MONTH[1] - 1 + month_index) % 12 + 1
        arxiv_id = f"{year % 100:02d}{month:02d}.{serial + 1:05d}"
        count = min(gen.version_count(), versions - stored)
        created = datetime(year, month, 1, tzinfo=UTC) + timedelta(
            days=gen.rng.randrange(28), seconds=gen.rng.randrange(86_400)
        )
        history = []
        for number in range(1, count + 1):
            history.append({"version": f"v{number}", "created": _rfc822(created)})
            created += timedelta(days=gen.rng.randint(3, 120), seconds=gen.rng.randrange(86_400))
        title, abstract = gen.title_and_abstract()
        names = gen.authors()
        yield {
            "id": arxiv_id,
            "submitter": f"{names[0][1]} {names[0][0]}",
            "authors": ", ".join(f"{first} {last}" for last, first in names),
            "title": title,
            "comments": f"{gen.rng.randint(4, 40)} pages, {gen.rng.randint(1, 12)} figures",
            "journal-ref": None,
            "doi": None,
            "report-no": None,
            "categories": " ".join(gen.category_list()),
            "license": "http://creativecommons.org/licenses/by/4.0/",
            "abstract": "  " + abstract + "\n",
            "versions": history,
            "update_date": (created - timedelta(days=1)).date().isoformat(),
            "authors_parsed": [[last, first, ""] for last, first in names],
        }
        stored += count
        index += 1


def snapshot_file(cache: Path, versions: int) -> Path:
    """The cached synthetic snapshot of ``versions`` versions, written on first use."""
    path = cache / f"snapshot-{versions}.jsonl"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    started = time.perf_counter()
    with partial.open("w", encoding="utf-8") as out:
        for record in snapshot_records(versions):
            out.write(json.dumps(record, ensure_ascii=False))
            out.write("\n")
    partial.rename(path)
    print(f"  snapshot of {versions:,} versions written in {time.perf_counter() - started:.0f} s: {path}")
    return path


def paper_to_show(path: Path) -> str:
    """A paper with 3 versions from the middle of the snapshot: the paper page's subject."""
    size = path.stat().st_size
    with path.open("rb") as stream:
        stream.seek(size // 2)
        stream.readline()
        for line in stream:
            record = json.loads(line)
            if len(record["versions"]) == 3:
                return str(record["id"])
    raise LookupError(f"{path} has no paper with 3 versions after its middle")


# -- stores --------------------------------------------------------------------------------------------


def database_url(database: str, size: int, cache: Path, pg_database: str) -> str:
    """Where the store of ``size`` versions lives."""
    if database == "sqlite":
        return f"sqlite:///{cache}/library-{size}.db"
    return f"{POSTGRES_SERVER}/{pg_database}?options=-csearch_path%3Dlibrary_{size}"


def ensure_pg_database(pg_database: str) -> None:
    """Create the benchmark's PostgreSQL database when it is missing (``createdb``)."""
    engine = sa.create_engine(f"{POSTGRES_SERVER}/postgres")
    with engine.connect() as connection:
        found = connection.execute(
            sa.text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": pg_database}
        ).first()
    engine.dispose()
    if found is None:
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", pg_database], check=True)


def fresh_store(database: str, url: str) -> Database:
    """An empty, migrated store at ``url`` (the SQLite file deleted, the PostgreSQL schema recreated)."""
    if database == "sqlite":
        path = Path(url.split("///", 1)[1])
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    else:
        schema = re.search(r"search_path%3D(\w+)", url)
        assert schema is not None
        admin = sa.create_engine(url.split("?", 1)[0])
        with admin.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema[1]}" CASCADE'))
            connection.execute(sa.text(f'CREATE SCHEMA "{schema[1]}"'))
        admin.dispose()
    engine = make_engine(url)
    migrate(engine)
    return Database(engine)


def timed_backfill(db: Database, path: Path, limit: int | None = None) -> tuple[int, float]:
    """What ``papertrail backfill snapshot`` calls, over ``path`` (its first ``limit`` versions)."""
    batches = snapshot_batches(path)
    if limit is not None:
        batches = _first_versions(batches, limit)
    started = time.perf_counter()
    report = backfill(db, "snapshot", batches)
    return report.fetched, time.perf_counter() - started


def _first_versions(batches: Iterator[Any], limit: int) -> Iterator[Any]:
    taken = 0
    for batch in batches:
        if taken >= limit:
            return
        yield batch
        taken += len(batch.papers)


def add_news(db: Database, path: Path, per_day: int, end: datetime) -> int:
    """30 days of news up to ``end`` through the daily ingest's calls; returns the versions stored."""
    gen = Generator(random.Random(SEED + 1))
    known = _sample_ids(path, NEWS_DAYS * per_day, gen.rng)
    stored = 0
    serial = 0
    for day in range(NEWS_DAYS, 0, -1):
        now = end - timedelta(days=day - 1, hours=gen.rng.randint(1, 20))
        papers: list[PaperIn] = []
        for _ in range(per_day - per_day // 3):
            serial += 1
            papers.append(_news_paper(gen, f"2612.{serial:05d}", 1, now))
        for _ in range(per_day // 3):
            arxiv_id = known.pop()
            papers.append(_news_paper(gen, arxiv_id, 9, now))
        stored += len(paper_records.save_versions(db, papers, now=now, novelty=Novelty.NEWS).new_version_ids)
        picks = [
            CommunityPick(
                arxiv_id=p.arxiv_id,
                day=now.date(),
                title=p.title,
                summary=p.abstract[:300],
                authors=p.authors,
                upvotes=gen.rng.randint(1, 200),
            )
            for p in papers[: PICKS_PER_DAY - 1]
        ]
        picks.append(
            CommunityPick(
                f"2612.{90000 + day:05d}", now.date(), "A stub", "Not on arXiv yet", ("A. Person",), 3
            )
        )
        paper_records.save_picks(db, picks, now=now)
        run = run_records.start_run(db, "arxiv-rss", now=now)
        run_records.finish_run(db, run, RunState.OK, now=now, fetched=len(papers), new_papers=len(papers))
    return stored


def _news_paper(gen: Generator, arxiv_id: str, number: int, now: datetime) -> PaperIn:
    title, abstract = gen.title_and_abstract()
    return PaperIn(
        arxiv_id=arxiv_id,
        version=number,
        title=title,
        abstract=abstract,
        authors=tuple(f"{first} {last}" for last, first in gen.authors()),
        categories=tuple(gen.category_list()),
        announce_type=AnnounceType.NEW if number == 1 else AnnounceType.REPLACE,
        announced_at=now - timedelta(hours=2),
        source="arxiv-rss",
    )


def _sample_ids(path: Path, count: int, rng: random.Random) -> list[str]:
    ids = []
    with path.open("rb") as stream:
        for line in stream:
            ids.append(json.loads(line[: line.index(b",")] + b"}")["id"])
    return rng.sample(ids, min(count, len(ids)))


@dataclass
class Built:
    """How a cached store was built."""

    database: str
    size: int
    backfill_versions: int
    backfill_seconds: float
    news_versions: int
    build_seconds: float
    clock: str
    paper: str
    # The search indexer's run after the build (papers whose entries the backfill left, and seconds).
    indexed_papers: int = 0
    index_seconds: float = 0.0

    @property
    def backfill_rate(self) -> float:
        """Versions stored per second by the backfill into the growing store."""
        return self.backfill_versions / self.backfill_seconds if self.backfill_seconds else 0.0


def built_path(cache: Path) -> Path:
    """The JSON file that records the built stores."""
    return cache / "built.json"


def load_built(cache: Path) -> dict[str, dict[str, Any]]:
    """The build records, by ``database:size``."""
    path = built_path(cache)
    return json.loads(path.read_text()) if path.exists() else {}


def store_exists(database: str, url: str) -> bool:
    """Whether the cached store is still there (someone may have deleted the file or schema)."""
    if database == "sqlite":
        return Path(url.split("///", 1)[1]).exists()
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(sa.text("SELECT to_regclass('version')")).scalar() is not None
    finally:
        engine.dispose()


def build(database: str, size: int, args: argparse.Namespace) -> Built:
    """The cached store of ``size`` versions on ``database``, built when missing (or ``--rebuild``)."""
    cache: Path = args.cache
    url = database_url(database, size, cache, args.pg_database)
    records = load_built(cache)
    key = f"{database}:{size}"
    if key in records and not args.rebuild and store_exists(database, url):
        return Built(**records[key])
    path = snapshot_file(cache, size)
    print(f"  building {key} ...", flush=True)
    started = time.perf_counter()
    db = fresh_store(database, url)
    versions, seconds = timed_backfill(db, path)
    end = datetime.now(UTC).replace(microsecond=0)
    news = add_news(db, path, args.news_per_day, end)
    # The backfill left its papers' search entries to the indexer, which the service runs in the
    # background: run it to the end here (what `papertrail index` does), timed on its own.
    indexing = time.perf_counter()
    indexed = 0
    while written := paper_records.index_search(db):
        indexed += written
    paper_records.tidy_search_index(db)
    index_seconds = time.perf_counter() - indexing
    if database == "postgresql":
        with db.engine.begin() as connection:
            connection.execute(sa.text("ANALYZE"))
    db.engine.dispose()
    built = Built(
        database=database,
        size=size,
        backfill_versions=versions,
        backfill_seconds=seconds,
        news_versions=news,
        build_seconds=time.perf_counter() - started,
        clock=(end + timedelta(hours=1)).isoformat(),
        paper=paper_to_show(path),
        indexed_papers=indexed,
        index_seconds=index_seconds,
    )
    records = load_built(cache)
    records[key] = asdict(built)
    built_path(cache).write_text(json.dumps(records, indent=2))
    return built


def backfill_rate(database: str, args: argparse.Namespace) -> float:
    """Versions per second of a backfill of ``--rate-versions`` into a fresh, empty store."""
    path = snapshot_file(args.cache, max(args.rate_versions, 10_000))
    url = database_url(database, 0, args.cache, args.pg_database).replace("library-0", "rate")
    url = url.replace("library_0", "library_rate")
    db = fresh_store(database, url)
    versions, seconds = timed_backfill(db, path, args.rate_versions)
    db.engine.dispose()
    return versions / seconds


# -- pages ---------------------------------------------------------------------------------------------


def web_app() -> Any:
    """The app uvicorn serves (``--factory``): ``build_app`` over the store in PAPERTRAIL_DATABASE_URL.

    The clock is fixed at PAPERTRAIL_BENCH_CLOCK (the end of the build's news), so the 24-hour numbers
    count the same news on every run.
    """
    from core.config import Settings
    from papertrail.service.context import build_context
    from papertrail.web.app import build_app

    clock = datetime.fromisoformat(os.environ["PAPERTRAIL_BENCH_CLOCK"])
    return build_app(build_context(Settings()), clock=lambda: clock)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Timing:
    """One page's timed requests."""

    database: str
    size: int
    page: str
    samples: list[float]
    status: int

    @property
    def p50(self) -> float:
        """Median, milliseconds."""
        return _percentile(self.samples, 0.50)

    @property
    def p95(self) -> float:
        """95th percentile (nearest rank), milliseconds."""
        return _percentile(self.samples, 0.95)


def _percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))
    return ordered[rank] * 1000


def measure_pages(built: Built, url: str, args: argparse.Namespace) -> list[Timing]:
    """Serve the app with uvicorn on loopback and time every page of :data:`PAGES`."""
    port = _free_port()
    env = {
        **os.environ,
        "PAPERTRAIL_DATABASE_URL": url,
        "PAPERTRAIL_BENCH_CLOCK": built.clock,
        "PYTHONPATH": str(ROOT),
    }
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "bench.library:web_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    timings = []
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=120) as client:
            _wait_ready(client, server)
            for key, name, target in PAGES:
                if args.pages and key not in args.pages:
                    continue
                path = target(client, built) if callable(target) else target.format(paper=built.paper)
                if callable(target):
                    print(f"    ({key}: {path})", flush=True)
                timings.append(_time_page(client, built, name, path, args))
                print(
                    f"    {name:<36} p50 {timings[-1].p50:8.1f} ms  p95 {timings[-1].p95:8.1f} ms", flush=True
                )
    finally:
        server.terminate()
        server.wait(timeout=30)
    return timings


def _wait_ready(client: httpx.Client, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {server.returncode}")
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("uvicorn did not answer /healthz within 120 s")


def _time_page(client: httpx.Client, built: Built, name: str, path: str, args: argparse.Namespace) -> Timing:
    status = 0
    for _ in range(2):
        status = client.get(path).status_code
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < args.requests:
        before = time.perf_counter()
        response = client.get(path)
        samples.append(time.perf_counter() - before)
        status = response.status_code
        if len(samples) >= 5 and time.perf_counter() - started > args.page_budget:
            break
    return Timing(built.database, built.size, name, samples, status)


# -- the report ----------------------------------------------------------------------------------------


def report(timings: Sequence[Timing], builds: Sequence[Built], rates: dict[str, float]) -> str:
    """The tables: pages by database and size, growth from the smallest to the largest size, builds."""
    lines = []
    sizes = sorted({t.size for t in timings})
    databases = list(dict.fromkeys(t.database for t in timings))
    by = {(t.database, t.size, t.page): t for t in timings}
    header = "| page | " + " | ".join(f"{db} {size:,} p50 / p95 ms" for db in databases for size in sizes)
    if len(sizes) > 1:
        header += " | " + " | ".join(f"{db} growth p50" for db in databases)
    lines += [header + " |", "|" + "---|" * header.count("|")]
    for _, name, _ in PAGES:
        if not any(key[2] == name for key in by):
            continue
        cells = []
        for db in databases:
            for size in sizes:
                t = by.get((db, size, name))
                flag = "" if t is None or t.status == 200 else f" (HTTP {t.status})"
                few = "" if t is None or len(t.samples) >= 20 else f" (n={len(t.samples)})"
                cells.append("—" if t is None else f"{t.p50:,.0f} / {t.p95:,.0f}{few}{flag}")
        if len(sizes) > 1:
            for db in databases:
                small, large = by.get((db, sizes[0], name)), by.get((db, sizes[-1], name))
                cells.append(f"{large.p50 / small.p50:.1f}×" if small and large and small.p50 else "—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| store | backfill versions | backfill s | versions/s | news versions | indexed papers | index s "
        "| build s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for b in builds:
        lines.append(
            f"| {b.database} {b.size:,} | {b.backfill_versions:,} | {b.backfill_seconds:,.1f} | "
            f"{b.backfill_rate:,.0f} | {b.news_versions:,} | {b.indexed_papers:,} | {b.index_seconds:,.0f} | "
            f"{b.build_seconds:,.0f} |"
        )
    if rates:
        lines += ["", "| backfill into an empty store | versions/s |", "|---|---|"]
        lines += [f"| {db} | {rate:,.0f} |" for db, rate in rates.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Build or reuse the stores, measure the backfill and the pages, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000", help="stored versions, comma-separated (10000,1000000)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--requests", type=int, default=20, help="timed requests per page")
    parser.add_argument("--page-budget", type=float, default=60.0, help="seconds per page before stopping")
    parser.add_argument("--rate-versions", type=int, default=50_000, help="0 to skip the backfill rate")
    parser.add_argument("--news-per-day", type=int, default=150)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--pg-database", default="library_bench")
    parser.add_argument("--rebuild", action="store_true", help="build the stores again")
    parser.add_argument("--build-only", action="store_true", help="build the stores, measure nothing")
    parser.add_argument("--json", type=Path, help="write every sample here")
    keys = ", ".join(key for key, _, _ in PAGES)
    parser.add_argument("--pages", default="", help=f"measure only these pages (comma-separated: {keys})")
    args = parser.parse_args(argv)
    args.pages = {key for key in args.pages.split(",") if key}
    if args.pages - {key for key, _, _ in PAGES}:
        parser.error(
            f"unknown page(s) {', '.join(sorted(args.pages - {k for k, _, _ in PAGES}))}: use {keys}"
        )
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    databases = [d for d in args.databases.split(",") if d]
    unknown = set(databases) - {"sqlite", "postgresql"}
    if unknown:
        parser.error(f"unknown database(s) {', '.join(sorted(unknown))}: use sqlite and/or postgresql")
    if "postgresql" in databases:
        ensure_pg_database(args.pg_database)
    timings: list[Timing] = []
    builds: list[Built] = []
    rates: dict[str, float] = {}
    for database in databases:
        if args.rate_versions and not args.build_only:
            rates[database] = backfill_rate(database, args)
            print(f"{database}: backfill into an empty store {rates[database]:,.0f} versions/s", flush=True)
        for size in sizes:
            built = build(database, size, args)
            builds.append(built)
            print(f"{database} {size:,}: built in {built.build_seconds:,.0f} s", flush=True)
            if not args.build_only:
                url = database_url(database, size, args.cache, args.pg_database)
                timings += measure_pages(built, url, args)
    print()
    print(report(timings, builds, rates))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "timings": [{**asdict(t), "p50": t.p50, "p95": t.p95} for t in timings],
                    "builds": [asdict(b) for b in builds],
                    "rates": rates,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
