"""The chaos suite's data: the recorded day, the subscribers, the fault-free expectation, and what a trial's
ledger says (read straight from the tables, in the harness's own process).

A *pair* is (recipient, version): ``("r0007@chaos.test", "2411.17700v2")``. The recorded day has one
version per paper, so a pair is also (recipient, paper).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa
from sqlmodel import SQLModel

from core.db import Database, make_engine
from core.db_migrate import migrate
from core.follows import match_records
from core.follows.manage import import_follows
from core.models import DigestState, SubscriberStatus, utcnow
from core.papers.pipeline import ingest_once
from ingest.arxiv_rss import ArxivRssSource
from ingest.arxiv_rss_parse import parse_feed
from ingest.http import HttpClient
from tests.servers import Reply, feed_server

Pair = tuple[str, str]

ROOT = Path(__file__).resolve().parents[1]
DAY_FEED = ROOT / "tests" / "corpus" / "arxiv-rss" / "aioarxiv_rss_mock_feed.xml"
DOMAIN = "chaos.test"
# Subscribers follow categories with this many items in the day (inclusive): digests of tens of items,
# not the hundreds a follow of cs.LG would bring (those only make rendering, not the ledger, slower).
CATEGORY_ITEMS = (5, 40)
FOLLOWS_PER_SUBSCRIBER = (1, 3)

SUBSCRIBER, MATCH, DIGEST, VERSION = (
    SQLModel.metadata.tables[name] for name in ("subscriber", "match", "digest", "version")
)


def day_feed(items: int | None = None) -> bytes:
    """The recorded arXiv day (rss.arxiv.org, 28 Nov 2024, 1,504 items), or its first ``items`` items."""
    body = DAY_FEED.read_bytes()
    if items is None:
        return body
    blocks = list(re.finditer(rb"<item>.*?</item>\s*", body, flags=re.S))
    if items >= len(blocks):
        return body
    return body[: blocks[items].start()] + body[blocks[-1].end() :]


def address(number: int) -> str:
    """The subscriber address of subscriber ``number``."""
    return f"email:r{number:04d}@{DOMAIN}"


def follow_lines(feed: bytes, subscribers: int, seed: int) -> list[bytes]:
    """The follows file (``import follows`` lines) of ``subscribers`` instant email subscribers, seeded."""
    day = parse_feed(feed).items
    counts = Counter(c for paper in day for c in paper.categories)
    low, high = CATEGORY_ITEMS
    categories = sorted(c for c, n in counts.items() if low <= n <= high) or sorted(counts)
    rng = random.Random(seed)
    lines = []
    for number in range(subscribers):
        picked = rng.sample(categories, min(len(categories), rng.randint(*FOLLOWS_PER_SUBSCRIBER)))
        for category in picked:
            line = {"address": address(number), "query": f"cat:{category}", "schedule": "instant"}
            lines.append(json.dumps(line).encode() + b"\n")
    return lines


def seed(url: str, lines: Sequence[bytes]) -> None:
    """Migrate the database at ``url`` and import the follows (the path `papertrail import follows` runs)."""
    engine = make_engine(url)
    try:
        migrate(engine)
        report = import_follows(
            Database(engine), lines, skip_invalid=False, timezone="UTC", schedule="instant"
        )
        if report.counts is None:
            raise RuntimeError(f"the chaos follows did not import: {report.bad[:3]}")
    finally:
        engine.dispose()


def expected_pairs(url: str, feed: bytes, lines: Sequence[bytes]) -> set[Pair]:
    """What the store matches for each subscriber when nothing fails: the day ingested once into a fresh
    database (``ingest_once`` over loopback HTTP, then the fan-out), its Match rows read back."""
    seed(url, lines)
    engine = make_engine(url)
    try:
        db = Database(engine)
        with feed_server(Reply(200, feed)) as server:

            async def ingest() -> None:
                async with HttpClient("papertrail-chaos", timeout=30) as http:
                    report = await ingest_once(db, ArxivRssSource(http, server.url))
                if report.error:
                    raise RuntimeError(f"the reference ingest failed: {report.error}")

            asyncio.run(ingest())
        match_records.expand_matches(db)
        return {(recipient, version) for recipient, version, _, _, _ in pair_rows(engine)}
    finally:
        engine.dispose()


def pair_rows(
    engine: sa.Engine, recipients: Iterable[str] | None = None
) -> list[tuple[str, str, int | None, str | None, str | None]]:
    """(recipient, version, digest id, digest state, digest worker) of every Match row of an email
    subscriber (or of ``recipients`` only)."""
    query = (
        sa.select(
            SUBSCRIBER.c.address,
            VERSION.c.paper_id,
            VERSION.c.number,
            MATCH.c.digest_id,
            DIGEST.c.state,
            DIGEST.c.worker,
        )
        .select_from(MATCH)
        .join(SUBSCRIBER, SUBSCRIBER.c.id == MATCH.c.subscriber_id)
        .join(VERSION, VERSION.c.id == MATCH.c.version_id)
        .outerjoin(DIGEST, DIGEST.c.id == MATCH.c.digest_id)
        .where(SUBSCRIBER.c.address.like("email:%"))
    )
    if recipients is not None:
        wanted = sorted({f"email:{r}" for r in recipients})
        if not wanted:
            return []
        query = query.where(SUBSCRIBER.c.address.in_(wanted))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [
        (addr.removeprefix("email:"), f"{paper}v{number}", digest, state, worker)
        for addr, paper, number, digest, state, worker in rows
    ]


@dataclass(frozen=True, slots=True)
class LedgerState:
    """A trial's ledger at one moment, in counts (cheap enough to poll)."""

    match_rows: int  # Match rows of email subscribers
    sent_rows: int  # ... in a sent digest
    held_rows: int  # ... not sent, of a paused subscriber
    pending_due: int  # digests pending and due now
    pending_later: int  # digests pending and backing off
    sending: int  # digests claimed by a worker
    dead: int  # digests dead-lettered
    paused: int  # paused subscribers
    unmatched_versions: int  # versions stored but not matched yet (an ingest cut short)

    def settled(self, expected: int) -> bool:
        """Every expected pair is sent or held for a paused subscriber, and nothing is queued or claimed."""
        return (
            self.match_rows >= expected
            and self.sent_rows + self.held_rows == self.match_rows
            and self.pending_due + self.pending_later + self.sending == 0
            and self.unmatched_versions == 0
        )

    def only_backing_off(self) -> bool:
        """Nothing left but digests waiting out a back-off (an operator's `digest --now` sends them)."""
        return self.pending_later > 0 and self.pending_due == 0 and self.sending == 0


def ledger_state(engine: sa.Engine, now: datetime | None = None) -> LedgerState:
    """The counts of :class:`LedgerState`, in four small queries."""
    now = now or utcnow()
    paused = SUBSCRIBER.c.status == SubscriberStatus.PAUSED
    with engine.connect() as conn:
        # Grouped by the plain columns: PostgreSQL does not take a repeated parameter as the same group.
        rows = conn.execute(
            sa.select(DIGEST.c.state, SUBSCRIBER.c.status, sa.func.count())
            .select_from(MATCH)
            .join(SUBSCRIBER, SUBSCRIBER.c.id == MATCH.c.subscriber_id)
            .outerjoin(DIGEST, DIGEST.c.id == MATCH.c.digest_id)
            .where(SUBSCRIBER.c.address.like("email:%"))
            .group_by(DIGEST.c.state, SUBSCRIBER.c.status)
        ).all()
        unsent = conn.execute(
            sa.select(DIGEST.c.state, DIGEST.c.next_attempt_at).where(DIGEST.c.state != DigestState.SENT)
        ).all()
        paused_count = conn.execute(
            sa.select(sa.func.count()).select_from(SUBSCRIBER).where(paused)
        ).scalar_one()
        unmatched = conn.execute(
            sa.select(sa.func.count()).select_from(VERSION).where(VERSION.c.matched_at.is_(None))
        ).scalar_one()
    pending = [at for state, at in unsent if state == DigestState.PENDING]
    return LedgerState(
        match_rows=sum(count for _, _, count in rows),
        sent_rows=sum(count for state, _, count in rows if state == DigestState.SENT),
        held_rows=sum(
            count
            for state, status, count in rows
            if status == SubscriberStatus.PAUSED and state != DigestState.SENT
        ),
        pending_due=sum(1 for at in pending if at is None or at <= now),
        pending_later=sum(1 for at in pending if at is not None and at > now),
        sending=sum(1 for state, _ in unsent if state == DigestState.SENDING),
        dead=sum(1 for state, _ in unsent if state == DigestState.DEAD),
        paused=int(paused_count),
        unmatched_versions=int(unmatched),
    )
