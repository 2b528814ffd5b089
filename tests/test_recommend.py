"""The recommendation pass and model training on SQLite and PostgreSQL, over the recorded arXiv day.

Readers like real papers of the day (galaxy astrophysics); the pass scores the rest. What is asserted
holds whatever the model's exact scores: who gets recommendations, what is never recommended, the cap per
digest, the cursor, and what two passes at once write. The pass's threshold is set from the model's own
scores (so that enough papers pass it to test a cap), except where the default is what is under test.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import DISLIKE, LIKE, Match, Version, utcnow
from core.papers import paper_records
from core.reasons import LIKED, SHARED, recommended_score
from core.taste import recommend_records, taste_records
from core.taste.model import (
    DEFAULT_THRESHOLD,
    Example,
    Signals,
    explain,
    explain_prepared,
    explain_version,
    prepare,
    score_many,
    train,
    vectorise,
)
from core.taste.model_format import TasteModel
from core.taste.recommend import preview, recommend_new
from core.taste.training import retrain
from core.taste.votes import cast_vote, undo_vote
from core.values import PaperIn
from tests.support.ledger import ScriptedNotifier
from tests.support.likes import LIKES, earlier, later, liked_papers
from tests.support.taste_day import day

MODEL_BYTES_LIMIT = 100_000


@dataclass
class Day:
    """A store with the earlier papers, subscribers made before the news, and the time of the news."""

    db: Database
    now: datetime

    def reader(self, address: str, *, likes: int = LIKES, recommend: int | None = 5, query: str = "") -> int:
        """A subscriber (with a follow when ``query``) who liked ``likes`` papers, its model trained."""
        if query:
            subscriber = follow(self.db, address, query).subscriber
        else:
            subscriber, _ = subscriber_records.ensure_subscriber(
                self.db, address, timezone="UTC", schedule="daily 08:00"
            )
        sid = subscriber.id
        assert sid is not None
        for paper in liked_papers(likes):
            taste_records.vote(self.db, sid, paper.arxiv_id, LIKE, now=self.now)
        retrain(self.db, sid, now=self.now)
        if recommend is not None:
            subscriber_records.update_subscriber(self.db, sid, recommend=recommend)
        return sid

    def news(self, papers: tuple[PaperIn, ...] | list[PaperIn], *, match: bool = True) -> None:
        """Store ``papers`` as news first seen at :attr:`now`, run them against the follows, fan out."""
        paper_records.save_versions(self.db, papers, now=self.now)
        if match:
            match_new(self.db, now=self.now)
            match_records.expand_matches(self.db, now=self.now)


def a_day(db: Database) -> Day:
    # The news arrives after the readers (and their follows) were made: a follow sees only later papers.
    now = utcnow() + timedelta(minutes=5)
    paper_records.save_versions(db, earlier(), now=now - timedelta(days=2))
    match_new(db, now=now - timedelta(days=2))
    return Day(db, now)


def rows_of(db: Database, subscriber_id: int) -> list[tuple[Match, Version]]:
    with db.session() as session:
        return list(
            session.exec(
                select(Match, Version)
                .join(Version, col(Version.id) == col(Match.version_id))
                .where(col(Match.subscriber_id) == subscriber_id)
            ).all()
        )


def newest_version(db: Database) -> int:
    with db.session() as session:
        return int(session.execute(sa.select(sa.func.max(Version.id))).scalar_one())


def recommendations(db: Database, subscriber_id: int) -> list[tuple[Match, Version]]:
    return [(m, v) for m, v in rows_of(db, subscriber_id) if recommended_score(m.reasons) is not None]


def scores(db: Database, subscriber_id: int, papers: Sequence[PaperIn]) -> dict[str, float]:
    """The subscriber's model's score of each paper."""
    row = taste_records.model_of(db, subscriber_id)
    assert row is not None
    found = score_many([TasteModel.from_bytes(row.data)], vectorise([(p.title, p.abstract) for p in papers]))
    return {p.arxiv_id: float(s) for p, s in zip(papers, found[0], strict=True)}


def above(db: Database, subscriber_id: int, papers: Sequence[PaperIn], threshold: float) -> set[str]:
    """The papers the subscriber's model scores at or above ``threshold``."""
    return {a for a, s in scores(db, subscriber_id, papers).items() if s >= threshold}


def nth_best(db: Database, subscriber_id: int, papers: Sequence[PaperIn], n: int) -> float:
    """A threshold that ``n`` of ``papers`` reach (ties aside)."""
    return sorted(scores(db, subscriber_id, papers).values(), reverse=True)[n - 1]


# -- training ---------------------------------------------------------------------------------------


def test_a_model_follows_every_vote_and_its_undo(db: Database) -> None:
    d = a_day(db)
    sid = d.reader("email:ada@example.org", likes=0, recommend=None)
    one, two, three = (p.arxiv_id for p in liked_papers(3))
    cast_vote(db, sid, one, LIKE, now=d.now)
    cast_vote(db, sid, two, LIKE, now=d.now)
    assert taste_records.model_of(db, sid) is None  # two liked papers are not a taste yet
    cast_vote(db, sid, three, LIKE, now=d.now)
    model = taste_records.model_of(db, sid)
    assert model is not None and model.positives == 3 and model.negatives == 0
    assert len(model.data) < MODEL_BYTES_LIMIT
    # A dislike retrains with it.
    cast_vote(db, sid, earlier()[1].arxiv_id, DISLIKE, now=d.now)
    again = taste_records.model_of(db, sid)
    assert again is not None and again.negatives == 1 and again.data != model.data
    # Undoing a like leaves two: the model goes with it.
    undo_vote(db, sid, three)
    assert taste_records.model_of(db, sid) is None


def test_a_vote_that_changes_nothing_does_not_retrain(db: Database) -> None:
    d = a_day(db)
    sid = d.reader("email:ada@example.org", likes=3, recommend=None)
    trained = taste_records.model_of(db, sid)
    assert trained is not None
    cast_vote(db, sid, liked_papers(1)[0].arxiv_id, LIKE, now=d.now + timedelta(hours=1))
    same = taste_records.model_of(db, sid)
    assert same is not None and same.trained_at == trained.trained_at


def test_no_model_without_anything_to_contrast_with(db: Database) -> None:
    # Three liked papers and nothing else stored this week: nothing says what the reader does not want.
    now = utcnow()
    paper_records.save_versions(db, liked_papers(3), now=now)
    subscriber, _ = subscriber_records.ensure_subscriber(
        db, "email:ada@example.org", timezone="UTC", schedule="daily 08:00"
    )
    assert subscriber.id is not None
    for paper in liked_papers(3):
        cast_vote(db, subscriber.id, paper.arxiv_id, LIKE, now=now)
    assert taste_records.model_of(db, subscriber.id) is None


def test_a_paper_prepared_once_is_explained_as_explain_does() -> None:
    # The pass prepares each picked paper once, from the row it scored, and explains it for all the models
    # that picked it at once: the same explanations as explain gives each.
    def model_of(category: str) -> TasteModel:
        liked = [p for p in earlier() if p.categories[0].startswith(category)][:8]
        made = train(
            Signals(
                [Example(p.title, p.abstract, p.arxiv_id) for p in liked],
                (),
                [Example(p.title, p.abstract, p.arxiv_id) for p in earlier()[100:200]],
            )
        )
        assert made is not None
        return made

    models = [model_of(category) for category in ("astro-ph.GA", "cs.CV", "quant-ph", "math.AP")]
    papers = later()[:60]
    rows = vectorise([(p.title, p.abstract) for p in papers])
    named = 0
    for index, paper in enumerate(papers):
        together = explain_version(models, prepare(paper.title, paper.abstract, rows[index]))
        assert together == [explain(model, paper.title, paper.abstract) for model in models]
        assert explain_prepared(models[0], prepare(paper.title, paper.abstract)) == together[0]
        named += sum(e.nearest is not None and bool(e.terms) for e in together)
    assert named > 60


# -- the pass ---------------------------------------------------------------------------------------


def test_the_pass_recommends_to_readers_who_asked_never_what_follows_brought_or_votes_named(
    db: Database,
) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org")
    threshold = nth_best(db, ada, later(), 20)
    liked_today = sorted(above(db, ada, later(), threshold))
    # Ada follows two of the papers her model likes: the exclusion is exercised, not vacuous.
    follow(db, "email:ada@example.org", f"id:{liked_today[0]} OR id:{liked_today[1]}")
    quiet = d.reader("email:quiet@example.org", recommend=None)  # a model, recommendations off
    novice = d.reader("email:novice@example.org", likes=2)  # on, but no model
    d.news(later())
    brought = {v.paper_id for _, v in rows_of(db, ada)}
    assert brought == set(liked_today[:2])
    # A vote on one of the day's papers the model likes keeps it out as well.
    voted = liked_today[2]
    taste_records.vote(db, ada, voted, DISLIKE, now=d.now)

    report = recommend_new(db, now=d.now, threshold=threshold)

    mine = recommendations(db, ada)
    assert len(mine) == 5 and report.written == len(mine)
    assert report.papers == len(later()) and report.models == 1
    assert recommendations(db, quiet) == [] and recommendations(db, novice) == []
    papers = {v.paper_id for _, v in mine}
    assert not papers & brought and voted not in papers
    assert papers <= {p.arxiv_id for p in later()}
    liked = {p.arxiv_id for p in liked_papers()}
    for match, version in mine:
        assert match.follow_ids == [] and not match.instant and match.digest_id is None
        (hit,) = match.reasons
        assert hit["recommended"] >= threshold
        fields = [r["field"] for r in hit["reasons"]]
        assert set(fields) <= {LIKED, SHARED} and SHARED in fields
        assert all(r["term"] in liked for r in hit["reasons"] if r["field"] == LIKED)
        assert version.number == 1
    # The best: no paper left out (and allowed) scores more than the weakest written.
    allowed = {a: x for a, x in scores(db, ada, later()).items() if a not in brought and a != voted}
    weakest = min(m.reasons[0]["recommended"] for m, _ in mine)
    assert sorted(allowed.values(), reverse=True)[4] == pytest.approx(weakest, abs=1e-3)
    assert recommend_records.cursor(db) == newest_version(db)
    assert recommend_new(db, now=d.now, threshold=threshold) == type(report)()  # nothing new
    assert len(recommendations(db, ada)) == len(mine)


def test_the_default_threshold_is_the_models(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", recommend=20)
    d.news(later())
    expected = above(db, ada, later(), DEFAULT_THRESHOLD)
    recommend_new(db, now=d.now)
    assert {v.paper_id for _, v in recommendations(db, ada)} == set(sorted(expected)[:20])


def test_a_digest_holds_at_most_n_recommendations(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", recommend=2)
    first, second, third = later()[:150], later()[150:300], later()[300:]
    threshold = min(nth_best(db, ada, part, 3) for part in (first, second, third))
    d.news(first)
    assert recommend_new(db, now=d.now, threshold=threshold).written == 2
    d.news(second)
    # Two are waiting for the digest: no room for more.
    assert recommend_new(db, now=d.now, threshold=threshold).written == 0
    digest = ledger_records.open_digest(db, ada, "email", instant_only=False, now=d.now)
    assert digest is not None
    d.news(third)
    # Planned but not sent yet: still waiting.
    assert recommend_new(db, now=d.now, threshold=threshold).written == 0
    assert len(recommendations(db, ada)) == 2


def test_room_comes_back_once_the_digest_is_sent(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", recommend=2)
    first, second = later()[:230], later()[230:]
    threshold = min(nth_best(db, ada, part, 3) for part in (first, second))
    d.news(first)
    assert recommend_new(db, now=d.now, threshold=threshold).written == 2
    digest = ledger_records.open_digest(db, ada, "email", instant_only=False, now=d.now)
    assert digest is not None
    ledger_records.finish_sent(db, digest, platform_id="x", parts=1, now=d.now)
    d.news(second)
    assert recommend_new(db, now=d.now, threshold=threshold).written == 2
    assert len(recommendations(db, ada)) == 4


def test_a_first_pass_starts_at_the_last_day(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", recommend=20)
    d.news(later())
    first_new = min(v.id or 0 for v in paper_records.versions_since(db, d.now - timedelta(hours=1)))
    batch = recommend_records.next_papers(db, now=d.now, limit=10_000)
    assert batch.after == 0 and batch.papers[0].version_id == first_new
    assert len(batch.papers) == len(later())
    threshold = nth_best(db, ada, later(), 10)
    assert recommend_new(db, now=d.now, threshold=threshold).written == 10
    assert {v.paper_id for _, v in recommendations(db, ada)} == above(db, ada, later(), threshold)
    # Earlier papers the model likes (other than the liked ones) were there to pick, and never scored.
    assert above(db, ada, earlier(), threshold) - {p.arxiv_id for p in liked_papers()}


def test_papers_not_yet_matched_wait_for_matching(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", query="ti:segmentation")
    d.news(later(), match=False)
    threshold = nth_best(db, ada, later(), 20)
    assert recommend_new(db, now=d.now, threshold=threshold).papers == 0
    assert recommendations(db, ada) == []
    match_new(db, now=d.now)
    # The pass fans the new query matches out itself before it reads what the follows brought.
    assert recommend_new(db, now=d.now, threshold=threshold).written == 5
    brought = {v.paper_id for m, v in rows_of(db, ada) if m.follow_ids}
    assert brought and not brought & {v.paper_id for _, v in recommendations(db, ada)}


def test_revisions_are_not_scored(db: Database) -> None:
    d = a_day(db)
    revisions = [p for p in day() if p.version > 1][:100]
    d.news([*later()[:100], *revisions])
    batch = recommend_records.next_papers(db, now=d.now, limit=10_000)
    assert len(batch.papers) == 100
    assert {p.arxiv_id for p in batch.papers} == {p.arxiv_id for p in later()[:100]}


def test_the_cursor_moves_one_batch_at_a_time(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", recommend=20)
    d.news(later())
    bob = d.reader("email:bob@example.org", recommend=20)
    threshold = nth_best(db, ada, later(), 10)
    report = recommend_new(db, now=d.now, papers_per_batch=100, models_per_slice=1, threshold=threshold)
    assert report.papers == len(later()) and report.models == 2 * 5
    assert report.written == len(recommendations(db, ada)) + len(recommendations(db, bob))
    assert len(recommendations(db, ada)) >= 10


def test_two_passes_over_the_same_papers_write_once(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", recommend=20)
    d.news(later())
    one = recommend_records.next_papers(db, now=d.now, limit=10_000)
    two = recommend_records.next_papers(db, now=d.now, limit=10_000)
    assert one == two
    from core.taste.recommend import _score_batch

    threshold = nth_best(db, ada, later(), 10)
    rows, _ = _score_batch(db, one, now=d.now, per_slice=100, threshold=threshold)
    assert rows
    assert recommend_records.write(db, one, rows, now=d.now) == len(rows)
    assert recommend_records.write(db, two, rows, now=d.now) is None  # the cursor had moved: nothing written
    assert len(recommendations(db, ada)) == len(rows)


def test_two_passes_at_once_do_not_duplicate(db: Database) -> None:
    d = a_day(db)
    readers = [d.reader(f"email:r{n}@example.org", recommend=3) for n in range(3)]
    d.news(later())
    threshold = min(nth_best(db, sid, later(), 3) for sid in readers)
    start = threading.Barrier(2)
    reports = []

    def run() -> None:
        start.wait()
        reports.append(recommend_new(db, now=d.now, threshold=threshold))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = [len(recommendations(db, sid)) for sid in readers]
    assert written == [3, 3, 3]
    assert sum(r.written for r in reports) == sum(written)
    with db.session() as session:
        pairs = session.execute(sa.select(col(Match.subscriber_id), col(Match.version_id))).all()
    assert len(pairs) == len(set(pairs))


def test_a_model_that_cannot_be_read_is_skipped(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org")
    broken = d.reader("email:broken@example.org")
    taste_records.save_model(db, broken, b"not a model", positives=3, negatives=0)
    d.news(later())
    report = recommend_new(db, now=d.now, threshold=nth_best(db, ada, later(), 5))
    assert report.models == 1 and recommendations(db, broken) == []
    assert len(recommendations(db, ada)) == 5


def test_paused_readers_get_no_recommendations(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org")
    subscriber_records.update_subscriber(db, ada, status="paused", status_reason="paused from the chat")
    d.news(later())
    assert recommend_new(db, now=d.now, threshold=-1e9).models == 0
    assert recommendations(db, ada) == []


# -- try recommended ----------------------------------------------------------------------------------


def test_preview_shows_what_the_week_would_have_brought(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("email:ada@example.org", query="ti:segmentation")
    d.news(later())
    threshold = nth_best(db, ada, later(), 20)
    shown = preview(db, ada, limit=4, now=d.now, threshold=threshold)
    assert shown is not None and len(shown) == 4
    brought = {v.paper_id for _, v in rows_of(db, ada)}
    liked = {p.arxiv_id for p in liked_papers()}
    assert not {r.arxiv_id for r in shown} & (brought | liked)
    assert [r.score for r in shown] == sorted((r.score for r in shown), reverse=True)
    assert all(r.score >= threshold and r.reasons for r in shown)
    # Nothing was written.
    assert recommendations(db, ada) == []
    novice = d.reader("email:novice@example.org", likes=2)
    assert preview(db, novice, now=d.now) is None


# -- wired into delivery ------------------------------------------------------------------------------


async def test_a_delivery_pass_sends_the_recommendations(db: Database) -> None:
    d = a_day(db)
    ada = d.reader("console:ada")
    d.news(later())
    # The production threshold: a model of nine likes finds a few of the day's papers above it.
    assert above(db, ada, later(), DEFAULT_THRESHOLD)
    notifier = ScriptedNotifier()
    reports = await send_due_digests(db, {"console": notifier}, Renderer(), force=True, now=d.now)
    mine = recommendations(db, ada)
    assert mine and [r.sent for r in reports] == [True]
    ((_, message),) = notifier.sent
    assert all(v.paper_id in message.text for _, v in mine)
    assert "which you liked" in message.text
