"""Votes, library seeds and models of learned follows, on SQLite and PostgreSQL, over recorded papers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.db import Database
from core.follows import subscriber_records
from core.models import DISLIKE, LIKE
from core.papers import paper_records
from core.taste import taste_records
from core.taste.taste_records import SeedIn
from core.taste.votes import VoteState, cast_vote, read_paper_ref, undo_vote, votes
from tests.support.taste_day import day

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def _stored(db: Database) -> int:
    paper_records.save_versions(db, day()[:300], now=NOW - timedelta(hours=1))
    subscriber, _ = subscriber_records.ensure_subscriber(
        db, "email:ada@example.org", timezone="UTC", schedule="daily 08:00"
    )
    assert subscriber.id is not None
    return subscriber.id


def test_a_vote_is_kept_per_version_replaced_and_undone(db: Database) -> None:
    sid = _stored(db)
    paper = day()[0]
    voted = taste_records.vote(db, sid, paper.arxiv_id, LIKE, now=NOW)
    assert voted is not None and voted.previous is None and voted.version == paper.version
    again = taste_records.vote(db, sid, paper.arxiv_id, DISLIKE, now=NOW)
    assert again is not None and again.previous == LIKE
    assert [(v.arxiv_id, v.value) for v in taste_records.votes_of(db, sid)] == [(paper.arxiv_id, DISLIKE)]
    assert taste_records.votes_on(db, sid, [voted.version_id]) == {voted.version_id: DISLIKE}
    assert taste_records.unvote(db, sid, paper.arxiv_id) == 1
    assert taste_records.votes_of(db, sid) == []
    assert taste_records.unvote(db, sid, paper.arxiv_id) == 0


def test_a_vote_on_a_paper_not_stored_is_refused(db: Database) -> None:
    sid = _stored(db)
    assert taste_records.vote(db, sid, "2999.99999", LIKE) is None
    assert taste_records.vote(db, sid, day()[0].arxiv_id, LIKE, version=99) is None
    with pytest.raises(ValueError, match="vote is 1 or -1"):
        taste_records.vote(db, sid, day()[0].arxiv_id, 2)


def test_training_texts_hold_likes_seeds_dislikes_and_a_sample_of_the_week(db: Database) -> None:
    sid = _stored(db)
    liked, disliked, seeded = day()[1], day()[2], day()[3]
    taste_records.vote(db, sid, liked.arxiv_id, LIKE, now=NOW)
    taste_records.vote(db, sid, disliked.arxiv_id, DISLIKE, now=NOW)
    seed_version = paper_records.versions_of(db, seeded.arxiv_id)[0].id
    seeds = [
        SeedIn(seeded.arxiv_id, seed_version),
        SeedIn("title:a paper known by its text", None, "A title", "An abstract"),
    ]
    assert taste_records.add_seeds(db, sid, seeds, now=NOW) == 2
    assert taste_records.add_seeds(db, sid, seeds, now=NOW) == 0  # a re-import adds nothing
    texts = taste_records.training_texts(db, sid, implicit=50, now=NOW)
    assert {t.arxiv_id for t in texts.positives} == {liked.arxiv_id, seeded.arxiv_id, None}
    assert any(t.title == seeded.title for t in texts.positives)
    assert [t.arxiv_id for t in texts.negatives] == [disliked.arxiv_id]
    # Fifty drawn from the week's 300, less those that are liked, seeded or disliked.
    assert 47 <= len(texts.implicit) <= 50
    assert not {t.arxiv_id for t in texts.implicit} & {liked.arxiv_id, disliked.arxiv_id, seeded.arxiv_id}
    assert taste_records.vote_counts(db, sid) == (1, 1, 2)


def test_a_model_is_saved_replaced_and_dropped(db: Database) -> None:
    sid = _stored(db)
    taste_records.save_model(db, sid, b"one", positives=3, negatives=1, now=NOW)
    taste_records.save_model(db, sid, b"two", positives=4, negatives=1, now=NOW)
    row = taste_records.model_of(db, sid)
    assert row is not None and row.data == b"two" and row.positives == 4
    taste_records.drop_model(db, sid)
    assert taste_records.model_of(db, sid) is None


def test_cast_vote_says_what_it_did_and_undo_removes_it(db: Database) -> None:
    sid = _stored(db)
    paper = day()[5].arxiv_id
    assert cast_vote(db, sid, paper, LIKE).state is VoteState.RECORDED
    assert cast_vote(db, sid, paper, LIKE).state is VoteState.UNCHANGED
    assert cast_vote(db, sid, paper, DISLIKE).state is VoteState.CHANGED
    assert cast_vote(db, sid, "2999.99999", LIKE).state is VoteState.UNKNOWN_PAPER
    assert [v.value for v in votes(db, sid)] == [DISLIKE]
    assert undo_vote(db, sid, paper).state is VoteState.UNDONE
    assert undo_vote(db, sid, paper).state is VoteState.NOT_VOTED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2306.03564", ("2306.03564", None)),
        ("2306.03564v2", ("2306.03564", 2)),
        ("https://arxiv.org/abs/2306.03564v3", ("2306.03564", 3)),
        ("http://arxiv.org/pdf/2306.03564v1.pdf", ("2306.03564", 1)),
        ("arXiv:hep-th/9901001v1", ("hep-th/9901001", 1)),
        ("2306", None),
        ("like", None),
    ],
)
def test_paper_references_as_readers_type_them(text: str, expected: tuple[str, int | None] | None) -> None:
    assert read_paper_ref(text) == expected
