"""What was sent to a subscriber (core.ledger.ledger_sent), on SQLite and PostgreSQL: the manage page's
``.bib`` history, the private Atom feed and the subscription export list the same papers, each in its
documented order, for one reader whose ledger holds what real delivery leaves there: a digest sent in two
parts after a retry and a dead-letter (so it went out after a digest planned later), a revision of a paper
sent earlier, a newsletter issue's items, and a digest planned but not sent.

The papers are the recorded arXiv feed's; digests are planned and recorded through the ledger's own steps;
the expected list is written here in plain SQL from the stored rows, not read through the reader under test.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from pybtex.database.input.bibtex import Parser

from core.db import Database
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.ledger.ledger_records import DigestPlan
from core.ledger.ledger_sent import NEWEST_FIRST, OLDEST_FIRST, sent_items
from core.models import Follow
from core.papers import paper_records
from core.people import newsletter_records, newsletters, tokens
from core.people.subscription import export_subscription
from core.values import PaperIn
from papertrail.web import feeds as web_feeds
from tests.support.private_feeds import (
    ADDRESS,
    T0,
    abs_id,
    app_client,
    dc_papers,
    entry_ids,
    feed_path,
    recorded,
    revision_of,
    valid_feed,
)
from tests.support.web import KEY

DAY = timedelta(days=1)
SENDING = timedelta(minutes=5)


@dataclasses.dataclass
class Story:
    subscriber_id: int
    digests: dict[str, int]
    unsent: list[tuple[str, int]]


def _plan(db: Database, subscriber_id: int, papers: list[PaperIn], now: datetime) -> int:
    """Store ``papers`` as news at ``now``, match them, and plan the reader's digest; its id."""
    if papers:
        paper_records.save_versions(db, papers, now=now)
        match_new(db, now=now)
    match_records.expand_matches(db, now=now)
    digest = ledger_records.open_digest(db, subscriber_id, "email", instant_only=False, now=now)
    assert digest is not None
    return digest


def _sent(db: Database, digest: int, at: datetime, parts: int = 1) -> None:
    assert ledger_records.finish_sent(db, digest, platform_id=None, parts=parts, now=at)


def story(db: Database) -> Story:
    """Ada follows cs.DC and is a member of a cs.LG newsletter.

    * A (day 0): three new papers, sent.
    * B (day 1): two new papers; the first part of two goes out, then the send fails and is retried until
      it is dead-lettered. Not sent yet: nothing of it counts.
    * C (day 2): two new papers and the revision of A's first paper, planned while B is dead, sent.
    * B is retried (day 3) and sent: it went out after C although planned before it.
    * E (day 4): the newsletter's issue, two papers stored on day 0 (so older versions than any of B or C),
      copied to Ada and sent in her digest.
    * D (day 5): two new papers, planned, not sent.
    """
    dc = dc_papers()
    lg = [
        p for p in recorded() if p.categories[0] == "cs.LG" and "cs.DC" not in p.categories and p.version == 1
    ]
    ada = follow(db, ADDRESS, "cat:cs.DC").subscriber
    assert ada.id is not None
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=T0 - DAY))
    letter = newsletters.create(
        db, "ml", "ML", ["cat:cs.LG"], schedule="daily 08:00", timezone="UTC", now=T0 - DAY
    )
    assert newsletters.join(db, "ml", ada, now=T0 - DAY)
    assert letter.id is not None

    digests: dict[str, int] = {}
    paper_records.save_versions(db, lg[:2], now=T0)  # the newsletter's items: matched now, issued on day 4
    digests["A"] = _plan(db, ada.id, dc[:3], T0)
    _sent(db, digests["A"], T0 + SENDING)

    digests["B"] = _plan(db, ada.id, dc[3:5], T0 + DAY)
    at = T0 + DAY + SENDING
    assert ledger_records.finish_retry(
        db, digests["B"], error="timeout", retry_at=at + SENDING, parts_sent=1, dead=False, now=at
    )
    assert ledger_records.finish_retry(
        db,
        digests["B"],
        error="timeout",
        retry_at=at + 2 * SENDING,
        parts_sent=1,
        dead=True,
        now=at + SENDING,
    )

    digests["C"] = _plan(db, ada.id, [*dc[5:7], revision_of(dc[0])], T0 + 2 * DAY)
    _sent(db, digests["C"], T0 + 2 * DAY + SENDING)

    assert ledger_records.requeue_dead(db, address=ADDRESS, now=T0 + 3 * DAY) == 1
    _sent(db, digests["B"], T0 + 3 * DAY + SENDING, parts=2)

    issue = newsletter_records.open_issue(db, letter.id, now=T0 + 4 * DAY)
    assert issue is not None and issue.copies == 2
    digests["E"] = _plan(db, ada.id, [], T0 + 4 * DAY)
    _sent(db, digests["E"], T0 + 4 * DAY + SENDING)

    digests["D"] = _plan(db, ada.id, dc[7:9], T0 + 5 * DAY)
    return Story(ada.id, digests, [(p.arxiv_id, p.version) for p in dc[7:9]])


def expected(db: Database, subscriber_id: int) -> list[tuple[str, int, int]]:
    """(paper, version, digest) of every match in a sent digest of the subscriber, in the order sent: by
    the digest's sending time, then the digest, then the match. Plain SQL over the stored rows."""
    with db.engine.connect() as connection:
        rows = connection.execute(
            sa.text(
                "SELECT v.paper_id, v.number, d.id FROM match m JOIN digest d ON d.id = m.digest_id "
                "JOIN version v ON v.id = m.version_id "
                "WHERE m.subscriber_id = :s AND d.subscriber_id = :s AND d.state = 'sent' "
                "ORDER BY d.sent_at, d.id, m.id"
            ),
            {"s": subscriber_id},
        )
        return [(str(paper), int(number), int(digest)) for paper, number, digest in rows]


def test_bib_private_feed_and_export_list_what_was_sent_alike(db: Database) -> None:
    told = story(db)
    oldest = expected(db, told.subscriber_id)
    # The story as the ledger has it: A, C, the retried B, then the newsletter's E; not D.
    d = told.digests
    assert [digest for _, _, digest in oldest] == [d["A"]] * 3 + [d["C"]] * 3 + [d["B"]] * 2 + [d["E"]] * 2
    versions = [(paper, number) for paper, number, _ in oldest]
    newest = versions[::-1]
    papers_newest = list(dict.fromkeys(paper for paper, _ in newest))
    revised = dc_papers()[0].arxiv_id
    assert (revised, 1) in versions and (revised, 2) in versions and len(papers_newest) == 9

    # The export: every version sent, oldest first, with its digest and when that digest was sent.
    received = export_subscription(db, ADDRESS)["received"]
    assert [(r["arxiv_id"], r["version"], r["digest"]) for r in received] == oldest
    assert [r["sent_at"] for r in received][5:7] == ["2026-12-03T08:05:00Z", "2026-12-04T08:05:00Z"]

    # The private feed: every version sent, newest first.
    response = app_client(db).get(feed_path(db))
    assert response.status_code == 200
    doc, _ = valid_feed(response.content)
    assert entry_ids(doc) == [abs_id(paper, number) for paper, number in newest]

    # The .bib: each paper once, by its most recent sending, at its newest stored version.
    bib = app_client(db).get(f"/manage/{tokens.sign(KEY, tokens.MANAGE, ADDRESS)}/papers.bib").text
    entries = Parser(person_fields=()).parse_string(bib).entries
    assert list(entries) == [f"arXiv:{paper}" for paper in papers_newest]
    assert entries[f"arXiv:{revised}"].fields["version"] == "2"

    # The same papers in all three, and none of the digest not sent.
    assert {r["arxiv_id"] for r in received} == {p for p, _ in newest} == set(papers_newest)
    assert not {paper for paper, _ in told.unsent} & set(papers_newest)


def test_the_reader_pages_windows_and_reverses_alike(db: Database) -> None:
    told = story(db)
    oldest = expected(db, told.subscriber_id)

    def read(**options: object) -> list[tuple[str, int, int]]:
        return [
            (item.arxiv_id, item.version, item.digest_id)
            for item in sent_items(db, told.subscriber_id, **options)  # type: ignore[arg-type]
        ]

    assert read(order=OLDEST_FIRST) == oldest
    assert read() == read(order=NEWEST_FIRST) == oldest[::-1]
    for page in (1, 2, 3):  # a page boundary inside and between digests of one sending time
        assert read(order=OLDEST_FIRST, page=page) == oldest
        assert read(order=NEWEST_FIRST, page=page, limit=5) == oldest[::-1][:5]
    # The window: digests sent from day 3 on (the retried B, then E).
    assert read(order=OLDEST_FIRST, since=T0 + 3 * DAY) == oldest[6:]
    assert read(limit=0) == []
    # In one transaction of the caller's too, with what each item carries.
    with db.connection() as connection:
        items = list(sent_items(connection, told.subscriber_id, order=OLDEST_FIRST))
    assert [(i.arxiv_id, i.version, i.digest_id) for i in items] == oldest
    assert items[0].sent_at == T0 + SENDING and items[-1].sent_at == T0 + 4 * DAY + SENDING
    assert items[0].reasons and items[0].title == dc_papers()[0].title
    assert items[-1].reasons[0].newsletter == "ml"


def test_heartbeats_after_the_digests_do_not_empty_the_private_feed(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Heartbeats are sent digests with no match: a feed of the newest N entries reads past them."""
    told = story(db)
    subscriber_records.update_subscriber(db, told.subscriber_id, heartbeat=True)
    # D goes out, so nothing waits; then three heartbeats on three announcement days.
    _sent(db, told.digests["D"], T0 + 5 * DAY + SENDING)
    for day in (6, 7, 8):
        opened = ledger_records.open_heartbeats(
            db,
            [DigestPlan(told.subscriber_id, "email", instant_only=False)],
            not_since=T0 + day * DAY,
            now=T0 + day * DAY,
        )
        assert len(opened) == 1
        _sent(db, opened[0], T0 + day * DAY + SENDING)
    newest = expected(db, told.subscriber_id)[::-1]
    assert len(newest) == 12
    monkeypatch.setattr(web_feeds, "PRIVATE_FEED_ENTRIES", 3)
    doc, _ = valid_feed(app_client(db).get(feed_path(db)).content)
    assert entry_ids(doc) == [abs_id(paper, number) for paper, number, _ in newest[:3]]
    with db.session() as session:
        heartbeats = session.execute(
            sa.text(
                "SELECT count(*) FROM digest WHERE subscriber_id = :s AND state = 'sent' AND item_count = 0"
            ),
            {"s": told.subscriber_id},
        ).scalar_one()
    assert heartbeats == 3
