"""Benchmark: digest time at scale — many subscribers due in the same minute.

On SQLite and on PostgreSQL: ``--subscribers`` subscribers (default 100,000) on Telegram, each with
``--matches`` pending matches (default 3; every third subscriber also has a copy from a newsletter, and
every fifth item is a revision, so the items path reads earlier versions, follows, upvotes, guides and
newsletter titles). The population is inserted in bulk in a child process (not measured). Then, in this
process, the production entry points are timed, with the SQL statements each one sends:

* **plan**: ``core.delivery.digests.plan_digests`` — every subscriber gets a pending digest holding its
matches.
* **claim + items**: what ``send_due_digests`` does per batch before sending:
``ledger_records.claim_digests``
  (``policy.batch`` at a time), then ``core.delivery.digests.batch_items`` with the renderer's cap: the
  matches'
  ranking rows, full items for the shown ones only, their guides and the batch's newsletter titles.
* **render**: ``Renderer.render`` of every claimed digest for Telegram, with what the batch step read.
* **pure render**: the same digests (the same items, already in memory) rendered again: the cost
  bench/deliver.py measures, the baseline the database work is compared with (target: database at most
  25% on top of it).

Nothing is sent: claimed digests stay ``sending`` under their lease, so each claim takes the next ones.
Peak RSS is this process's (the bulk set-up runs in a child and does not count).

Usage: python bench/plan.py [--subscribers 100000] [--matches 3] [--db sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from core.ledger import ledger_records

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlmodel import SQLModel  # noqa: E402

from core.channel import Notifier, split_address  # noqa: E402
from core.db import (  # noqa: E402
    Database,
    make_engine,
)
from core.db_migrate import migrate  # noqa: E402
from core.delivery import digests  # noqa: E402
from core.delivery.render import Renderer  # noqa: E402
from core.models import utcnow  # noqa: E402
from core.reasons import CATEGORY, Reason, hit_data  # noqa: E402
from core.values import DigestItem, DigestRest  # noqa: E402
from tests.conftest import POSTGRES_URL  # noqa: E402

PAPERS = 2_000
NEWSLETTER = "ml-weekly"
TABLES = {
    name: SQLModel.metadata.tables[name]
    for name in ("paper", "version", "subscriber", "follow", "match", "newsletter", "community_pick")
}
# Rows per bulk INSERT in the set-up: bounded memory, few round trips.
CHUNK = 10_000


def _rows(count: int, make: Any) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, count, CHUNK):
        yield [make(n) for n in range(start, min(count, start + CHUNK))]


def populate(url: str, subscribers: int, matches: int) -> None:
    """The population, bulk-inserted: papers (every fifth with a v2), subscribers, follows, matches."""
    engine = make_engine(url)
    migrate(engine)
    now = utcnow()
    created = now - timedelta(days=2)
    t = TABLES
    with engine.begin() as conn:
        conn.execute(
            sa.insert(t["paper"]),
            [
                {"id": f"2611.{p:05d}", "latest_version": 2 if p % 5 == 0 else 1, "first_seen_at": now}
                for p in range(PAPERS)
            ],
        )
        conn.execute(
            sa.insert(t["version"]),
            [
                {
                    "paper_id": f"2611.{p:05d}",
                    "number": number,
                    "title": f"Asynchronous rollouts, part {p}" + (" (revised)" if number == 2 else ""),
                    "abstract": "We bound the effect of policy lag on asynchronous rollouts. " * 8,
                    "authors": ["Ada Lovelace", "Zeng Li", "Grace Hopper"],
                    "categories": ["cs.DC", "cs.LG"],
                    "announce_type": "new" if number == 1 else "replace",
                    "source": "arxiv-rss",
                    "first_seen_at": now,
                    "matched_at": now,
                    "news": True,
                }
                for p in range(PAPERS)
                for number in ((1, 2) if p % 5 == 0 else (1,))
            ],
        )
        conn.execute(
            sa.insert(t["community_pick"]),
            [
                {
                    "paper_id": f"2611.{p:05d}",
                    "source": "hf-daily",
                    "day": now.date(),
                    "upvotes": p % 50,
                    "title": "t",
                    "summary": "s",
                    "comments": 0,
                    "keywords": [],
                    "first_seen_at": now,
                }
                for p in range(0, PAPERS, 7)
            ],
        )
        versions = {
            (paper, number): vid
            for vid, paper, number in conn.execute(
                sa.select(t["version"].c.id, t["version"].c.paper_id, t["version"].c.number)
            )
        }
        # The newsletter's hidden subscriber (already issued: the copies below are what members hold).
        hidden = conn.execute(
            sa.insert(t["subscriber"]).returning(t["subscriber"].c.id),
            [
                {
                    "address": f"newsletter:{NEWSLETTER}",
                    "timezone": "UTC",
                    "schedule": "weekly mon 08:00",
                    "status": "active",
                    "created_at": created,
                    "failures": 0,
                }
            ],
        ).scalar_one()
        conn.execute(
            sa.insert(t["newsletter"]),
            [{"name": NEWSLETTER, "title": "ML weekly", "subscriber_id": hidden, "created_at": created}],
        )
    for rows in _rows(
        subscribers,
        lambda n: {
            "address": f"telegram:{1_000_000 + n}",
            "timezone": "Europe/Berlin" if n % 2 else "UTC",
            # Half instant, half a daily digest that is due (none sent yet, created two days ago).
            "schedule": "instant" if n % 2 else "daily 00:00",
            "status": "active",
            "created_at": created,
            "failures": 0,
            "language": "zh" if n % 10 == 0 else None,
        },
    ):
        with engine.begin() as conn:
            conn.execute(sa.insert(t["subscriber"]), rows)
    with engine.begin() as conn:
        ids = [
            row[0]
            for row in conn.execute(
                sa.select(t["subscriber"].c.id)
                .where(t["subscriber"].c.address.like("telegram:%"))
                .order_by(t["subscriber"].c.id)
            )
        ]
    for rows in _rows(
        len(ids),
        lambda n: {
            "subscriber_id": ids[n],
            "query": "cat:cs.DC",
            "canonical": "cat:cs.DC",
            "created_at": created,
            "revisions": True,
            "instant": n % 2 == 1,
        },
    ):
        with engine.begin() as conn:
            conn.execute(sa.insert(t["follow"]), rows)
    with engine.begin() as conn:
        follows = dict(conn.execute(sa.select(t["follow"].c.subscriber_id, t["follow"].c.id)).all())

    def match_rows(n: int) -> list[dict[str, Any]]:
        sid = ids[n]
        rows = []
        for k in range(matches):
            p = (n * 7 + k * 131) % PAPERS
            number = 2 if p % 5 == 0 else 1
            rows.append(
                {
                    "subscriber_id": sid,
                    "version_id": versions[(f"2611.{p:05d}", number)],
                    "follow_ids": [follows[sid]],
                    "reasons": [hit_data([Reason(CATEGORY, "cs.DC")], follow=follows[sid])],
                    "created_at": now,
                    "instant": n % 2 == 1,
                }
            )
        if n % 3 == 0:  # a newsletter's copy: instant, no follows of the member, reasons prefixed
            p = (n * 11 + 977) % PAPERS
            if all(r["version_id"] != versions[(f"2611.{p:05d}", 1)] for r in rows):
                rows.append(
                    {
                        "subscriber_id": sid,
                        "version_id": versions[(f"2611.{p:05d}", 1)],
                        "follow_ids": [],
                        "reasons": [hit_data([Reason(CATEGORY, "cs.LG")], newsletter=NEWSLETTER)],
                        "created_at": now,
                        "instant": True,
                    }
                )
        return rows

    for start in range(0, len(ids), CHUNK // 4):
        with engine.begin() as conn:
            conn.execute(
                sa.insert(t["match"]),
                [row for n in range(start, min(len(ids), start + CHUNK // 4)) for row in match_rows(n)],
            )
    # What autovacuum does within a minute of such a load: without statistics PostgreSQL plans the page of
    # candidates as if the tables were empty (3 s a page at 10,000 subscribers instead of 2 ms).
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))
    engine.dispose()


@dataclass
class Stage:
    """One measured stage."""

    name: str
    seconds: float = 0.0
    cpu: float = 0.0  # this process's CPU seconds (the machine is shared: wall time is noisy)
    statements: int = 0


class Counter:
    """Counts the statements an engine sends (one per cursor execute or executemany)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.count = 0
        sa.event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *_: Any) -> None:
        self.count += 1


@contextmanager
def measure(stage: Stage, counter: Counter) -> Iterator[None]:
    before, start, cpu = counter.count, time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        stage.seconds += time.perf_counter() - start
        stage.cpu += time.process_time() - cpu
        stage.statements += counter.count - before


def rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(url: str, label: str, subscribers: int, matches: int) -> None:
    """Set up in a child process, then time plan, claim + items, render and pure render here."""
    start = time.perf_counter()
    child = multiprocessing.get_context("fork").Process(target=populate, args=(url, subscribers, matches))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"set-up failed on {label}")
    print(f"{label}: {subscribers:,} subscribers, set-up {time.perf_counter() - start:.0f} s (not measured)")
    engine = make_engine(url)
    db = Database(engine)
    counter = Counter(engine)
    renderer = Renderer(public_url="https://papertrail.example", secret_key="bench-key", max_items=50)
    renderer.render("telegram", [], "1", language="en")  # compile templates outside the timing
    renderer.render("telegram", [], "1", language="zh")
    notifiers: dict[str, Notifier] = {"telegram": None}  # type: ignore[dict-item]  # planning reads keys
    policy = digests.DeliveryPolicy()
    now = utcnow()
    plan, claim, render, pure = Stage("plan"), Stage("claim + items"), Stage("render"), Stage("pure render")
    with measure(plan, counter):
        opened = digests.plan_digests(db, notifiers, now=now)
    rss_plan = rss_mb()
    rendered: list[tuple[str, list[DigestItem], str, dict[str, str], str | None, DigestRest]] = []
    items_total = 0
    while True:
        with measure(claim, counter):
            claimed = ledger_records.claim_digests(db, now, "bench", limit=policy.batch, lease=policy.lease)
            if not claimed:
                break
            batch = digests.batch_items(
                db, claimed, max_items=renderer.max_items, default_language=renderer.default_language
            )
        with measure(render, counter):
            for c in claimed:
                items, rest = batch.items[c.digest_id], batch.rest_of(c.digest_id)
                titles = batch.titles_for(items, rest)
                target = split_address(c.address)[1]
                renderer.render(
                    "telegram",
                    items,
                    target,
                    address=c.address,
                    key=f"papertrail-digest-{c.digest_id}",
                    newsletters=titles,
                    language=c.language,
                    rest=rest,
                )
                rendered.append((target, items, c.address, titles, c.language, rest))
                items_total += len(items) + rest.count
    with measure(pure, counter):
        for target, items, address, titles, language, rest in rendered:
            renderer.render(
                "telegram", items, target, address=address, newsletters=titles, language=language, rest=rest
            )
    engine.dispose()
    print(f"  {opened:,} digests planned, {len(rendered):,} claimed and rendered, {items_total:,} items")
    for stage in (plan, claim, render, pure):
        per = stage.seconds / max(len(rendered), 1) * 1e6
        print(
            f"  {stage.name:14s} {stage.seconds:7.2f} s wall {stage.cpu:7.2f} s CPU  {per:7.0f} µs/digest"
            f"  {stage.statements:6,} statements"
        )
    database = plan.seconds + claim.seconds
    print(
        f"  database (plan + claim + items) {database:.2f} s"
        f" = {database / pure.seconds:.0%} of pure rendering"
        f" ({pure.seconds:.2f} s); peak RSS {rss_plan:.0f} MB after planning, {rss_mb():.0f} MB at the end"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subscribers", type=int, default=100_000)
    parser.add_argument("--matches", type=int, default=3)
    parser.add_argument("--db", default="sqlite,postgresql")
    args = parser.parse_args()
    for db in args.db.split(","):
        if db == "sqlite":
            with tempfile.TemporaryDirectory() as folder:
                run(f"sqlite:///{folder}/bench.db", "SQLite", args.subscribers, args.matches)
        else:
            schema = f"bench_{uuid.uuid4().hex[:10]}"
            admin = sa.create_engine(POSTGRES_URL)
            with admin.begin() as conn:
                conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            sep = "&" if "?" in POSTGRES_URL else "?"
            try:
                run(
                    f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}",
                    "PostgreSQL",
                    args.subscribers,
                    args.matches,
                )
            finally:
                with admin.begin() as conn:
                    conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
                admin.dispose()


if __name__ == "__main__":
    main()
