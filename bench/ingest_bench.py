"""Benchmark: ingest the recorded 1,504-item arXiv feed, on SQLite and (when reachable) PostgreSQL.

Everything is measured in one run on this machine, and reported as ratios to a baseline measured in the
same run (the machine is shared and noisy; absolute seconds are printed for context only):

* parse: feedparser-based ``parse_feed`` over the bytes, against ``xml.etree`` reading the same bytes;
* ingest (fetch over loopback HTTP + parse + store + match) into a fresh database, against parse alone;
* re-ingest of the same feed (everything already known), against the first ingest;
* matching all 1,504 versions against 10,000 author follows (real names from the feed), against 10.

Usage: python bench/ingest_bench.py [--repeat N] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.match import Matcher  # noqa: E402
from core.migrate import migrate  # noqa: E402
from core.query import parse  # noqa: E402
from core.service import ingest_once  # noqa: E402
from core.store import Store, make_engine  # noqa: E402
from core.values import PaperIn  # noqa: E402
from ingest.arxiv_rss import ArxivRssSource  # noqa: E402
from ingest.arxiv_rss_parse import parse_feed  # noqa: E402
from ingest.http import HttpClient  # noqa: E402
from papertrail.demo import demo_feed_bytes, serve_bytes  # noqa: E402


def best(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fresh_store(kind: str, pg_url: str | None, tmp: Path) -> tuple[Store, Callable[[], None]]:
    if kind == "sqlite":
        engine = make_engine(f"sqlite:///{tmp}/{uuid.uuid4().hex}.db")
        migrate(engine)
        return Store(engine), engine.dispose
    assert pg_url
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

    return Store(engine), drop


async def ingest_timed(store: Store, url: str) -> float:
    async with HttpClient("PaperTrail-bench/1", timeout=30) as http:
        start = time.perf_counter()
        report = await ingest_once(store, ArxivRssSource(http, url))
        elapsed = time.perf_counter() - start
    assert report.error is None, report.error
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    data = demo_feed_bytes()

    etree = best(lambda: ET.fromstring(data), args.repeat)
    parse = best(lambda: parse_feed(data), args.repeat)
    items = len(parse_feed(data).items)
    tracemalloc.start()
    parse_feed(data)
    _, parse_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"feed: {len(data):,} bytes, {items} items")
    print(
        f"parse_feed           {parse * 1000:8.1f} ms  = {parse / etree:5.1f} x xml.etree alone "
        f"({etree * 1000:.1f} ms)"
    )
    print(
        f"parse_feed peak heap {parse_peak / 2**20:8.1f} MiB = {parse_peak / len(data):5.1f} x the feed size"
    )

    try:
        sa.create_engine(args.postgres).connect().close()
        kinds = ["sqlite", "postgresql"]
    except Exception:
        kinds = ["sqlite"]
        print("PostgreSQL unreachable: SQLite only")

    with tempfile.TemporaryDirectory() as tmp, serve_bytes(data) as url:
        for kind in kinds:
            firsts, agains = [], []
            for _ in range(args.repeat):
                store, close = fresh_store(kind, args.postgres, Path(tmp))
                try:
                    firsts.append(asyncio.run(ingest_timed(store, url)))
                    agains.append(asyncio.run(ingest_timed(store, url)))
                finally:
                    close()
            first, again = statistics.median(firsts), statistics.median(agains)
            print(
                f"{kind:10} ingest    {first * 1000:8.1f} ms  = {first / parse:5.2f} x parse alone; "
                f"{items / first:,.0f} items/s"
            )
            print(f"{kind:10} re-ingest {again * 1000:8.1f} ms  = {again / first:5.2f} x first ingest")

    papers = parse_feed(data).items
    names = list(dict.fromkeys(name for paper in papers for name in paper.authors))
    small, small_hits = match_all(papers, names[:10], args.repeat)
    large, large_hits = match_all(papers, names[:10_000], args.repeat)
    print(
        f"match {items} versions: {min(10, len(names))} follows {small * 1000:.1f} ms ({small_hits} hits), "
        f"{min(10_000, len(names)):,} follows {large * 1000:.1f} ms ({large_hits} hits) "
        f"= {large / small:.2f} x"
    )


def match_all(papers: tuple[PaperIn, ...], names: list[str], repeat: int) -> tuple[float, int]:
    """Median time to match every paper against one ``au:"Name"`` follow per name; and the hit count."""
    matcher = Matcher((i, parse(f'au:"{name}"')) for i, name in enumerate(names))
    hits = sum(len(matcher.match(paper)) for paper in papers)
    return best(lambda: [matcher.match(paper) for paper in papers], repeat), hits


if __name__ == "__main__":
    main()
