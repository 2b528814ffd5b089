"""``papertrail demo``: the whole pipeline, offline, on a real recorded arXiv feed shipped in the package.

The recorded feed (rss.arxiv.org, 28 Nov 2024, 1,504 items) is served from 127.0.0.1 by a throw-away
HTTP server, so the demo goes through the same HTTP client, parser, store, matcher and renderer as
production. The database is a temporary SQLite file unless one is given.

``papertrail demo --load`` instead stores the recorded day in the configured store, as the ``arxiv-rss``
source would, and matches it against every stored follow: the README's tour (``try``, ``show``,
``digest --now``, the status page) then has a day to work on with no network. It is an explicit option,
not the default, because it writes a 2024 day into whatever ``PAPERTRAIL_DATABASE_URL`` names (a
production database too), and it can be done once per store: a second load finds only known versions.
"""

from __future__ import annotations

import gzip
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TextIO

from core.config import Settings
from core.delivery.digests import send_due_digests
from core.follows.manage import fan_out, follow
from core.papers.pipeline import IngestReport, ingest_once
from papertrail.service.context import build_context

DEMO_FEED = Path(__file__).with_name("demo_data") / "arxiv-rss-2024-11-28.xml.gz"
DEMO_ADDRESS = "console:demo"
# The demo's digest shows at most this many items (the rest is counted as "and N more"), so that it fits
# a terminal and shows the cap at work; real digests use PAPERTRAIL_DIGEST_MAX_ITEMS (50). Its four
# follows match about a hundred versions of the recorded day.
DEMO_MAX_ITEMS = 10
DEMO_FOLLOWS = (
    'ti:"large language models" AND cat:cs.CL',
    'au:Bengio OR au:"Yann LeCun"',
    "cat:cs.DC ANDNOT cat:cs.LG",
    'abs:"graph neural network"',
)


def demo_feed_bytes() -> bytes:
    """The recorded feed, decompressed."""
    return gzip.decompress(DEMO_FEED.read_bytes())


@contextmanager
def serve_bytes(body: bytes, content_type: str = "application/rss+xml") -> Iterator[str]:
    """Serve ``body`` at every path of a loopback HTTP server; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # keep the demo's output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rss/"
    finally:
        server.shutdown()
        server.server_close()


async def run_demo(out: TextIO, database_url: str | None = None, max_items: int = DEMO_MAX_ITEMS) -> int:
    """Follow a few topics, ingest the recorded feed, print the digest; returns the number of items sent."""
    with tempfile.TemporaryDirectory(prefix="papertrail-demo-") as tmp, serve_bytes(demo_feed_bytes()) as url:
        settings = Settings(
            database_url=database_url or f"sqlite:///{tmp}/demo.db",
            arxiv_rss_url=url,
            arxiv_categories="cs",
            digest_max_items=max_items,
        )
        ctx = build_context(settings, console=out)
        try:
            for query in DEMO_FOLLOWS:
                follow(ctx.db, DEMO_ADDRESS, query)
                out.write(f"follow  {DEMO_ADDRESS}  {query}\n")
            report = await ingest_once(ctx.db, ctx.sources["arxiv-rss"])
            out.write(
                f"ingest  {report.fetched} items: {report.new_papers} new papers, "
                f"{report.revisions} revisions, "
                f"{report.duplicates} duplicates, {report.matches} query matches\n\n"
            )
            reports = await send_due_digests(ctx.db, ctx.notifiers, ctx.renderer, force=True)
            return sum(r.items for r in reports if r.sent)
        finally:
            await ctx.aclose()


async def load_demo_day(settings: Settings) -> tuple[IngestReport, int]:
    """Store the recorded day in ``settings``' store and match it against every stored follow.

    Returns the run's report and the subscribers' matches it made. Nothing is sent and no subscriber or
    follow is added: the matches wait for ``papertrail digest`` like those of a real ingest. The run is
    recorded as one of the ``arxiv-rss`` source, whose feed it is.
    """
    with serve_bytes(demo_feed_bytes()) as url:
        ctx = build_context(settings.model_copy(update={"arxiv_rss_url": url, "arxiv_categories": "cs"}))
        try:
            report = await ingest_once(ctx.db, ctx.sources["arxiv-rss"])
            # As `papertrail ingest` does: each follower's Match rows now, not at the next digest's planning.
            return report, fan_out(ctx.db)
        finally:
            await ctx.aclose()
