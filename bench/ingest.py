"""Benchmark: ingest — the 1,504-item arXiv RSS day, and bulk parse + store from OAI, RSS and the snapshot.

Everything is measured in one run on this machine and reported next to a baseline measured in the same run
(the machine is shared and noisy; absolute figures are there for context). The baseline is
``feedparser.parse`` alone on the RSS day: the library call at the heart of the feedparser-based RSS
parser that ``parse_feed`` replaced (``parse_feed_feedparser``, dropped since; it also ran a strict
parse and built the values, so it was slower than this baseline). Each figure is the median of
``--repeat`` runs.

1. The RSS day: ``tests/corpus/arxiv-rss/aioarxiv_rss_mock_feed.xml`` (rss.arxiv.org, 28 Nov 2024, 1,504
   items, the feed ``papertrail demo`` ships).

   * parse: ``parse_feed`` and the baseline over the same bytes, with ``xml.etree`` alone for scale, and
     the peak Python heap of each (tracemalloc, in a separate untimed pass);
   * ingest: one ``ingest_once`` into a freshly migrated database (conditional GET over loopback HTTP,
     parse, store, source run, matching with no follows), on
     SQLite (a file on disk) and PostgreSQL, then its steps timed one by one in process. Target: < 1 s.

2. Bulk: ``--records`` records (default 100,000) from each of three samples, each replicated:

   * OAI: ``tests/corpus/arxiv-oai/litpuvn_ListRecords_arXivRaw_from2016-10-20.xml`` (387 records, 970
     versions) as ListRecords pages of 1,000 records (arXiv's page size), read by ``parse_oai`` and stored
     page by page with ``Novelty.GAP``, as ``ingest --source arxiv-oai`` does;
   * RSS: the feed above as pages of 1,504 items, read by ``parse_feed`` and stored with ``Novelty.NEWS``,
     as the daily ingest does;
   * snapshot: ``tests/corpus/arxiv-snapshot/*.jsonl`` (200 lines, 326 versions) written to a JSON Lines
     file and read back by ``papertrail.cli.backfill.snapshot_batches`` (5,000-version batches), stored with
     ``Novelty.HISTORY``, as ``papertrail backfill snapshot FILE`` does.

   Replication: record ``i`` of a replicated stream (``i`` = 0, 1, ...) is sample record ``i mod n`` with
   its arXiv id replaced, wherever it occurs in that record (OAI header identifier and ``<id>``; RSS guid,
   link and description prefix; the snapshot's ``"id"``), by the synthetic id ``YYMM.NNNNN`` where
   ``NNNNN = i mod 100000`` and ``YYMM`` is month ``i div 100000`` counted from January 2000 (``0001``,
   ``0002``, ..., ``0012``, ``0101``, ...). Ids are therefore unique across the whole stream and valid
   new-style ids for all three parsers, and every copy keeps its sample record's versions, text and dates.
   Pages are generated just before they are parsed; generating them is not timed.

   Each run parses the whole stream (timing the parse calls only), then stores the parsed pages or batches
   into a fresh database of each kind with one ``paper_records.save_versions`` call each:
   "parse" is the parse time, "parse + store" the parse time plus that database's store time. Reported:
   records/s, versions/s, the ratio of records/s to the baseline's items/s on the RSS day, and the peak Python
   heap while one page or batch is parsed and stored on SQLite (tracemalloc, in a separate untimed pass over
   the first 10,000 records). Target: >= 10,000 records/s parse + store on SQLite for OAI or the snapshot
   (about 2.7 million records, a full arXiv backfill, in under 5 minutes).

Usage: python bench/ingest.py [--records 100000] [--repeat 3] [--postgres URL | --no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import io
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from unittest import mock

import feedparser
import sqlalchemy as sa

from core.papers import paper_records

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.db import (  # noqa: E402
    Database,
    make_engine,
)
from core.db_migrate import migrate  # noqa: E402
from core.follows.index import match_new  # noqa: E402
from core.papers.paper_records import Novelty  # noqa: E402
from core.papers.pipeline import ingest_once  # noqa: E402
from core.values import PaperIn  # noqa: E402
from ingest.arxiv_oai_parse import parse_oai  # noqa: E402
from ingest.arxiv_rss import ArxivRssSource  # noqa: E402
from ingest.arxiv_rss_parse import FeedPage, parse_feed  # noqa: E402
from ingest.http import HttpClient  # noqa: E402
from papertrail.cli.backfill import snapshot_batches  # noqa: E402
from papertrail.cli.demo import serve_bytes  # noqa: E402

_T = TypeVar("_T")

CORPUS = ROOT / "tests" / "corpus"
RSS_FEED = CORPUS / "arxiv-rss" / "aioarxiv_rss_mock_feed.xml"
OAI_LIST = CORPUS / "arxiv-oai" / "litpuvn_ListRecords_arXivRaw_from2016-10-20.xml"
SNAPSHOT = CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"
POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

OAI_PAGE = 1000
RSS_PAGE = 1504
MEMORY_RECORDS = 10_000
TARGET_DAY_SECONDS = 1.0
TARGET_BULK_RATE = 10_000
FULL_ARXIV_RECORDS = 2_700_000

_OAI_ID = re.compile(rb"<identifier>oai:arXiv\.org:([^<\s]+)</identifier>")
_RSS_ID = re.compile(rb"<guid[^>]*>oai:arXiv\.org:(\d{4}\.\d{4,5})v\d+</guid>")
_SNAPSHOT_ID = re.compile(rb'^\{"id":"([^"]+)"')


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_heap(fn: Callable[[], object]) -> int:
    """Peak Python heap (bytes, tracemalloc) allocated while ``fn`` runs."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ------------------------------------------------------------------------------------------------------------
# Databases


def fresh_store(kind: str, pg_url: str, tmp: Path) -> tuple[Database, Callable[[], None]]:
    """A freshly migrated store on ``kind`` ("sqlite": a new file in ``tmp``; "postgresql": a new schema)."""
    if kind == "sqlite":
        engine = make_engine(f"sqlite:///{tmp}/{uuid.uuid4().hex}.db")
        migrate(engine)
        return Database(engine), engine.dispose
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    engine = make_engine(f"{pg_url}?options=-csearch_path%3D{schema}")
    migrate(engine)

    def drop() -> None:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()

    return Database(engine), drop


def postgres_reachable(url: str) -> bool:
    """True when the benchmark PostgreSQL answers."""
    try:
        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        with engine.connect():
            pass
        engine.dispose()
        return True
    except Exception:
        return False


# ------------------------------------------------------------------------------------------------------------
# Replication (see the module docstring)


def synthetic_id(index: int) -> bytes:
    """The unique new-style arXiv id of record ``index`` of a replicated stream."""
    month, number = divmod(index, 100_000)
    year, month = divmod(month, 12)
    return f"{year:02d}{month + 1:02d}.{number:05d}".encode()


@dataclass(frozen=True)
class Sample:
    """A recorded document cut into the text before, each record, and the text after the records."""

    head: bytes
    records: tuple[tuple[bytes, bytes], ...]  # (record bytes, its arXiv id)
    tail: bytes

    @classmethod
    def cut(cls, data: bytes, start: bytes, end: bytes, id_re: re.Pattern[bytes]) -> Sample:
        """Split ``data`` at the ``start``...``end`` elements; ``id_re`` finds each record's id."""
        first, last = data.index(start), data.rindex(end) + len(end)
        records = []
        position = first
        while True:
            begin = data.find(start, position, last)
            if begin == -1:
                break
            finish = data.index(end, begin) + len(end)
            chunk = data[begin:finish]
            found = id_re.search(chunk)
            assert found, chunk[:200]
            records.append((chunk, found.group(1)))
            position = finish
        return cls(data[:first], tuple(records), data[last:])

    def record(self, index: int) -> bytes:
        """Record ``index`` of the replicated stream."""
        chunk, arxiv_id = self.records[index % len(self.records)]
        return chunk.replace(arxiv_id, synthetic_id(index))

    def pages(self, total: int, size: int) -> Iterator[tuple[int, bytes]]:
        """Documents of ``size`` replicated records (the last one shorter) until ``total``: (count, bytes)."""
        for begin in range(0, total, size):
            count = min(size, total - begin)
            body = b"".join(self.record(i) for i in range(begin, begin + count))
            yield count, self.head + body + self.tail


def write_snapshot(path: Path, total: int) -> None:
    """Write ``total`` replicated snapshot lines to ``path``."""
    lines = [line for line in SNAPSHOT.read_bytes().splitlines(keepends=True) if line.strip()]
    with open(path, "wb") as out:
        for index in range(total):
            line = lines[index % len(lines)]
            found = _SNAPSHOT_ID.match(line)
            assert found, line[:80]
            out.write(b'{"id":"' + synthetic_id(index) + line[found.end(1) :])


# ------------------------------------------------------------------------------------------------------------
# Bulk runs

Unit = tuple[int, Callable[[], Sequence[PaperIn]]]  # (records, parse) for one page or batch


def _oai_papers(page: bytes) -> Sequence[PaperIn]:
    return parse_oai(page).papers


def _rss_papers(page: bytes) -> Sequence[PaperIn]:
    return parse_feed(page).items


def oai_units(total: int) -> Iterator[Unit]:
    """ListRecords pages of ``OAI_PAGE`` replicated arXivRaw records."""
    sample = Sample.cut(OAI_LIST.read_bytes(), b"<record>", b"</record>", _OAI_ID)
    for count, page in sample.pages(total, OAI_PAGE):
        yield count, functools.partial(_oai_papers, page)


def rss_units(total: int) -> Iterator[Unit]:
    """Feeds of ``RSS_PAGE`` replicated items."""
    sample = Sample.cut(RSS_FEED.read_bytes(), b"<item>", b"</item>", _RSS_ID)
    for count, page in sample.pages(total, RSS_PAGE):
        yield count, functools.partial(_rss_papers, page)


def snapshot_units(path: Path) -> Iterator[Unit]:
    """The backfill's own batches of the replicated snapshot file, read as they are parsed.

    Reading is parsing here, so the unit's parse step is the next batch; the count is -1 because a batch
    ends at a number of versions, and the caller counts its records (a record never spans two batches).
    """
    batches = snapshot_batches(path)

    def parse_next() -> Sequence[PaperIn]:
        return next(batches).papers  # StopIteration after the last batch: the caller stops there

    while True:
        yield -1, parse_next


@dataclass
class Parsed:
    """A replicated stream, parsed: its records, versions, the parse time, and the versions per unit."""

    records: int = 0
    versions: int = 0
    seconds: float = 0.0
    units: list[Sequence[PaperIn]] = field(default_factory=list)


def _records(count: int, papers: Sequence[PaperIn]) -> int:
    return count if count >= 0 else len({paper.arxiv_id for paper in papers})


def parse_all(units: Iterator[Unit]) -> Parsed:
    """Parse every unit, timing the parse calls only (not the generation of the pages).

    The parsed units are kept for the store runs. ``gc.freeze()`` after each one keeps them out of the
    garbage collector's later passes, as in a real run, where each unit is stored and dropped before the
    next is parsed; otherwise the collector would scan them again and again (up to 1.5 x the parse time).
    Call ``gc.unfreeze()`` when done with them.
    """
    parsed = Parsed()
    for count, parse in units:
        start = time.perf_counter()
        try:
            papers = parse()
        except StopIteration:
            break
        parsed.seconds += time.perf_counter() - start
        parsed.units.append(papers)
        parsed.versions += len(papers)
        parsed.records += _records(count, papers)
        gc.freeze()
    return parsed


def store_all(parsed: Parsed, novelty: Novelty, db: Database) -> float:
    """Store every unit with one ``save_versions`` call each; the time it took."""
    stored = 0
    start = time.perf_counter()
    for papers in parsed.units:
        saved = paper_records.save_versions(db, papers, novelty=novelty)
        stored += saved.history + saved.new_papers + saved.revisions
    seconds = time.perf_counter() - start
    assert stored == parsed.versions, (stored, parsed.versions)
    return seconds


def peak_per_unit(units: Iterator[Unit], novelty: Novelty, db: Database | None, limit: int) -> int:
    """The peak Python heap while one unit is parsed (and stored), over the first ``limit`` records."""
    peak = records = 0
    tracemalloc.start()
    try:
        for count, parse in units:
            tracemalloc.reset_peak()
            try:
                papers = parse()
            except StopIteration:
                break
            if db is not None:
                paper_records.save_versions(db, papers, novelty=novelty)
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            records += _records(count, papers)
            del papers  # before the next unit is parsed, as in a real run
            if records >= limit:
                break
    finally:
        tracemalloc.stop()
    return peak


def with_store(kind: str, pg_url: str, tmp: Path, body: Callable[[Database], _T]) -> _T:
    """Run ``body`` against a fresh store of ``kind``, dropped afterwards."""
    db, close = fresh_store(kind, pg_url, tmp)
    try:
        return body(db)
    finally:
        close()


# ------------------------------------------------------------------------------------------------------------
# The RSS day


def feedparser_alone(day: bytes) -> object:
    """The baseline: ``feedparser.parse`` of the day, with the options the dropped parser passed it."""
    # A BytesIO: feedparser first tries to open() a bytes argument as a file name.
    return feedparser.parse(io.BytesIO(day), sanitize_html=False, resolve_relative_uris=False)


async def ingest_timed(db: Database, url: str, parse: Callable[..., FeedPage]) -> float:
    """Wall time of one ``ingest_once`` of the feed at ``url`` with ``parse`` as the RSS parser."""
    # The source looks its parser up in its module at fetch time.
    with mock.patch("ingest.arxiv_rss.parse_feed", parse):
        async with HttpClient("PaperTrail-bench/1", timeout=30) as http:
            start = time.perf_counter()
            report = await ingest_once(db, ArxivRssSource(http, url))
            elapsed = time.perf_counter() - start
    assert report.error is None, report.error
    assert report.new_papers + report.revisions + report.duplicates == report.fetched, report
    return elapsed


def day_steps(day: bytes, db: Database) -> tuple[float, float, float]:
    """The steps of an ingest timed one by one, in process: parse, save_versions, match_new."""
    start = time.perf_counter()
    items = parse_feed(day).items
    parsed = time.perf_counter()
    paper_records.save_versions(db, items)
    stored = time.perf_counter()
    match_new(db)
    return parsed - start, stored - parsed, time.perf_counter() - stored


def rate(count: int, seconds: float) -> str:
    """``count`` per second, formatted."""
    return f"{count / seconds:>10,.0f}"


def main() -> None:
    """Run everything and print the tables docs/benchmarks.md quotes."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000, help="records per bulk sample")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the median is shown)")
    parser.add_argument("--postgres", default=POSTGRES, help="PostgreSQL URL (a schema per run is created)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    repeat = max(1, args.repeat)
    kinds = ["sqlite"]
    if not args.no_postgres:
        if postgres_reachable(args.postgres):
            kinds.append("postgresql")
        else:
            print(f"PostgreSQL unreachable at {args.postgres}: SQLite only")

    day = RSS_FEED.read_bytes()
    items = len(parse_feed(day).items)
    etree = median_time(lambda: ET.fromstring(day), repeat)
    baseline = median_time(lambda: feedparser_alone(day), repeat)
    ours = median_time(lambda: parse_feed(day), repeat)
    baseline_peak = peak_heap(lambda: feedparser_alone(day))
    ours_peak = peak_heap(lambda: parse_feed(day))
    baseline_rate = items / baseline
    print(f"RSS day: {len(day):,} bytes, {items:,} items; median of {repeat}")
    print(f"  xml.etree alone            {etree * 1000:7.1f} ms")
    print(
        f"  feedparser.parse alone     {baseline * 1000:7.1f} ms {rate(items, baseline)} items/s  "
        f"peak {baseline_peak / 2**20:5.1f} MiB  (the baseline)"
    )
    print(
        f"  parse_feed                 {ours * 1000:7.1f} ms {rate(items, ours)} items/s  "
        f"peak {ours_peak / 2**20:5.1f} MiB  {baseline / ours:.1f} x faster; {ours / etree:.1f} x xml.etree"
    )

    with tempfile.TemporaryDirectory() as tmp_name, serve_bytes(day) as url:
        tmp = Path(tmp_name)
        for kind in kinds:
            times: dict[str, float] = {}
            for label, parse in (("parse_feed", parse_feed),):
                times[label] = statistics.median(
                    with_store(kind, args.postgres, tmp, functools.partial(_ingest, url, parse))
                    for _ in range(repeat)
                )
            steps = [
                with_store(kind, args.postgres, tmp, functools.partial(day_steps, day)) for _ in range(repeat)
            ]
            parse_s, store_s, match_s = (statistics.median(step[i] for step in steps) for i in range(3))
            first = times["parse_feed"]
            verdict = "met" if first < TARGET_DAY_SECONDS else "MISSED"
            print(
                f"  ingest_once, {kind:10}   {first * 1000:7.1f} ms {rate(items, first)} items/s  "
                f"target < {TARGET_DAY_SECONDS:.0f} s: {verdict}"
            )
            print(
                f"    in process: parse {parse_s * 1000:.0f} ms, save_versions {store_s * 1000:.0f} ms, "
                f"match_new (no follows) {match_s * 1000:.0f} ms"
            )

        snapshot_file = tmp / "snapshot.jsonl"
        write_snapshot(snapshot_file, args.records)
        cases: list[tuple[str, Novelty, Callable[[], Iterator[Unit]]]] = [
            ("OAI arXivRaw", Novelty.GAP, functools.partial(oai_units, args.records)),
            ("RSS", Novelty.NEWS, functools.partial(rss_units, args.records)),
            ("snapshot", Novelty.HISTORY, functools.partial(snapshot_units, snapshot_file)),
        ]
        print(
            f"\nBulk: {args.records:,} records per sample; median of {repeat}; "
            f"ratio = records/s over the baseline's {baseline_rate:,.0f} items/s"
        )
        print(
            f"  {'sample':13} {'measure':31} {'records/s':>10} {'versions/s':>10} {'ratio':>7} "
            f"{'seconds':>8} {'peak MiB':>9}"
        )
        for name, novelty, units in cases:
            peak = with_store(
                "sqlite", args.postgres, tmp, functools.partial(_peak_with_store, units, novelty)
            )
            runs = [(f"parse + store, {kind}", kind, novelty) for kind in kinds]  # (label, database, novelty)
            parse_times: list[float] = []
            totals: dict[str, list[float]] = {label: [] for label, _, _ in runs}
            parsed = Parsed()
            for _ in range(repeat):
                parsed = parse_all(units())
                parse_times.append(parsed.seconds)
                for label, kind, how in runs:
                    stored = with_store(kind, args.postgres, tmp, functools.partial(store_all, parsed, how))
                    totals[label].append(parsed.seconds + stored)
                gc.unfreeze()
            records, versions = parsed.records, parsed.versions
            del parsed
            lines = [("parse", statistics.median(parse_times))]
            lines += [(label, statistics.median(totals[label])) for label, _, _ in runs]
            for measure, seconds in lines:
                memory = f"{peak / 2**20:9.1f}" if measure == "parse + store, sqlite" else ""
                print(
                    f"  {name:13} {measure:31} {rate(records, seconds)} {rate(versions, seconds)} "
                    f"{records / seconds / baseline_rate:6.1f}x {seconds:8.1f} {memory}"
                )
            if novelty is not Novelty.NEWS:
                sqlite_rate = records / statistics.median(totals["parse + store, sqlite"])
                verdict = "met" if sqlite_rate >= TARGET_BULK_RATE else "MISSED"
                print(
                    f"  {'':13} target >= {TARGET_BULK_RATE:,} records/s on SQLite: {verdict} "
                    f"({sqlite_rate / TARGET_BULK_RATE:.2f} x; {FULL_ARXIV_RECORDS / 1e6:.1f} million "
                    f"records in {FULL_ARXIV_RECORDS / sqlite_rate / 60:.1f} min)"
                )


def _ingest(url: str, parse: Callable[..., FeedPage], db: Database) -> float:
    return asyncio.run(ingest_timed(db, url, parse))


def _peak_with_store(units: Callable[[], Iterator[Unit]], novelty: Novelty, db: Database) -> int:
    return peak_per_unit(units(), novelty, db, MEMORY_RECORDS)


if __name__ == "__main__":
    main()
