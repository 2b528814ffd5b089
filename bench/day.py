"""Benchmark: the day, end to end — the recorded arXiv day through ingest, matching, planning and rendering.

The production path, stage by stage, each stage one call of the entry point the service itself uses:

1. **ingest**: ``core.papers.pipeline.ingest_once`` with the real ``ArxivRssSource`` fetching the recorded
   rss.arxiv.org feed of 28 Nov 2024 (``tests/corpus/arxiv-rss/aioarxiv_rss_mock_feed.xml``, 2,797,604
   bytes, 1,504 items, all 20 archives; the feed ``papertrail demo`` ships) over loopback HTTP, as
   ``bench/ingest.py`` does: conditional GET, parse, ``save_versions``, the source run. Its last step,
   ``match_new``, is deferred to the next stage (``core.follows.index.match_new`` is patched out for this
   call
   only) so that the two can be timed apart; together they are exactly one ``ingest_once``.
2. **match**: ``core.follows.index.match_new(store)``: every new version against every active follow, one
query
   match written per (version, distinct matching query).
3. **plan**: ``core.delivery.digests.plan_digests`` at a time when every daily schedule is due: first the
fan-out
   of the query matches to the followers' Match rows (``match_records.expand_matches``), then
   one pending digest per due subscriber holding its matches (instant-only digests for subscribers not due).
4. **deliver**: ``core.delivery.digests.send_due_digests`` — what ``papertrail worker`` runs: claim in
batches of
   50, load the items (``digests_ranked``, then ``match_items`` for the shown ones) and guides, render
   each digest for its subscriber's channel with ``core.delivery.render.Renderer`` and record it sent
   (``finish_sent``). The notifiers send nothing: each one accepts the rendered message and returns at
   once, so this stage is database work plus rendering. The
   time spent inside ``Renderer.render`` is measured on its own: that is "pure rendering" for exactly
   these digests, and "DB on top" is (plan + deliver - render) / render (target: <= 25%).

The baseline is the same ``ingest_once`` (with its own ``match_new``) into a database with no follows at
all; "ingest + match / no follows" divides stage 1 + stage 2 by it, measured in the same run on the same
kind of database (target: <= 5x for realistic 100,000 subscribers, about a million follows, on PostgreSQL).

Populations (seeded: every run sees the same subscribers and follows; size n is not a prefix of 10n):

* **realistic**: each subscriber has 3..15 follows (uniform), drawn as
  - 45% one category, ``cat:cs.LG``, drawn in proportion to how often each category (primary or
    cross-list) occurs in the recorded day, so popular categories are shared by many subscribers; one in
    ten of these is the whole archive, ``cat:cs.*``, drawn by archive the same way;
  - 25% one author, as ``au:"Full Name"`` (or ``au:"F. Name"`` one time in four): 90% taken from the
    authors of other recorded days (the OAI arXivRaw sample of Oct 2016 and the snapshot sample of 2007,
    under ``tests/corpus``), so nearly all are absent from the day, 10% from the day's own authors;
  - 20% a two-word title phrase, ``ti:"policy optimization"`` (or bare ``"..."``, title or abstract,
    one time in three), adjacent non-stopwords of a real title: 80% from the other days' titles, 20% from
    the day's titles;
  - 10% a boolean: ``cat:C AND ti:"W"`` (W a title word of another day), ``cat:C1 ANDNOT cat:C2``,
    ``cat:C1 OR cat:C2``, ``au:"A" OR au:"B"``, categories drawn by the day's proportions;
  and 2% of follows are ``--instant``, 20% ``--new-only``. Duplicate queries of one subscriber are
  dropped (the store's unique key), so the average is a little under 9 follows per subscriber.
* **hot**: the same subscribers, numbers of follows, channels and schedules, but the query texts are the
  hot mix of ``bench/match.py`` (``bench.match.generate``; every word and name occurs in the day): a worst
  case for the output.

Subscribers, both populations: channels 40% ``email:``, 30% ``telegram:``, 15% ``slack:``, 15% ``webhook:``;
schedules 80% ``daily HH:MM`` (07:00, 08:00 or 09:00), 5% ``weekdays 08:00``, 5% ``weekly mon 08:00``, 10%
``instant``; timezones UTC, Europe/Berlin, America/New_York, America/Los_Angeles, Asia/Shanghai, Asia/Tokyo;
15% read Chinese. Subscribers and follows are created two days before the ingest, and planning runs one day
after it, so every daily schedule is due and most weekly ones are not.

Population setup is not measured: it is a bulk insert straight into the tables in its own process. Each
(population, size, database) is measured in a fresh process of its own, so its peak RSS
(``resource.getrusage``, ``ru_maxrss``: the whole process, including the loopback HTTP server thread and
the database driver; not tracemalloc) is its own; the figure given per stage is the peak up to the end of
that stage. Wall time by ``time.perf_counter``, CPU time by ``time.process_time`` (this process only; the
PostgreSQL server's CPU is not in it). Each stage has a timeout (``--stage-timeout``): a stage that runs over
is stopped (SIGALRM) and reported as a timeout, and the later stages of that case are skipped. The measured
process also gets an address-space limit (``--max-memory``) so that a run-away case fails alone instead of
taking the shared machine down.

SQLite: a file in a temporary folder. PostgreSQL: a new schema in ``--postgres`` per case, dropped after.

Usage: python bench/day.py [--sizes 1000] [--populations realistic,hot] [--databases sqlite,postgresql]
                           [--stage-timeout 600] [--max-memory 6] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, ClassVar, TypeVar
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlmodel import SQLModel  # noqa: E402

from bench.ingest import OAI_LIST, POSTGRES, RSS_FEED, SNAPSHOT, postgres_reachable  # noqa: E402
from bench.match import STOPWORDS, Weighted, generate  # noqa: E402
from core.channel import Notifier  # noqa: E402
from core.db import (  # noqa: E402
    Database,
    make_engine,
)
from core.db_migrate import migrate  # noqa: E402
from core.delivery.digests import plan_digests, send_due_digests  # noqa: E402
from core.delivery.render import Renderer  # noqa: E402
from core.follows.index import match_new  # noqa: E402
from core.follows.normalise import words  # noqa: E402
from core.follows.query import QueryError, parse  # noqa: E402
from core.guides import guide_records  # noqa: E402
from core.ledger import ledger_records  # noqa: E402
from core.models import utcnow  # noqa: E402
from core.papers.pipeline import ingest_once  # noqa: E402
from core.values import DigestItem, DigestRest, Message, PaperIn, Receipt, SendResult  # noqa: E402
from ingest.arxiv_oai_parse import parse_oai  # noqa: E402
from ingest.arxiv_rss import ArxivRssSource  # noqa: E402
from ingest.arxiv_rss_parse import parse_feed  # noqa: E402
from ingest.http import HttpClient  # noqa: E402
from papertrail.cli.backfill import snapshot_batches  # noqa: E402
from papertrail.cli.demo import serve_bytes  # noqa: E402

_T = TypeVar("_T")

CHANNELS = (("email", 0.40), ("telegram", 0.30), ("slack", 0.15), ("webhook", 0.15))
TIMEZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Shanghai",
    "Asia/Tokyo",
)
# Subscribers and follows exist this long before the ingest; planning runs this long after it.
BEFORE_INGEST = timedelta(days=2)
PLAN_AFTER_INGEST = timedelta(days=1)
INSERT_CHUNK = 20_000
RESULT_PREFIX = "RESULT "
# The tables the population goes into and the rows written are counted in (core.models registers them).
TABLES = SQLModel.metadata.tables


# ------------------------------------------------------------------------------------------------------------
# Populations


@dataclass(frozen=True, slots=True)
class NewSubscriber:
    """One generated subscriber and its follows' query texts (instant, revisions per follow)."""

    address: str
    schedule: str
    timezone: str
    language: str | None
    follows: tuple[tuple[str, bool, bool], ...]  # (query, instant, revisions)


def other_days() -> list[PaperIn]:
    """Papers of other recorded days (OAI arXivRaw, Oct 2016; the snapshot's first 200, 2007)."""
    papers = list(parse_oai(OAI_LIST.read_bytes()).papers)
    for batch in snapshot_batches(SNAPSHOT):
        papers.extend(batch.papers)
    return papers


def usable_name(name: str) -> bool:
    """Names a user could type as ``au:"..."`` (no quotes or brackets, at least two parts)."""
    return len(name.split()) >= 2 and not any(q in name for q in '"“”„()')


def title_phrases(papers: Sequence[PaperIn]) -> Counter[str]:
    """Adjacent non-stopword pairs of the titles, one count per paper."""
    counts: Counter[str] = Counter()
    for paper in papers:
        ws = [w for w in words(paper.title) if not w.isdigit()]
        counts.update(
            {f"{a} {b}" for a, b in itertools.pairwise(ws) if a not in STOPWORDS and b not in STOPWORDS}
        )
    return counts


class RealisticFollows:
    """Query texts of the realistic population (see the module docstring for the shares)."""

    def __init__(self, day: Sequence[PaperIn], others: Sequence[PaperIn], rng: random.Random) -> None:
        self.rng = rng
        self.categories = Weighted(Counter(c for p in day for c in p.categories))
        self.archives = Weighted(Counter(c.split(".")[0] for p in day for c in p.categories if "." in c))
        self.absent_authors = sorted({a for p in others for a in p.authors if usable_name(a)})
        self.present_authors = sorted({a for p in day for a in p.authors if usable_name(a)})
        self.other_phrases = Weighted(title_phrases(others))
        self.day_phrases = Weighted(title_phrases(day))
        self.other_words = Weighted(
            Counter(
                w
                for p in others
                for w in set(words(p.title))
                if w not in STOPWORDS and len(w) > 3 and not w.isdigit()
            )
        )

    def category(self) -> str:
        return f"cat:{self.categories.draw(self.rng)}"

    def author(self) -> str:
        pool = self.present_authors if self.rng.random() < 0.10 else self.absent_authors
        name = self.rng.choice(pool)
        if self.rng.random() < 0.25:
            *given, family = name.split()
            name = " ".join(f"{g[0]}." for g in given) + f" {family}"
        return f'au:"{name}"'

    def phrase(self) -> str:
        pool = self.day_phrases if self.rng.random() < 0.20 else self.other_phrases
        text = pool.draw(self.rng)
        return f'"{text}"' if self.rng.random() < 1 / 3 else f'ti:"{text}"'

    def boolean(self) -> str:
        shape = self.rng.randrange(4)
        if shape == 0:
            return f'{self.category()} AND ti:"{self.other_words.draw(self.rng)}"'
        if shape == 1:
            return f"{self.category()} ANDNOT {self.category()}"
        if shape == 2:
            return f"{self.category()} OR {self.category()}"
        return f"{self.author()} OR {self.author()}"

    def text(self) -> str:
        kind = self.rng.random()
        if kind < 0.45:
            if self.rng.random() < 0.10:
                return f"cat:{self.archives.draw(self.rng)}.*"
            return self.category()
        if kind < 0.70:
            return self.author()
        if kind < 0.90:
            return self.phrase()
        return self.boolean()


def population(kind: str, size: int, seed: int = 13) -> Iterator[NewSubscriber]:
    """``size`` subscribers of population ``kind`` ("realistic" or "hot"), seeded."""
    rng = random.Random(seed)
    day = parse_feed(RSS_FEED.read_bytes()).items
    counts = [rng.randint(3, 15) for _ in range(size)]
    texts: Iterator[str]
    if kind == "hot":
        texts = iter(generate(day, sum(counts)))
    else:
        realistic = RealisticFollows(day, other_days(), rng)
        texts = iter(lambda: realistic.text(), None)  # endless
    channels = [name for name, _ in CHANNELS]
    channel_weights = [weight for _, weight in CHANNELS]
    for number, count in enumerate(counts, start=1):
        channel = rng.choices(channels, channel_weights)[0]
        address = {
            "email": f"email:reader{number}@example.org",
            "telegram": f"telegram:{100_000 + number}",
            "slack": f"slack:C{number:09X}",
            "webhook": f"webhook:https://hooks.example.org/papertrail/{number}",
        }[channel]
        pick = rng.random()
        if pick < 0.80:
            schedule = f"daily {rng.choice(('07:00', '08:00', '09:00'))}"
        elif pick < 0.85:
            schedule = "weekdays 08:00"
        elif pick < 0.90:
            schedule = "weekly mon 08:00"
        else:
            schedule = "instant"
        follows = tuple((next(texts), rng.random() < 0.02, rng.random() >= 0.20) for _ in range(count))
        yield NewSubscriber(
            address, schedule, rng.choice(TIMEZONES), "zh" if rng.random() < 0.15 else None, follows
        )


# ------------------------------------------------------------------------------------------------------------
# Databases


def create_database(kind: str, pg_url: str, tmp: Path) -> str:
    """A new empty database of ``kind`` (a SQLite file in ``tmp``, or a PostgreSQL schema); its URL."""
    if kind == "sqlite":
        return f"sqlite:///{tmp}/{uuid.uuid4().hex}.db"
    schema = f"bench_day_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    sep = "&" if "?" in pg_url else "?"
    return f"{pg_url}{sep}options=-csearch_path%3D{schema}"


def drop_database(url: str, pg_url: str) -> None:
    """Remove what :func:`create_database` made."""
    if url.startswith("sqlite"):
        path = Path(url.split("///", 1)[1])
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    schema = url.rsplit("%3D", 1)[1]
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def setup(url: str, kind: str, size: int) -> dict[str, Any]:
    """Migrate ``url`` and bulk-insert the population (not the measured path: straight into the tables)."""
    start = time.perf_counter()
    engine = make_engine(url)
    migrate(engine)
    created = utcnow() - BEFORE_INGEST
    canonical: dict[str, str] = {}
    subscribers: list[dict[str, Any]] = []
    follows: list[dict[str, Any]] = []
    follow_id = 0
    for number, new in enumerate(population(kind, size), start=1) if size else ():
        subscribers.append(
            {
                "id": number,
                "address": new.address,
                "timezone": new.timezone,
                "schedule": new.schedule,
                "status": "active",
                "created_at": created,
                "failures": 0,
                "language": new.language,
            }
        )
        seen: set[str] = set()
        for text, instant, revisions in new.follows:
            if text not in canonical:
                try:
                    canonical[text] = parse(text).canonical()
                except QueryError:
                    canonical[text] = ""  # a generated text the grammar refuses: not stored
            normal = canonical[text]
            if not normal or normal in seen:
                continue
            seen.add(normal)
            follow_id += 1
            follows.append(
                {
                    "id": follow_id,
                    "subscriber_id": number,
                    "query": text,
                    "canonical": normal,
                    "created_at": created,
                    "revisions": revisions,
                    "instant": instant,
                }
            )
    with engine.begin() as conn:
        for table, rows in ((TABLES["subscriber"], subscribers), (TABLES["follow"], follows)):
            for begin in range(0, len(rows), INSERT_CHUNK):
                conn.execute(sa.insert(table), rows[begin : begin + INSERT_CHUNK])
        if engine.dialect.name == "postgresql":
            # Ids were given explicitly: move the sequences past them for rows the service adds later.
            for table_name in ("subscriber", "follow"):
                conn.execute(
                    sa.text(
                        f"SELECT setval(pg_get_serial_sequence('{table_name}', 'id'), "
                        f"(SELECT COALESCE(MAX(id), 0) + 1 FROM {table_name}), false)"
                    )
                )
    engine.dispose()
    return {
        "subscribers": len(subscribers),
        "follows": len(follows),
        "distinct_queries": len({f["canonical"] for f in follows}),
        "setup_s": time.perf_counter() - start,
    }


# ------------------------------------------------------------------------------------------------------------
# Stages


class StageTimeout(Exception):
    """A stage ran longer than ``--stage-timeout``."""


@dataclass
class StageResult:
    """One stage of one case."""

    stage: str
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mib: float = 0.0
    rows: dict[str, int] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise StageTimeout


def run_stage(name: str, timeout: float, body: Callable[[StageResult], None]) -> StageResult:
    """Run ``body`` as stage ``name`` under a timeout, timing wall and CPU time and reading the peak RSS."""
    result = StageResult(name)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        body(result)
    except Exception as exc:  # reported in the table; the later stages of the case are skipped
        # SQLAlchemy wraps an exception raised while it runs a statement (.orig): the timer's, too.
        if isinstance(exc, StageTimeout) or isinstance(getattr(exc, "orig", None), StageTimeout):
            result.error = f"timeout after {timeout:.0f} s"
        else:
            result.error = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        result.wall_s = time.perf_counter() - wall
        result.cpu_s = time.process_time() - cpu
        result.peak_rss_mib = peak_rss_mib()
    print(
        f"    {name}: {result.wall_s:.2f} s wall, {result.cpu_s:.2f} s CPU, rows {result.rows}, "
        f"peak RSS {result.peak_rss_mib:.0f} MiB{' — ' + result.error if result.error else ''}",
        file=sys.stderr,
        flush=True,
    )
    return result


def count(db: Database, table: Any) -> int:
    """Rows in ``table``."""
    with db.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


async def _ingest(db: Database, feed_url: str) -> None:
    async with HttpClient("PaperTrail-bench/1", timeout=60) as http:
        report = await ingest_once(db, ArxivRssSource(http, feed_url))
    if report.error is not None:
        raise RuntimeError(report.error)


def stage_ingest(db: Database, feed_url: str, *, with_match: bool) -> Callable[[StageResult], None]:
    """``ingest_once`` of the recorded day; ``with_match=False`` leaves its ``match_new`` to the next one."""

    def body(result: StageResult) -> None:
        if with_match:
            asyncio.run(_ingest(db, feed_url))
        else:
            # ingest_once ends with match_new(store, now=..., index=...): the next stage makes that call.
            with mock.patch("core.papers.pipeline.match_new", return_value=0):
                asyncio.run(_ingest(db, feed_url))
        result.rows = {"versions": count(db, TABLES["version"]), "matches": count(db, TABLES["match"])}

    return body


def stage_match(db: Database) -> Callable[[StageResult], None]:
    """``match_new``: every new version against every active follow."""

    def body(result: StageResult) -> None:
        written = match_new(db)
        # match_new writes one query match per (version, distinct query); followers' Match rows are made
        # by the fan-out, which planning runs first (stage 3).
        result.rows = {"query_matches": written}

    return body


class NullNotifier:
    """Accepts every rendered digest and sends nothing: delivery's database work and rendering remain."""

    channel: ClassVar[str] = "null"
    max_length: ClassVar[int | None] = None

    async def send(self, address: str, message: Message) -> SendResult:
        return SendResult(platform_id="bench", parts=1)

    async def aclose(self) -> None:
        return None


def null_notifiers() -> dict[str, Notifier]:
    """One null notifier per channel of the population."""
    return {name: NullNotifier() for name, _ in CHANNELS}


class TimedRenderer(Renderer):
    """The production renderer, with the time spent in ``render`` added up: pure rendering time."""

    def __init__(self) -> None:
        super().__init__(public_url="https://papertrail.example", secret_key="bench-key", max_items=50)
        self.wall = 0.0
        self.cpu = 0.0
        self.digests = 0
        self.items = 0

    def render(
        self,
        channel: str,
        items: Sequence[DigestItem],
        recipient: str,
        *,
        address: str = "",
        key: str = "",
        newsletters: Mapping[str, str] | None = None,
        language: str | None = None,
        rest: DigestRest | None = None,
        receipt: Receipt | None = None,
        heartbeat: bool = False,
    ) -> Message:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return super().render(
                channel,
                items,
                recipient,
                address=address,
                key=key,
                newsletters=newsletters,
                language=language,
                rest=rest,
                receipt=receipt,
                heartbeat=heartbeat,
            )
        finally:
            self.wall += time.perf_counter() - wall
            self.cpu += time.process_time() - cpu
            self.digests += 1
            # Every item of the digest, shown or only counted past the cap (the worker loads the shown).
            self.items += len(items) + (rest.count if rest else 0)


def timed_functions(
    functions: Sequence[tuple[ModuleType, str]], spent: dict[str, float]
) -> Callable[[], None]:
    """Wrap the modules' functions so that their wall time adds up in ``spent`` (per name); returns the
    undo."""
    originals = [(module, name, getattr(module, name)) for module, name in functions]
    for module, name, function in originals:

        def wrapper(*args: Any, _function: Any = function, _name: str = name, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _function(*args, **kwargs)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - start

        setattr(module, name, wrapper)

    def undo() -> None:
        for module, name, function in originals:
            setattr(module, name, function)

    return undo


def stage_plan(db: Database, now: datetime) -> Callable[[StageResult], None]:
    """``plan_digests``: a pending digest for every due subscriber."""

    def body(result: StageResult) -> None:
        result.rows = {"digests": plan_digests(db, null_notifiers(), now=now)}
        result.rows["matches"] = count(db, TABLES["match"])  # written by the fan-out planning ran first

    return body


def stage_deliver(db: Database, now: datetime, renderer: TimedRenderer) -> Callable[[StageResult], None]:
    """``send_due_digests`` with null notifiers: claim, items, guides, render, ``finish_sent``."""

    def body(result: StageResult) -> None:
        spent: dict[str, float] = {}
        # The items step is two reads now: ranking rows of every match, full items of the shown ones.
        undo = timed_functions(
            [
                (ledger_records, "claim_digests"),
                (ledger_records, "digests_ranked"),
                (ledger_records, "match_items"),
                (guide_records, "guides_for"),
                (ledger_records, "finish_sent"),
            ],
            spent,
        )
        try:
            reports = asyncio.run(send_due_digests(db, null_notifiers(), renderer, now=now, worker="bench"))
        finally:
            undo()
        failed = [r for r in reports if not r.sent]
        if failed:
            raise RuntimeError(f"{len(failed)} digests not sent, first: {failed[0].error}")
        result.rows = {"digests_sent": len(reports), "items_rendered": renderer.items}
        result.extra = {
            "render_wall_s": renderer.wall,
            "render_cpu_s": renderer.cpu,
            **{f"{name}_s": seconds for name, seconds in spent.items()},
            "digests_items_s": spent.get("digests_ranked", 0.0) + spent.get("match_items", 0.0),
        }

    return body


def measure(url: str, timeout: float, baseline: bool) -> list[StageResult]:
    """Run the stages of one case against the populated database at ``url``, in this process."""
    db = Database(make_engine(url))
    results: list[StageResult] = []
    with serve_bytes(RSS_FEED.read_bytes()) as feed_url:
        print(f"  measuring {url.split('?')[0]} ...", file=sys.stderr, flush=True)
        results.append(run_stage("ingest", timeout, stage_ingest(db, feed_url, with_match=baseline)))
    if baseline or results[-1].error:
        return results
    ingested = utcnow()
    results.append(run_stage("match", timeout, stage_match(db)))
    if results[-1].error:
        return results
    now = ingested + PLAN_AFTER_INGEST
    results.append(run_stage("plan", timeout, stage_plan(db, now)))
    if results[-1].error:
        return results
    results.append(run_stage("deliver", timeout, stage_deliver(db, now, TimedRenderer())))
    results[-1].rows["digests_in_table"] = count(db, TABLES["digest"])
    db.engine.dispose()
    return results


# ------------------------------------------------------------------------------------------------------------
# The runs


@dataclass
class Case:
    """One (population, size, database) and what it measured."""

    database: str
    population: str  # "none" for the baseline
    subscribers: int
    follows: int = 0
    distinct_queries: int = 0
    setup_s: float = 0.0
    stages: list[StageResult] = field(default_factory=list)
    error: str | None = None

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.stage == name and s.error is None), None)


def child(args: list[str], timeout: float) -> dict[str, Any]:
    """Run this script as a child process with ``args``; the JSON it printed after ``RESULT``."""
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        stdout=subprocess.PIPE,
        text=True,
        timeout=timeout,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            loaded: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
            return loaded
    raise RuntimeError(f"child {args[:4]} exited with {proc.returncode} and no result")


def run_case(case: Case, args: argparse.Namespace, tmp: Path) -> None:
    """Set up and measure one case, each in a process of its own, then drop its database."""
    url = create_database(case.database, args.postgres, tmp)
    try:
        print(
            f"{case.population} {case.subscribers:,} on {case.database}: setup ...",
            file=sys.stderr,
            flush=True,
        )
        made = child(
            [
                "--child",
                "setup",
                "--url",
                url,
                "--population",
                case.population,
                "--size",
                str(case.subscribers),
            ],
            timeout=args.stage_timeout * 4,
        )
        case.follows, case.distinct_queries, case.setup_s = (
            made["follows"],
            made["distinct_queries"],
            made["setup_s"],
        )
        print(
            f"  {made['subscribers']:,} subscribers, {case.follows:,} follows "
            f"({case.distinct_queries:,} distinct) in {case.setup_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        measured = child(
            [
                "--child",
                "measure",
                "--url",
                url,
                "--population",
                case.population,
                "--stage-timeout",
                str(args.stage_timeout),
                "--max-memory",
                str(args.max_memory),
            ],
            # Four stages, each stopped by its own timer; this only catches a child stuck in C code.
            timeout=args.stage_timeout * 4 + 120,
        )
        case.stages = [StageResult(**s) for s in measured["stages"]]
    except Exception as exc:
        case.error = f"{type(exc).__name__}: {exc}"
        print(f"  failed: {case.error}", file=sys.stderr, flush=True)
    finally:
        drop_database(url, args.postgres)


def child_main(args: argparse.Namespace) -> None:
    """The child processes: ``setup`` fills a database, ``measure`` runs the stages on it."""
    if args.child == "setup":
        print(RESULT_PREFIX + json.dumps(setup(args.url, args.population, args.size)), flush=True)
        return
    limit = int(args.max_memory * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    stages = measure(args.url, args.stage_timeout, baseline=args.population == "none")
    print(RESULT_PREFIX + json.dumps({"stages": [asdict(s) for s in stages]}), flush=True)


# ------------------------------------------------------------------------------------------------------------
# Report


def _error(stage: StageResult) -> str:
    """A stage's error for a table cell: one line; a timeout SQLAlchemy wrapped is named as a timeout."""
    error = stage.error or ""
    if "StageTimeout" in error:  # results saved before run_stage unwrapped it
        return f"timeout after {stage.wall_s:.0f} s"
    return error.splitlines()[0][:160] if error else ""


def _s(seconds: float) -> str:
    return f"{seconds:,.2f}" if seconds < 100 else f"{seconds:,.0f}"


def stage_table(cases: Sequence[Case]) -> str:
    """Every stage of every case: wall, CPU, rows written, peak RSS."""
    lines = [
        "| database | population | subscribers | follows | stage | wall s | CPU s | rows | peak RSS MiB |",
        "|---|---|---:|---:|---|---:|---:|---|---:|",
    ]
    for case in cases:
        if case.error:
            lines.append(
                f"| {case.database} | {case.population} | {case.subscribers:,} | {case.follows:,} | — | | | "
                f"{case.error} | |"
            )
        for s in case.stages:
            rows = ", ".join(f"{k} {v:,}" for k, v in s.rows.items())
            if s.error:
                rows = f"**{_error(s)}**" + (f"; {rows}" if rows else "")
            lines.append(
                f"| {case.database} | {case.population} | {case.subscribers:,} | {case.follows:,} "
                f"| {s.stage} "
                f"| {_s(s.wall_s)} | {_s(s.cpu_s)} | {rows} | {s.peak_rss_mib:,.0f} |"
            )
    return "\n".join(lines)


def summary_table(cases: Sequence[Case]) -> str:
    """Per case: the production-path ratios (ingest + match over no follows; growth; DB work over rendering).

    Ratios are given on wall time and on this process's CPU time: on a loaded machine the wall time mostly
    measures the neighbours, while CPU time leaves out the PostgreSQL server's share of the work.
    """
    baselines = {c.database: c.stage("ingest") for c in cases if c.population == "none"}
    smallest: dict[tuple[str, str], tuple[int, float]] = {}
    lines = [
        "| database | population | subscribers | follows | query matches → Match rows | digests "
        "| ingest + match s (CPU) "
        "| / no follows: wall (CPU) | match per version | per version vs smallest | plan + deliver s (CPU) "
        "| render s (CPU) | DB on top of render: wall (CPU) | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        ingest, match = case.stage("ingest"), case.stage("match")
        head = f"| {case.database} | {case.population} | {case.subscribers:,} | {case.follows:,} "
        if case.population == "none":
            if ingest:
                lines.append(
                    f"| {case.database} | no follows (baseline) | 0 | 0 | 0 | 0 "
                    f"| {_s(ingest.wall_s)} ({_s(ingest.cpu_s)}) | 1 | | | | | | {ingest.peak_rss_mib:,.0f} |"
                )
            continue
        if not (ingest and match):
            failed = next(
                (f"{s.stage}: {_error(s)}" for s in case.stages if s.error), case.error or "not run"
            )
            peak_cell = f"{max(s.peak_rss_mib for s in case.stages):,.0f}" if case.stages else ""
            lines.append(f"{head}| | | **{failed}** | | | | | | | {peak_cell} |")
            continue
        versions = ingest.rows["versions"]
        per_version = match.wall_s / versions
        key = (case.database, case.population)
        smallest.setdefault(key, (case.follows, per_version))
        base = baselines.get(case.database)
        wall, cpu = ingest.wall_s + match.wall_s, ingest.cpu_s + match.cpu_s
        ratio = f"{wall / base.wall_s:,.1f} × ({cpu / base.cpu_s:,.1f} ×)" if base else ""
        plan, deliver = case.stage("plan"), case.stage("deliver")
        peak = max(s.peak_rss_mib for s in case.stages)
        failed = next((f"{s.stage}: {_error(s)}" for s in case.stages if s.error), "")
        plan_cells = f" **{failed}** | | " if failed else " | | "
        digests = ""
        if plan and deliver:
            render, render_cpu = deliver.extra["render_wall_s"], deliver.extra["render_cpu_s"]
            total, total_cpu = plan.wall_s + deliver.wall_s, plan.cpu_s + deliver.cpu_s
            plan_cells = (
                f" {_s(total)} ({_s(total_cpu)}) | {_s(render)} ({_s(render_cpu)}) "
                f"| {(total - render) / render:.0%} ({(total_cpu - render_cpu) / render_cpu:.0%}) "
            )
            digests = f"{deliver.rows['digests_sent']:,}"
        fanned = f" → {plan.rows['matches']:,}" if plan and "matches" in plan.rows else ""
        lines.append(
            f"{head}| {match.rows.get('query_matches', match.rows.get('matches', 0)):,}{fanned} | {digests} "
            f"| {_s(wall)} ({_s(cpu)}) | {ratio} "
            f"| {per_version * 1000:,.1f} ms ({match.cpu_s / versions * 1000:,.1f} ms CPU) "
            f"| {per_version / smallest[key][1]:.2f} × ({smallest[key][0]:,} follows) "
            f"|{plan_cells}| {peak:,.0f} |"
        )
    return "\n".join(lines)


def deliver_table(cases: Sequence[Case]) -> str:
    """Where the deliver stage's time goes (wall seconds)."""
    lines = [
        "| database | population | subscribers | digests | items | plan | claim | items | guides "
        "| render | finish_sent | rest |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        plan, deliver = case.stage("plan"), case.stage("deliver")
        if not (plan and deliver):
            continue
        e = deliver.extra
        parts = ("claim_digests_s", "digests_items_s", "guides_for_s", "render_wall_s", "finish_sent_s")
        rest = deliver.wall_s - sum(e.get(p, 0.0) for p in parts)
        cells = " | ".join(_s(e.get(p, 0.0)) for p in parts)
        lines.append(
            f"| {case.database} | {case.population} | {case.subscribers:,} "
            f"| {deliver.rows['digests_sent']:,} "
            f"| {deliver.rows['items_rendered']:,} | {_s(plan.wall_s)} | {cells} | {_s(rest)} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Run the cases, each in child processes, and print the tables docs/benchmarks.md quotes."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000", help="comma-separated subscriber counts (default 1000)")
    parser.add_argument("--populations", default="realistic,hot", help="realistic, hot or both")
    parser.add_argument("--databases", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--postgres", default=POSTGRES, help="PostgreSQL URL (a schema per case is created)")
    parser.add_argument(
        "--stage-timeout", type=float, default=600.0, help="seconds per stage before it is stopped"
    )
    parser.add_argument(
        "--max-memory", type=float, default=6.0, help="address-space limit of a measured case, GiB"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument(
        "--report", type=Path, nargs="+", help="print the tables of earlier --json files instead of running"
    )
    parser.add_argument("--child", choices=("setup", "measure"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--population", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return

    if args.report:
        loaded = [Case(**c) for path in args.report for c in json.loads(path.read_text())]
        for case in loaded:
            case.stages = [StageResult(**s) if isinstance(s, dict) else s for s in case.stages]
        print_tables(loaded)
        return
    databases = args.databases.split(",")
    if "postgresql" in databases and not postgres_reachable(args.postgres):
        print(f"PostgreSQL unreachable at {args.postgres}: SQLite only", file=sys.stderr)
        databases.remove("postgresql")
    sizes = [int(s) for s in args.sizes.split(",")]
    cases = [Case(db, "none", 0) for db in databases]
    # Smaller sizes first: their results are in before a large case can run into its timeouts.
    cases += [Case(db, pop, n) for db in databases for n in sizes for pop in args.populations.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            run_case(case, args, Path(tmp))
            if args.json:
                args.json.write_text(json.dumps([asdict(c) for c in cases], indent=1))
    print(f"\nThe day, end to end: {os.cpu_count()} cores; stage timeout {args.stage_timeout:.0f} s")
    print_tables(cases)


def print_tables(cases: Sequence[Case]) -> None:
    """The three tables, in the order docs/benchmarks.md shows them."""
    print()
    print(summary_table(cases))
    print()
    print(stage_table(cases))
    print()
    print(deliver_table(cases))


if __name__ == "__main__":
    main()
