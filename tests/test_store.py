"""The store on real SQLite and real PostgreSQL: upserts, the ledger, timestamps, migrations."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic import command
from sqlmodel import select

import core.papers.paper_records
from core.db import Database
from core.db_migrate import alembic_config
from core.follows import match_records, subscriber_records
from core.follows.match_records import QueryHit
from core.ledger import ledger_records
from core.models import Follow, Paper, RunState, SourceRun, Version
from core.overview import dashboard_records
from core.papers import paper_records, run_records
from core.papers.paper_records import Novelty
from core.reasons import CATEGORY, Reason
from core.values import AnnounceType, PaperIn, ResponseValidator

NOW = datetime(2024, 11, 28, 6, 0, tzinfo=UTC)


def paper(arxiv_id: str, version: int = 1, categories: tuple[str, ...] = ("cs.DC",), **kw: object) -> PaperIn:
    return PaperIn(
        arxiv_id=arxiv_id,
        version=version,
        title=f"Title of {arxiv_id}",
        abstract="An abstract.",
        authors=("Zeng Li", "Benjamin Rémy"),
        categories=categories,
        announce_type=AnnounceType.REPLACE if version > 1 else AnnounceType.NEW,
        announced_at=NOW - timedelta(hours=1),
        **kw,  # type: ignore[arg-type]
    )


def test_schema_matches_models(db: Database) -> None:
    config = alembic_config(db.engine)
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.check(config)  # raises if the models drifted from the migrations


def test_save_versions_is_idempotent_and_counts_revisions(db: Database) -> None:
    batch = [paper("2411.00001"), paper("2411.00002", categories=("cs.LG",)), paper("1401.3665", 4)]
    first = paper_records.save_versions(db, batch, now=NOW)
    assert (first.new_papers, first.revisions, first.duplicates) == (2, 1, 0)
    assert len(first.new_version_ids) == 3
    again = paper_records.save_versions(db, batch, now=NOW + timedelta(hours=1))
    assert (again.new_papers, again.revisions, again.duplicates) == (0, 0, 3)
    assert again.new_version_ids == []
    # The same version twice in one batch (a cross-list) is stored once.
    twice = paper_records.save_versions(
        db, [paper("2411.00003"), paper("2411.00003", categories=("math.CO",))], now=NOW
    )
    assert (twice.new_papers, twice.duplicates) == (1, 1)


def test_revision_updates_latest_version_and_keeps_history(db: Database) -> None:
    paper_records.save_versions(db, [paper("2411.00001")], now=NOW)
    paper_records.save_versions(
        db, [paper("2411.00001", 2, comment="v2: fixed proofs")], now=NOW + timedelta(days=1)
    )
    with db.session() as session:
        rows = session.exec(select(Version).where(Version.paper_id == "2411.00001")).all()
    assert sorted(v.number for v in rows) == [1, 2]
    assert next(v for v in rows if v.number == 2).comment == "v2: fixed proofs"


def test_timestamps_come_back_aware_utc(db: Database) -> None:
    paper_records.save_versions(db, [paper("2411.00001")], now=NOW)
    with db.session() as session:
        version = session.exec(select(Version)).one()
    assert version.first_seen_at == NOW
    assert version.first_seen_at.tzinfo is not None
    assert version.announced_at == NOW - timedelta(hours=1)
    assert version.authors == ["Zeng Li", "Benjamin Rémy"]
    assert version.ai_related is False


def test_naive_datetime_is_refused(db: Database) -> None:
    with pytest.raises(Exception, match="naive datetime"):
        paper_records.save_versions(db, [paper("2411.00001")], now=datetime(2024, 1, 1))


def test_failed_batch_stores_nothing(db: Database) -> None:
    bad = paper("2411.00009")
    object.__setattr__(bad, "title", None)  # NOT NULL violation half-way through the batch
    with pytest.raises(Exception):  # noqa: B017  (driver-specific IntegrityError)
        paper_records.save_versions(db, [paper("2411.00001"), bad], now=NOW)
    with db.session() as session:
        assert session.exec(select(Version)).all() == []


def test_validator_saved_with_batch(db: Database) -> None:
    url = "http://127.0.0.1/rss/cs"
    paper_records.save_versions(
        db, [paper("2411.00001")], now=NOW, validator=ResponseValidator(url=url, etag='"abc"')
    )
    found = run_records.validator_for(db, url)
    assert found is not None and found.etag == '"abc"'


def test_follows_matches_digests_ledger(db: Database) -> None:
    subscriber, created = subscriber_records.ensure_subscriber(
        db, "email:ada@example.org", timezone="UTC", schedule="daily 08:00"
    )
    assert created and subscriber.id is not None
    again, created_again = subscriber_records.ensure_subscriber(
        db, "email:ada@example.org", timezone="UTC", schedule="instant"
    )
    assert not created_again and again.id == subscriber.id
    follow, added = subscriber_records.add_follow(db, subscriber.id, "cat:cs.DC", "cat:cs.dc")
    _, added_twice = subscriber_records.add_follow(db, subscriber.id, "cat:CS.DC", "cat:cs.dc")
    assert (added, added_twice) == ("added", "unchanged")
    same, updated = subscriber_records.add_follow(
        db, subscriber.id, "cat:cs.DC", "cat:cs.dc", revisions=False, instant=True
    )
    assert updated == "updated" and same.id == follow.id and (same.revisions, same.instant) == (False, True)
    subscriber_records.add_follow(db, subscriber.id, "cat:cs.DC", "cat:cs.dc")
    assert [f.query for f in subscriber_records.follows_of(db, subscriber.id)] == ["cat:cs.DC"]
    assert [f.id for f in subscriber_records.active_follows(db)] == [follow.id]

    saved = paper_records.save_versions(db, [paper("2411.00001"), paper("1401.3665", 4)], now=NOW)
    assert len(match_records.unmatched_versions(db)) == 2
    with db.session() as session:  # made before the versions arrived, so it sees them
        session.execute(sa.update(Follow).values(created_at=NOW - timedelta(days=1)))
    why = (Reason(CATEGORY, "cs.DC"),)
    hits = [QueryHit(vid, "cat:cs.dc", why) for vid in saved.new_version_ids]
    assert match_records.record_query_matches(db, saved.new_version_ids, hits, now=NOW) == 2
    assert match_records.unmatched_versions(db) == []
    assert (
        match_records.expand_matches(db, now=NOW) == 2
    )  # fanned out to the follower: one Match row per version
    assert match_records.expand_matches(db, now=NOW) == 0

    assert [s.id for s in ledger_records.subscribers_to_plan(db, NOW)] == [subscriber.id]
    pending = ledger_records.pending_matches(db, subscriber.id)
    assert [(p.item.arxiv_id, p.item.version) for p in pending] == [("2411.00001", 1), ("1401.3665", 4)]
    assert pending[0].item.reasons == ("category cs.DC",)
    [stored] = pending[0].item.reasons
    assert (stored.field, stored.term, stored.follow) == (CATEGORY, "cs.DC", follow.id)

    digest_id = ledger_records.open_digest(db, subscriber.id, "email", instant_only=False, now=NOW)
    assert digest_id is not None
    assert (
        ledger_records.open_digest(db, subscriber.id, "email", instant_only=False, now=NOW) is None
    )  # one open digest
    assert ledger_records.subscribers_to_plan(db, NOW) == []
    lease = timedelta(minutes=5)
    (claimed,) = ledger_records.claim_digests(db, NOW, "w1", limit=10, lease=lease)
    assert (claimed.digest_id, claimed.attempts, claimed.address) == (digest_id, 1, "email:ada@example.org")
    assert ledger_records.claim_digests(db, NOW, "w2", limit=10, lease=lease) == []  # held by w1
    ledger_records.finish_retry(
        db, digest_id, error="boom", retry_at=NOW + lease, parts_sent=0, dead=False, now=NOW
    )
    assert ledger_records.claim_digests(db, NOW, "w2", limit=10, lease=lease) == []  # backing off
    assert len(pending) == len(ledger_records.pending_matches(db, subscriber.id))  # still unsent
    (retried,) = ledger_records.claim_digests(db, NOW + timedelta(minutes=6), "w2", limit=10, lease=lease)
    assert retried.attempts == 2
    # w2 dies holding it; once the lease runs out another worker takes it over.
    (taken_over,) = ledger_records.claim_digests(db, NOW + timedelta(minutes=12), "w3", limit=10, lease=lease)
    assert taken_over.digest_id == digest_id

    ledger_records.finish_sent(db, digest_id, platform_id="<id@x>", parts=1, now=NOW)
    assert ledger_records.pending_matches(db, subscriber.id) == []
    (digest,) = ledger_records.digests_of(db, subscriber.id)
    assert (digest.state, digest.item_count, digest.attempts) == ("sent", 2, 3)

    # The same version matched again never reaches the subscriber twice: the ledger keeps one row.
    match_records.record_query_matches(db, [], hits[:1], now=NOW)
    assert match_records.expand_matches(db, now=NOW) == 0
    assert ledger_records.pending_matches(db, subscriber.id) == []

    subscriber_records.remove_follow(db, follow.id or 0)
    with db.session() as session:
        assert session.exec(select(Follow)).all() == []


def test_status_counts_last_24_hours_and_sources(db: Database) -> None:
    paper_records.save_versions(
        db,
        [paper("2411.00001", categories=("cs.LG",)), paper("2411.00002"), paper("1401.3665", 2)],
        now=NOW,
    )
    paper_records.save_versions(db, [paper("2301.00001")], now=NOW - timedelta(days=3))
    run_id = run_records.start_run(db, "arxiv-rss", now=NOW)
    run_records.finish_run(db, run_id, RunState.OK, now=NOW, new_papers=2, revisions=1, fetched=3)
    failed = run_records.start_run(db, "arxiv-rss", now=NOW + timedelta(minutes=30))
    run_records.finish_run(db, failed, RunState.ERROR, now=NOW + timedelta(minutes=30), error="HTTP 503")
    summary = dashboard_records.status(db, NOW + timedelta(hours=1), sources=["arxiv-rss", "hf-daily"])
    assert (summary.papers, summary.versions) == (4, 4)
    assert (summary.new_papers_24h, summary.revisions_24h, summary.ai_related_24h) == (2, 1, 1)
    rss, hf = summary.sources
    assert rss.last_state == "error" and rss.last_error == "HTTP 503"
    assert rss.last_new_version == NOW
    assert hf.last_state == "never run"
    with db.session() as session:
        assert len(session.exec(select(SourceRun)).all()) == 2


def test_history_is_stored_but_never_news(db: Database) -> None:
    saved = paper_records.save_versions(
        db, [paper("2301.00001"), paper("2301.00002", 3)], now=NOW, novelty=Novelty.HISTORY
    )
    assert (saved.new_papers, saved.revisions, saved.history, saved.new_version_ids) == (0, 0, 2, [])
    assert match_records.unmatched_versions(db) == []  # history is never matched
    summary = dashboard_records.status(db, NOW + timedelta(hours=1))
    assert (summary.versions, summary.new_papers_24h, summary.revisions_24h) == (2, 0, 0)


def test_gap_fill_news_only_after_the_newest_announcement_seen(db: Database) -> None:
    # With nothing stored there is no gap: everything a gap fill finds is history.
    first = paper_records.save_versions(db, [paper("2411.00001")], now=NOW, novelty=Novelty.GAP)
    assert first.history == 1
    seen = paper_records.save_versions(db, [paper("2411.00002")], now=NOW)  # announced NOW - 1 h, news
    assert seen.new_papers == 1
    older = PaperIn("2411.00003", 1, "t", "a", (), ("cs.DC",), announced_at=NOW - timedelta(days=2))
    newer = PaperIn("2411.00004", 2, "t", "a", (), ("cs.DC",), announced_at=NOW + timedelta(hours=5))
    gap = paper_records.save_versions(db, [older, newer, paper("2411.00002")], now=NOW, novelty=Novelty.GAP)
    assert (gap.history, gap.revisions, gap.duplicates) == (1, 1, 1)
    assert [v.paper_id for v in match_records.unmatched_versions(db)] == ["2411.00002", "2411.00004"]


def test_community_picks_attach_to_the_paper(db: Database) -> None:
    from datetime import date

    from core.values import CommunityPick

    paper_records.save_versions(db, [paper("2411.00001")], now=NOW)
    day = date(2024, 11, 28)
    known = CommunityPick("2411.00001", day, "Title", "Summary", ("A B",), upvotes=3, keywords=("llm",))
    unknown = CommunityPick("2411.99999", day, "Only on HF", "S", ("C D",), upvotes=7)
    assert paper_records.save_picks(db, [known, unknown], now=NOW) == (2, 1)
    # Seen again the same day: the signals move, nothing new is created.
    assert paper_records.save_picks(
        db, [CommunityPick("2411.00001", day, "Title", "Summary", (), upvotes=9)], now=NOW
    ) == (0, 0)
    assert [p.upvotes for p in paper_records.picks_of(db, "2411.00001")] == [9]
    assert paper_records.papers_without_versions(db) == ["2411.99999"]
    # Its arXiv metadata arrives later: the stub becomes a normal paper, not a second one.
    paper_records.save_versions(db, [paper("2411.99999", 2)], now=NOW)
    assert paper_records.papers_without_versions(db) == []
    summary = dashboard_records.status(db, NOW + timedelta(hours=1))
    assert summary.community_24h == 2 and summary.papers == 2


# save_versions writes SAVE_BATCH versions at a time, reading its input once: the same counts,
# rows and news as one batch, in one transaction.


@pytest.mark.parametrize("batch", [1, 2, 3, 5000])
def test_batches_store_what_one_batch_stores(
    db: Database, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    paper_records.save_versions(db, [paper("2411.00001")], now=NOW)
    monkeypatch.setattr(core.papers.paper_records, "SAVE_BATCH", batch)
    papers = [
        paper("2411.00002"),
        paper("2411.00003", 3),
        paper("2411.00001", 2),  # raises a stored paper's latest version
        paper("2411.00002", categories=("cs.LG",)),  # the same version again: the first one counts
        paper("2411.00003"),  # an older version of a paper an earlier batch wrote
        paper("2411.00004", 2),
        paper("2411.00003", 2),
        paper("2411.00001"),  # stored before
    ]
    saved = paper_records.save_versions(db, iter(papers), now=NOW)  # any iterable, read once
    assert (saved.new_papers, saved.revisions, saved.duplicates, saved.history) == (2, 4, 2, 0)
    with db.session() as session:
        by_id = {v.id: (v.paper_id, v.number) for v in session.exec(select(Version))}
        latest = {row.id: row.latest_version for row in session.exec(select(Paper))}
        categories = session.exec(select(Version.categories).where(Version.paper_id == "2411.00002")).one()
    assert [by_id[i] for i in saved.new_version_ids] == [
        ("2411.00002", 1),
        ("2411.00003", 3),
        ("2411.00001", 2),
        ("2411.00003", 1),
        ("2411.00004", 2),
        ("2411.00003", 2),
    ]
    assert latest == {"2411.00001": 2, "2411.00002": 1, "2411.00003": 3, "2411.00004": 2}
    assert categories == ["cs.DC"]


def test_a_gap_is_the_one_before_the_call(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """One version per batch: the news an earlier batch writes must not move the gap for later ones."""
    monkeypatch.setattr(core.papers.paper_records, "SAVE_BATCH", 1)
    paper_records.save_versions(db, [paper("2411.00001")], now=NOW)  # news announced NOW - 1 h
    later = PaperIn("2411.00002", 1, "t", "a", (), ("cs.DC",), announced_at=NOW + timedelta(hours=5))
    between = PaperIn("2411.00003", 1, "t", "a", (), ("cs.DC",), announced_at=NOW + timedelta(hours=1))
    gap = paper_records.save_versions(db, [later, between], now=NOW, novelty=Novelty.GAP)
    assert (gap.new_papers, gap.history) == (2, 0)


def test_input_failing_after_some_batches_stores_nothing(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core.papers.paper_records, "SAVE_BATCH", 2)
    url = "http://127.0.0.1/rss/cs"

    def papers() -> Iterator[PaperIn]:
        for number in range(1, 6):
            yield paper(f"2411.0000{number}")
        raise RuntimeError("the spool could not be read back")

    with pytest.raises(RuntimeError, match="spool"):
        paper_records.save_versions(db, papers(), now=NOW, validator=ResponseValidator(url=url, etag='"abc"'))
    with db.session() as session:
        assert session.exec(select(Version)).all() == []
        assert session.exec(select(Paper)).all() == []
    assert run_records.validator_for(db, url) is None
