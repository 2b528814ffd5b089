"""A store seeded from the recorded corpus for the web tests, and the numbers its pages must show.

``await seed_store(store)`` ingests, relative to ``now`` (default: the real current time, so that a server
started afterwards with the real clock shows the same numbers for the next 20 hours):

* 10 % of the recorded arXiv feed (28 Nov 2024, 1,504 items) as news five days ago, matched against the
  subscribers' follows, then the whole feed through the real pipeline (loopback HTTP, ``ingest_once``) an
  hour ago: the rest is news today (not matched, to keep the fixture fast);
* two recorded Hugging Face days: 2026-08-21 two hours ago (inside the 24 hours), 2026-08-20 three days ago;
* 970 arXivRaw versions from the recorded OAI-PMH page as history ten days ago (never news);
* a hostile paper (``<script>`` title, v1 three days ago, a revision 30 minutes ago), a hostile community
  pick (``javascript:`` link) and a failing ``arxiv-oai`` run whose error is an HTML injection;
* five subscribers whose digests are sent, dead-lettered, refused (paused), queued, and not planned yet;
* AI guides: the hostile paper's revision in English and Chinese (hostile text, ten minutes ago), a few of
  today's versions in English (two hours ago), one version guided 30 hours ago in English and in Chinese an
  hour ago (its first guide is outside the 24 hours), and one two days ago.

``expected_numbers(store, now)`` counts what each number on the status page must be, with plain SQL
written independently of ``core.overview.dashboard_records``. The browser test uses both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

import sqlalchemy as sa

from core.db import Database
from core.delivery.digests import DeliveryPolicy
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.guides import guide_records
from core.ledger import ledger_records
from core.ledger.ledger_records import DigestPlan
from core.models import Follow, RunState, Subscriber, SubscriberStatus, UTCDateTime, utcnow
from core.papers import paper_records, run_records
from core.papers.paper_records import Novelty
from core.papers.pipeline import ingest_community, ingest_once
from core.values import AnnounceType, CommunityPick, Guide, PaperIn
from ingest.arxiv_oai_parse import parse_oai
from ingest.arxiv_rss import ArxivRssSource
from ingest.arxiv_rss_parse import parse_feed
from ingest.hf_daily import HfDailySource
from ingest.http import HttpClient, Politeness
from tests.conftest import BIG_FEED, CORPUS
from tests.servers import Reply, feed_server

HF_DAYS = {
    date(2026, 8, 21): timedelta(hours=2),
    date(2026, 8, 20): timedelta(days=3),
}
OAI_PAGE = CORPUS / "arxiv-oai" / "litpuvn_ListRecords_arXivRaw_from2016-10-20.xml"
HOSTILE_ID = "2611.00666"
HOSTILE_TITLE = '<script>alert("x")</script> & <b>bold</b>'
HOSTILE_REVISED_TITLE = '<img src=x onerror=alert(1)> revised "title"'
HOSTILE_AUTHOR = "Ada <Lovelace>"
HOSTILE_PICK_ID = "2611.00777"
HOSTILE_PICK_TITLE = "<iframe src=https://evil.example></iframe> pick"
HOSTILE_ERROR = "HTTP 503 from <b>oaipmh</b> <script>alert(2)</script>"
# The hostile paper's AI guides, stored as they are (no cleaning): the pages must escape them.
HOSTILE_GUIDES = {
    "en": Guide(
        '<script>alert("guide")</script> English TL;DR & more',
        ("<img src=x onerror=alert(4)> first contribution", "second <b>contribution</b>"),
        "</div><iframe src=https://evil.example></iframe> the title changed",
    ),
    "zh": Guide(
        "<script>alert(5)</script> 中文导读：一句话总结",
        ("第一项贡献 <img src=x onerror=alert(6)>",),
        "标题有改动 </p><iframe>",
    ),
}
GUIDE_MODEL = "test-model"

# address -> (follow, what happens to its digest)
SUBSCRIBERS = {
    "console:alice": ("cat:cs.DC", "sent"),
    "email:bob@example.org": ("cat:cs.LG", "dead"),
    "telegram:42": ("cat:cs.AI", "refused"),
    "slack:C0123ABC": ("cat:cs.CL", "queued"),
    "console:carol": ("cat:cs.RO", "unplanned"),
}


# The numbers of the status page, by their data-count names (templates/web/status.html.j2) and the
# Expected fields that hold what they must be.
DASHBOARD_COUNTS = (
    "new_24h",
    "new_ai_24h",
    "revised_24h",
    "revised_ai_24h",
    "community_24h",
    "papers",
    "ai_papers",
    "revised_papers",
    "community_papers",
    "pending_matches",
    "queued_digests",
    "dead_digests",
    "paused_subscribers",
    "guides_24h",
)


@dataclass(frozen=True, slots=True)
class Expected:
    """Every number of the status page and the metrics, counted with plain SQL."""

    new_24h: int
    new_ai_24h: int
    revised_24h: int
    revised_ai_24h: int
    community_24h: int
    papers: int
    ai_papers: int
    revised_papers: int
    community_papers: int
    pending_matches: int
    queued_digests: int
    dead_digests: int
    paused_subscribers: int
    guides_24h: int
    versions_new: int
    versions_revision: int
    matches: int
    digests: dict[tuple[str, str], int] = field(default_factory=dict)
    per_day: dict[date, tuple[int, int, int]] = field(default_factory=dict)


async def seed_store(db: Database, now: datetime | None = None) -> datetime:
    """Fill ``store`` as described in the module docstring; returns the ``now`` it was seeded for."""
    now = now or utcnow()
    for address, (query, _) in SUBSCRIBERS.items():
        follow(db, address, query)
    # A follow sees only versions that arrive after it was made: date the follows before everything.
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=now - timedelta(days=30)))
    feed = parse_feed(BIG_FEED.read_bytes()).items
    paper_records.save_versions(db, feed[::10], now=now - timedelta(days=5))
    assert match_new(db, now=now - timedelta(days=5)) > 0
    match_records.expand_matches(
        db, now=now - timedelta(days=5)
    )  # to the subscribers, before they are paused below
    # Matching tokenises every version; the rest of the feed needs no matches, so the subscribers sit
    # the big ingest out (only active subscribers are matched) and the fixture stays fast.
    with db.session() as session:
        session.execute(sa.update(Subscriber).values(status=SubscriberStatus.PAUSED))
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        async with HttpClient("papertrail-tests", timeout=10, politeness=Politeness(retries=0)) as http:
            report = await ingest_once(db, ArxivRssSource(http, server.url), now=now - timedelta(hours=1))
            assert report.error is None, report.error
    with db.session() as session:
        session.execute(sa.update(Subscriber).values(status=SubscriberStatus.ACTIVE))
    for day, age in HF_DAYS.items():
        body = (CORPUS / "hf-daily" / "api-objects-reserialized" / f"{day.isoformat()}.json").read_bytes()
        with feed_server(Reply(200, body)) as server:
            async with HttpClient("papertrail-tests", timeout=10, politeness=Politeness(retries=0)) as http:
                source = HfDailySource(http, server.url.replace("/rss/", "/api/"))
                picked = await ingest_community(db, source, day, now=now - age)
                assert picked.error is None, picked.error
    paper_records.save_versions(
        db, parse_oai(OAI_PAGE.read_bytes()).papers, now=now - timedelta(days=10), novelty=Novelty.HISTORY
    )
    _seed_hostile(db, now)
    _seed_digests(db, now)
    _seed_guides(db, now)
    return now


def _seed_hostile(db: Database, now: datetime) -> None:
    def version(number: int, title: str) -> PaperIn:
        return PaperIn(
            arxiv_id=HOSTILE_ID,
            version=number,
            title=title,
            abstract="</p><img src=x onerror=alert(1)> plain & simple",
            authors=(HOSTILE_AUTHOR, 'Bob "Tables" O\'Brien'),
            categories=("cs.LG", "cs.AI"),
            announce_type=AnnounceType.NEW if number == 1 else AnnounceType.REPLACE,
            announced_at=now - timedelta(days=3 if number == 1 else 1),
            comment="10 pages, <i>appendix</i>",
        )

    paper_records.save_versions(db, [version(1, HOSTILE_TITLE)], now=now - timedelta(days=3))
    paper_records.save_versions(db, [version(2, HOSTILE_REVISED_TITLE)], now=now - timedelta(minutes=30))
    paper_records.save_picks(
        db,
        [
            CommunityPick(
                arxiv_id=HOSTILE_PICK_ID,
                day=(now - timedelta(hours=3)).date(),
                title=HOSTILE_PICK_TITLE,
                summary="<script>alert(3)</script>",
                authors=(),
                upvotes=7,
                github_repo="javascript:alert(1)",
                project_page="https://example.org/project",
            )
        ],
        now=now - timedelta(hours=3),
    )
    run = run_records.start_run(db, "arxiv-oai", now=now - timedelta(minutes=25))
    run_records.finish_run(db, run, RunState.ERROR, now=now - timedelta(minutes=20), error=HOSTILE_ERROR)


def _seed_guides(db: Database, now: datetime) -> None:
    revision = paper_records.versions_of(db, HOSTILE_ID)[-1]
    assert revision.id is not None
    for language, guide in HOSTILE_GUIDES.items():
        assert guide_records.save_guide(
            db, revision.id, language, guide, model=GUIDE_MODEL, now=now - timedelta(minutes=10)
        )
    with db.engine.connect() as c:
        today = list(
            c.execute(
                sa.text(
                    "SELECT id FROM version WHERE news AND number = 1 AND paper_id <> :hostile "
                    "ORDER BY paper_id LIMIT 5"
                ).bindparams(hostile=HOSTILE_ID)
            ).scalars()
        )
    assert len(today) == 5
    for version_id in today[:3]:
        guide = Guide(f"What version {version_id} is about.", ("A contribution.",))
        guide_records.save_guide(db, version_id, "en", guide, model=GUIDE_MODEL, now=now - timedelta(hours=2))
    late = Guide("Guided long ago.")
    guide_records.save_guide(db, today[3], "en", late, model=GUIDE_MODEL, now=now - timedelta(hours=30))
    guide_records.save_guide(
        db, today[3], "zh", Guide("很久以前的导读。"), model=GUIDE_MODEL, now=now - timedelta(hours=1)
    )
    guide_records.save_guide(db, today[4], "en", late, model=GUIDE_MODEL, now=now - timedelta(days=2))


def _seed_digests(db: Database, now: datetime) -> None:
    ids = {}
    for address in SUBSCRIBERS:
        subscriber = subscriber_records.get_subscriber(db, address)
        assert subscriber is not None and subscriber.id is not None
        ids[address] = subscriber.id
    plans = [
        DigestPlan(ids[address], address.partition(":")[0], instant_only=False)
        for address, (_, fate) in SUBSCRIBERS.items()
        if fate != "unplanned"
    ]
    opened = ledger_records.open_digests(db, plans, now=now)
    assert len(opened) == len(plans), "every planned subscriber has matches in the recorded feed"
    digest_of = {
        store_id: digest for store_id, digest in zip([p.subscriber_id for p in plans], opened, strict=True)
    }
    queued = digest_of[ids["slack:C0123ABC"]]
    claimed = ledger_records.claim_digests(
        db, now, "seed", limit=10, lease=DeliveryPolicy().lease, exclude=[queued]
    )
    fates = {ids[address]: fate for address, (_, fate) in SUBSCRIBERS.items()}
    for digest in claimed:
        fate = fates[digest.subscriber_id]
        if fate == "sent":
            ledger_records.finish_sent(db, digest.digest_id, platform_id="m1", parts=1, now=now)
        elif fate == "dead":
            ledger_records.finish_retry(
                db, digest.digest_id, error="timeout", retry_at=now, parts_sent=0, dead=True, now=now
            )
        elif fate == "refused":
            ledger_records.finish_refused(db, digest.digest_id, error="bot was blocked by the user", now=now)


def _count(connection: sa.Connection, sql: str, **params: Any) -> int:
    statement = sa.text(sql).bindparams(
        *(sa.bindparam(name, value, type_=UTCDateTime()) for name, value in params.items())
    )
    return int(connection.execute(statement).scalar_one())


def expected_numbers(db: Database, now: datetime, zone: tzinfo = UTC) -> Expected:
    """The status page's numbers for ``now``, counted from the tables with plain SQL; the chart's days are
    the calendar days of ``zone``."""
    since = now - timedelta(hours=24)
    with db.engine.connect() as c:
        recent = "FROM version WHERE news AND first_seen_at >= :since"
        numbers: dict[str, Any] = {
            "new_24h": _count(c, f"SELECT count(DISTINCT paper_id) {recent} AND number = 1", since=since),
            "new_ai_24h": _count(
                c, f"SELECT count(DISTINCT paper_id) {recent} AND number = 1 AND ai_related", since=since
            ),
            "revised_24h": _count(c, f"SELECT count(DISTINCT paper_id) {recent} AND number > 1", since=since),
            "revised_ai_24h": _count(
                c, f"SELECT count(DISTINCT paper_id) {recent} AND number > 1 AND ai_related", since=since
            ),
            "community_24h": _count(
                c,
                "SELECT count(DISTINCT paper_id) FROM community_pick WHERE first_seen_at >= :since",
                since=since,
            ),
            "papers": _count(c, "SELECT count(*) FROM paper"),
            "ai_papers": _count(c, "SELECT count(DISTINCT paper_id) FROM version WHERE ai_related"),
            "revised_papers": _count(c, "SELECT count(DISTINCT paper_id) FROM version WHERE number > 1"),
            "community_papers": _count(c, "SELECT count(DISTINCT paper_id) FROM community_pick"),
            "pending_matches": _count(c, "SELECT count(*) FROM match WHERE digest_id IS NULL"),
            "queued_digests": _count(c, "SELECT count(*) FROM digest WHERE state IN ('pending', 'sending')"),
            "dead_digests": _count(c, "SELECT count(*) FROM digest WHERE state = 'dead'"),
            "paused_subscribers": _count(c, "SELECT count(*) FROM subscriber WHERE status = 'paused'"),
            "guides_24h": _count(
                c,
                "SELECT count(*) FROM (SELECT version_id, min(created_at) AS made FROM guide "
                "GROUP BY version_id) AS first_guides WHERE made >= :since",
                since=since,
            ),
            "versions_new": _count(c, "SELECT count(*) FROM version WHERE news AND number = 1"),
            "versions_revision": _count(c, "SELECT count(*) FROM version WHERE news AND number > 1"),
            "matches": _count(c, "SELECT count(*) FROM match"),
        }
        digests: dict[tuple[str, str], int] = {}
        for channel, state, count in c.execute(
            sa.text("SELECT channel, state, count(*) FROM digest GROUP BY channel, state")
        ):
            label = "queued" if state in ("pending", "sending") else state
            digests[(channel, label)] = digests.get((channel, label), 0) + int(count)
        per_day: dict[date, tuple[int, int, int]] = {}
        rows = c.execute(
            sa.text("SELECT first_seen_at, number, ai_related FROM version WHERE news").columns(
                sa.column("first_seen_at", UTCDateTime()), sa.column("number"), sa.column("ai_related")
            )
        )
        for seen, number, ai in rows:
            day = seen.astimezone(zone).date()
            new, revised, ai_count = per_day.get(day, (0, 0, 0))
            per_day[day] = (new + (number == 1), revised + (number > 1), ai_count + bool(ai))
    return Expected(**numbers, digests=digests, per_day=per_day)


def papers_with_category(db: Database, category: str) -> set[str]:
    """Papers one of whose stored versions lists ``category``, read in Python from the JSON lists."""
    with db.engine.connect() as c:
        rows = c.execute(sa.text("SELECT paper_id, categories FROM version"))
        return {
            pid
            for pid, categories in rows
            if category in (json.loads(categories) if isinstance(categories, str) else categories)
        }
