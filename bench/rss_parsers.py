"""Benchmark: the RSS readings side by side: time, peak heap and what each makes of malformed input.

PaperTrail keeps one RSS parser. ``ingest.arxiv_rss_parse`` held two readings: ``parse_feed``, which
reads the items from the ``xml.etree`` tree of its incremental, strict parse (chunk by chunk, each item
dropped once read), and ``parse_feed_feedparser``, which ran the same strict check and then read the
whole body again with feedparser. This script measured both to decide which one stays (the numbers and
the decision are in docs/benchmarks.md, "One RSS parser"). Since the decision only ``parse_feed`` is left:
the script still measures it and ``feedparser.parse`` alone (the library call the dropped reading was
built on, i.e. a lower bound of its cost), and it measures ``parse_feed_feedparser`` as well when run on
a commit that still has it.

Inputs: the recorded rss.arxiv.org feeds in ``tests/corpus/arxiv-rss`` (a copy of shared/corpus, see its
SOURCES.md) and the feed ``papertrail demo`` ships (``papertrail/cli/demo_data``, 1,504 items; byte for byte
the big corpus feed, gzipped). Per reading and input: the median wall time of ``--repeat`` runs and the
peak Python heap of one run (tracemalloc, measured separately so that tracing does not slow the timing).
``parse_feed`` is run both on the bytes and on a file, the way the RSS source calls it (the HTTP client
spools the body to a temporary file).

Malformed input: a truncated feed (cut in half, and cut right after the last ``</item>``), bad encoding
(one stray 0xff byte in a title), an HTML error page instead of RSS, and an empty body. For each, the
outcome: a page (items, skipped, notes) or the exception and the start of its message.

Run: ``PYTHONPATH=. python bench/rss_parsers.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import gzip
import io
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import feedparser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ingest import arxiv_rss_parse  # noqa: E402
from ingest.arxiv_rss_parse import ArxivFeedError, FeedFormatError, FeedPage, parse_feed  # noqa: E402

RSS_DIR = ROOT / "tests" / "corpus" / "arxiv-rss"
DEMO_FEED = ROOT / "papertrail" / "cli" / "demo_data" / "arxiv-rss-2024-11-28.xml.gz"

Reading = Callable[[bytes], object]


def _from_file(data: bytes) -> FeedPage:
    """``parse_feed`` as the RSS source calls it: on the body in a temporary file."""
    with tempfile.TemporaryFile() as body:
        body.write(data)
        return parse_feed(body)


def _feedparser_alone(data: bytes) -> object:
    # A BytesIO: feedparser first tries to open() a bytes argument as a file name.
    return feedparser.parse(io.BytesIO(data), sanitize_html=False, resolve_relative_uris=False)


def readings() -> dict[str, Reading]:
    """The readings measured: ``parse_feed_feedparser`` only where this commit still has it."""
    found: dict[str, Reading] = {
        "parse_feed (bytes)": parse_feed,
        "parse_feed (file)": _from_file,
    }
    dropped = getattr(arxiv_rss_parse, "parse_feed_feedparser", None)
    if dropped is not None:
        found["parse_feed_feedparser"] = dropped
    found["feedparser.parse alone"] = _feedparser_alone
    return found


def inputs() -> dict[str, bytes]:
    """The recorded feeds, by name."""
    found = {path.name: path.read_bytes() for path in sorted(RSS_DIR.glob("*.xml"))}
    found[f"demo_data/{DEMO_FEED.name}"] = gzip.decompress(DEMO_FEED.read_bytes())
    return found


def malformed(day: bytes) -> dict[str, bytes]:
    """Broken copies of the recorded day, each one of the failures a fetch can bring."""
    title = b"<title>Equivalent of Non-Trivial Riemann Zeros"
    return {
        "truncated: cut in half": day[: len(day) // 2],
        "truncated: after the last </item>": day[: day.rindex(b"</item>") + len(b"</item>")],
        "bad encoding: one 0xff in a title": day.replace(title, b"<title>Equivalent of Non-\xffTrivial", 1),
        "HTML error page": b"<!DOCTYPE html><html><body><h1>503 Service Unavailable</h1></body></html>",
        "empty body": b"",
    }


def median_ms(read: Reading, data: bytes, repeat: int) -> float:
    """The median wall time of ``repeat`` runs, in milliseconds (exceptions count as a finished run)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        outcome(read, data)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def peak_mib(read: Reading, data: bytes) -> float:
    """The peak Python heap of one run above what was allocated before it, in MiB."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = outcome(read, data)
        peak = tracemalloc.get_traced_memory()[1]
        del result
    finally:
        tracemalloc.stop()
    return (peak - before) / 2**20


def outcome(read: Reading, data: bytes) -> object:
    """What ``read`` returns, or the exception it raises (a malformed body must be able to fail)."""
    try:
        return read(data)
    except (FeedFormatError, ArxivFeedError) as exc:
        return exc


def describe(result: object) -> str:
    """One line for an outcome: a page's counts, feedparser's entries and bozo flag, or the error."""
    if isinstance(result, FeedPage):
        return f"page: {len(result.items)} items, {len(result.skipped)} skipped, {len(result.notes)} notes"
    if isinstance(result, Exception):
        return f"{type(result).__name__}: {str(result)[:110]}"
    if isinstance(result, dict):  # feedparser's FeedParserDict
        bozo = result.get("bozo_exception")
        return f"{len(result.get('entries', []))} entries, bozo={bool(result.get('bozo'))} ({bozo!r:.70})"
    return repr(result)[:120]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing (median reported)")
    args = parser.parse_args()
    chosen = readings()
    feeds = inputs()

    print(f"time (median of {args.repeat}) and peak heap (tracemalloc, one run)")
    for name, data in feeds.items():
        print(f"\n{name} ({len(data):,} bytes)")
        for label, read in chosen.items():
            print(
                f"  {label:26} {median_ms(read, data, args.repeat):8.1f} ms  "
                f"peak {peak_mib(read, data):6.2f} MiB  {describe(outcome(read, data))}"
            )

    print("\nmalformed input (the recorded day, broken)")
    for name, data in malformed(feeds["aioarxiv_rss_mock_feed.xml"]).items():
        print(f"\n{name}")
        for label, read in chosen.items():
            print(f"  {label:26} {describe(outcome(read, data))}")


if __name__ == "__main__":
    main()
