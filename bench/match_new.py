"""Benchmark: ``core.follows.index.match_new`` on the recorded day with N hot follows, then the fan-out.

The recorded rss.arxiv.org day (1,504 versions) is stored with ``paper_records.save_versions``; N follows of
the hot mix of bench/match.py (one subscriber each, made a day before the versions) are bulk-inserted; then
the production calls are timed: ``match_new(store)`` (what ``ingest_once`` ends with) and
``match_records.expand_matches(store)`` (what planning runs first). Wall and CPU seconds of this process and
the rows each wrote. SQLite by default; ``--database URL`` for another.

``--tree PATH`` runs the same script against another checkout of PaperTrail (its core/, bench/ and
ingest/), e.g. an older commit (``git worktree add /tmp/before 06333bd``) to measure "before"
and "after" in one sitting: ``python bench/match_new.py --tree /tmp/before`` then without ``--tree``. A
tree without ``match_records.expand_matches`` wrote its Match rows in ``match_new`` itself;
its fan-out is 0.

Usage: python bench/match_new.py [--follows 10000] [--database URL] [--tree PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path


def main() -> None:
    """Parse the arguments, build the store, time the two calls, print one line each."""
    from core.papers import paper_records

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--follows", type=int, default=10_000)
    parser.add_argument("--database", default=None, help="a database URL (default: a fresh SQLite file)")
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    # Imported after the tree is chosen: the code measured is the tree's.
    import sqlalchemy as sa

    from bench.match import FEED, generate
    from core.db import Database, make_engine
    from core.db_migrate import migrate
    from core.follows.index import match_new
    from core.follows.query import parse
    from core.models import Follow, utcnow
    from ingest.arxiv_rss_parse import parse_feed

    with tempfile.TemporaryDirectory(prefix="bench-match-new-") as tmp:
        url = args.database or f"sqlite:///{tmp}/bench.db"
        engine = make_engine(url)
        migrate(engine)
        db = Database(engine)
        papers = parse_feed(FEED.read_bytes()).items
        queries = generate(papers, args.follows)
        made = utcnow() - timedelta(days=1)
        canonical: dict[str, str] = {}
        with engine.begin() as conn:
            # The real tables, so that each column's type converts as the store's own writes do.
            subscriber, follow = (Follow.metadata.tables[name] for name in ("subscriber", "follow"))
            conn.execute(
                sa.insert(subscriber),
                [
                    {
                        "address": f"console:s{i}",
                        "timezone": "UTC",
                        "schedule": "daily 08:00",
                        "status": "active",
                        "created_at": made,
                        "failures": 0,
                    }
                    for i in range(len(queries))
                ],
            )
            ids = [row[0] for row in conn.execute(sa.text("SELECT id FROM subscriber ORDER BY id"))]
            conn.execute(
                sa.insert(follow),
                [
                    {
                        "subscriber_id": sid,
                        "query": q,
                        "canonical": canonical.setdefault(q, parse(q).canonical()),
                        "created_at": made,
                        "revisions": True,
                        "instant": False,
                    }
                    for sid, q in zip(ids, queries, strict=True)
                ],
            )
        paper_records.save_versions(db, papers)
        cpu, wall = time.process_time(), time.perf_counter()
        written = match_new(db)
        print(
            f"match_new: {time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} s CPU, "
            f"{written:,} rows ({args.follows:,} follows, {args.tree})"
        )
        cpu, wall = time.process_time(), time.perf_counter()
        # A tree from before the store's split has expand_matches on the store itself, one from before
        # the older code has none (its match_new wrote the Match rows).
        expand = getattr(getattr(db, "matches", db), "expand_matches", None)
        fanned = expand() if expand is not None else 0
        print(
            f"fan-out:   {time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} s CPU, "
            f"{fanned:,} Match rows"
        )
        engine.dispose()


if __name__ == "__main__":
    main()
