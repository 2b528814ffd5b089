"""A capped digest loads only the items it shows, and renders exactly as if every item had been loaded.

A day of category follows gives a subscriber ~400 matches; a digest shows ``max_items`` (50) of them and
counts the rest. ``core.delivery.digests.batch_items`` ranks light rows with the renderer's rule and
builds full
items for the shown ones only. Here 400-match digests (mixed reasons, upvotes, revisions with what they
changed, newsletter copies, guides, two languages) are rendered for every channel both ways: from the
capped batch, and from every item built by the ORM path (``ledger_records.digests_items``), the
reference.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa
from sqlmodel import SQLModel

from core.channel import Notifier, split_address
from core.db import Database
from core.delivery import digests
from core.delivery.digests import DeliveryPolicy, batch_items, plan_digests, send_due_digests
from core.delivery.render import Renderer
from core.guides import guide_records
from core.ledger import ledger_records
from core.models import Version, utcnow
from core.people import newsletter_records
from core.reasons import ABSTRACT, AUTHOR, CATEGORY, TITLE, Reason, hit_data
from core.values import Guide, Message, SendResult
from notifiers.webhook.payload import digest_payload

MAX_ITEMS = 50
MATCHES = 400
PAPERS = 600
NEWSLETTER = "dc-weekly"
# Address -> how many matches it holds and of what kind: "mixed" (a quarter revisions, some newsletter
# copies), "news" (all newsletter copies: an issue alone is titled with the newsletter, and the left-out
# items must not change that), "revisions" (60 revisions and 40 new papers: the cap shows revisions too).
SUBSCRIBERS: dict[str, tuple[int, str]] = {
    "telegram:1001": (MATCHES, "mixed"),
    "email:zeng@example.org": (MATCHES, "mixed"),
    "slack:C0123ABC": (MATCHES, "mixed"),
    "webhook:https://hooks.example.org/p": (MATCHES, "mixed"),
    "console:news-only": (120, "news"),
    "console:revisions": (100, "revisions"),
    "console:few": (30, "mixed"),
}
CHANNELS = ("telegram", "email", "slack", "console", "webhook", "apprise")
TABLES = {
    name: SQLModel.metadata.tables[name]
    for name in ("paper", "version", "subscriber", "follow", "match", "newsletter", "community_pick")
}


def _paper(p: int) -> str:
    return f"2612.{p:05d}"


def populate(db: Database) -> None:
    """Papers (every fourth revised), upvotes, a newsletter, the subscribers and their matches."""
    now = utcnow()
    t = TABLES
    with db.engine.begin() as conn:
        conn.execute(
            sa.insert(t["paper"]),
            [
                {"id": _paper(p), "latest_version": 2 if p % 4 == 0 else 1, "first_seen_at": now}
                for p in range(PAPERS)
            ],
        )
        conn.execute(
            sa.insert(t["version"]),
            [
                {
                    "paper_id": _paper(p),
                    "number": number,
                    # Revisions change the title of some papers, only whitespace of others' abstracts.
                    "title": f"Rollouts {p}" + (" (revised)" if number == 2 and p % 8 == 0 else ""),
                    "abstract": ("We bound  policy lag. " if number == 2 else "We bound policy lag. ") * 20,
                    "authors": ["Ada Lovelace", "Zeng Li"]
                    + (["Grace Hopper"] if number == 2 and p % 12 == 0 else []),
                    "categories": ["cs.DC", "cs.LG"],
                    "journal_ref": "JMLR 1" if number == 2 and p % 16 == 0 else None,
                    "announce_type": "new" if number == 1 else "replace",
                    "source": "arxiv-rss",
                    "first_seen_at": now,
                    "matched_at": now,
                    "news": True,
                }
                for p in range(PAPERS)
                for number in ((1, 2) if p % 4 == 0 else (1,))
            ],
        )
        conn.execute(
            sa.insert(t["community_pick"]),
            [
                {
                    "paper_id": _paper(p),
                    "source": "hf-daily",
                    "day": now.date(),
                    "upvotes": p % 13,
                    "title": "t",
                    "summary": "s",
                    "comments": 0,
                    "keywords": [],
                    "first_seen_at": now,
                }
                for p in range(0, PAPERS, 9)
            ],
        )
        versions = {
            (paper, number): vid
            for vid, paper, number in conn.execute(
                sa.select(t["version"].c.id, t["version"].c.paper_id, t["version"].c.number)
            )
        }
        hidden = conn.execute(
            sa.insert(t["subscriber"]).returning(t["subscriber"].c.id),
            [
                {
                    "address": f"newsletter:{NEWSLETTER}",
                    "timezone": "UTC",
                    "schedule": "weekly mon 08:00",
                    "status": "active",
                    "created_at": now - timedelta(days=2),
                    "failures": 0,
                }
            ],
        ).scalar_one()
        conn.execute(
            sa.insert(t["newsletter"]),
            [{"name": NEWSLETTER, "title": "DC weekly", "subscriber_id": hidden, "created_at": now}],
        )
        for n, (address, (count, kind)) in enumerate(SUBSCRIBERS.items()):
            sid = conn.execute(
                sa.insert(t["subscriber"]).returning(t["subscriber"].c.id),
                [
                    {
                        "address": address,
                        "timezone": "UTC",
                        "schedule": "instant",
                        "status": "active",
                        "created_at": now - timedelta(days=2),
                        "failures": 0,
                        "language": "zh" if address.startswith("email:") else None,
                    }
                ],
            ).scalar_one()
            fid = conn.execute(
                sa.insert(t["follow"]).returning(t["follow"].c.id),
                [
                    {
                        "subscriber_id": sid,
                        "query": "cat:cs.DC",
                        "canonical": "cat:cs.DC",
                        "created_at": now,
                        "revisions": True,
                        "instant": True,
                    }
                ],
            ).scalar_one()
            conn.execute(
                sa.insert(t["match"]),
                [_match(sid, fid, n, k, kind, versions, now) for k in range(count)],
            )


def _match(
    sid: int, fid: int, n: int, k: int, kind: str, versions: Mapping[tuple[str, int], int], now: Any
) -> dict[str, Any]:
    """The k-th match of subscriber n: a mix of reasons (every rank), some newsletter copies."""
    p = (n * 37 + k * 131) % PAPERS  # 131 and 600 are coprime: distinct papers
    if kind == "revisions":  # revised papers are the multiples of four
        p = 4 * k if k < 60 else 4 * (k - 60) + 1
    number = 2 if p % 4 == 0 else 1
    field = AUTHOR if k % 37 == 0 else TITLE if k % 11 == 0 else ABSTRACT if k % 7 == 0 else CATEGORY
    term = {AUTHOR: "Ada Lovelace", TITLE: "rollouts", ABSTRACT: "policy lag", CATEGORY: "cs.DC"}[field]
    copy = kind == "news" or k % 15 == 0
    return {
        "subscriber_id": sid,
        "version_id": versions[(_paper(p), number)],
        "follow_ids": [] if copy else [fid],
        "reasons": [hit_data([Reason(field, term)], newsletter=NEWSLETTER)]
        if copy
        else [hit_data([Reason(field, term)], follow=fid)],
        "created_at": now,
        "instant": True,
    }


@pytest.fixture
def claimed_store(db: Database) -> Iterator[Database]:
    """The population, planned into one digest per subscriber, with guides for some versions."""
    populate(db)
    with db.engine.connect() as conn:
        ids = [
            row[0] for row in conn.execute(sa.select(TABLES["version"].c.id).order_by(TABLES["version"].c.id))
        ]
    for vid in ids[::5]:
        for language in ("en", "zh"):
            guide_records.save_guide(
                db, vid, language, Guide(f"TL;DR {vid} {language}", ("one",)), model="m", now=utcnow()
            )
    notifiers: dict[str, Notifier] = dict.fromkeys(("telegram", "email", "slack", "webhook", "console"))  # type: ignore[assignment]
    assert plan_digests(db, notifiers, now=utcnow()) == len(SUBSCRIBERS)
    yield db


def test_a_capped_batch_renders_like_every_item_and_loads_only_the_shown(claimed_store: Database) -> None:
    db = claimed_store
    claimed = ledger_records.claim_digests(db, utcnow(), "w", limit=100, lease=timedelta(minutes=5))
    assert len(claimed) == len(SUBSCRIBERS)
    ids = [c.digest_id for c in claimed]

    # What the capped path reads: no ORM Version objects at all, and version texts for shown matches only.
    orm_versions = 0
    text_reads: list[tuple[str, int]] = []

    def loaded(*_: Any) -> None:
        nonlocal orm_versions
        orm_versions += 1

    def statement(_c: Any, _cur: Any, sql: str, params: Any, *_: Any) -> None:
        if "version.abstract" in sql:  # the statements that read version texts: one bound id per row asked
            text_reads.append(("match" if "follow_ids" in sql else "earlier", len(params)))

    sa.event.listen(Version, "load", loaded)
    sa.event.listen(db.engine, "before_cursor_execute", statement)
    try:
        batch = batch_items(db, claimed, max_items=MAX_ITEMS)
    finally:
        sa.event.remove(Version, "load", loaded)
        sa.event.remove(db.engine, "before_cursor_execute", statement)
    assert orm_versions == 0
    shown = sum(len(batch.items[d]) for d in ids)
    assert all(len(batch.items[d]) <= MAX_ITEMS for d in ids)
    assert sum(params for kind, params in text_reads if kind == "match") == shown <= MAX_ITEMS * len(ids)
    shown_revisions = sum(1 for d in ids for item in batch.items[d] if item.is_revision)
    assert shown_revisions >= 10 + 30 // 4  # the "revisions" digest shows ten, the small one its own
    assert any(item.changes for d in ids for item in batch.items[d])
    assert sum(params for kind, params in text_reads if kind == "earlier") <= shown_revisions

    # The reference: every item, built by the ORM path, with guides.
    full = digests.with_guides(db, claimed, ledger_records.digests_items(db, ids))
    assert {d: len(full[d]) for d in ids} == {c.digest_id: SUBSCRIBERS[c.address][0] for c in claimed}
    assert any(batch.rest_of(d).count for d in ids) and not batch.rest_of(ids[-1]).count
    titles = newsletter_records.newsletter_titles(db, [NEWSLETTER])
    renderer = Renderer(public_url="https://papertrail.example", secret_key="k", max_items=MAX_ITEMS)
    now = utcnow()
    for c in claimed:
        items, rest = batch.items[c.digest_id], batch.rest_of(c.digest_id)
        assert len(items) + rest.count == len(full[c.digest_id])
        assert batch.titles_for(items, rest) == titles
        target = split_address(c.address)[1]
        for channel in CHANNELS:
            common: dict[str, Any] = {"address": c.address, "key": f"k{c.digest_id}", "language": c.language}
            capped = renderer.render(channel, items, target, newsletters=titles, rest=rest, **common)
            reference = renderer.render(channel, full[c.digest_id], target, newsletters=titles, **common)
            assert capped == reference, (c.address, channel)
            assert digest_payload(capped, now) == digest_payload(reference, now)
    # The subjects count every item, not the shown ones.
    telegram = next(c for c in claimed if c.address.startswith("telegram:"))
    message = renderer.render(
        "telegram", batch.items[telegram.digest_id], "1001", rest=batch.rest_of(telegram.digest_id)
    )
    assert message.item_count == MATCHES and len(message.items) == MAX_ITEMS
    new = sum(1 for item in full[telegram.digest_id] if not item.is_revision)
    assert message.subject.startswith(f"PaperTrail: {new} new papers, {MATCHES - new} revisions")


class Capture:
    """A notifier that accepts everything and keeps what it was given."""

    channel: ClassVar[str] = "console"
    max_length: ClassVar[int | None] = None

    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def send(self, address: str, message: Message) -> SendResult:
        self.sent.append(message)
        return SendResult(platform_id="ok")

    async def aclose(self) -> None:
        pass


async def test_every_match_of_a_capped_digest_is_sent_with_it(claimed_store: Database) -> None:
    db = claimed_store
    capture = Capture()
    notifiers: dict[str, Notifier] = dict.fromkeys(
        ("telegram", "email", "slack", "webhook", "console"), capture
    )
    reports = await send_due_digests(
        db, notifiers, Renderer(max_items=MAX_ITEMS), policy=DeliveryPolicy(batch=2)
    )
    assert sorted(r.items for r in reports) == sorted(count for count, _ in SUBSCRIBERS.values())
    assert all(r.sent for r in reports)
    assert all(len(m.items) == min(MAX_ITEMS, m.item_count) for m in capture.sent)
    with db.engine.connect() as conn:
        match, digest = TABLES["match"], SQLModel.metadata.tables["digest"]
        unsent = conn.execute(
            sa.select(sa.func.count())
            .select_from(match.join(digest, digest.c.id == match.c.digest_id, isouter=True))
            .where(sa.or_(match.c.digest_id.is_(None), digest.c.state != "sent"))
        ).scalar_one()
    assert unsent == 0
