"""A reader's votes (👍 / 👎), the one step every channel calls: chat commands, the CLI, digest buttons and
the signed links in mails.

The votes feed the subscriber's learned model (``core.taste.model``); this module records and undoes them,
retrains the model after each change (``core.taste.training.retrain``: a model is current after every
vote) and says what happened, so each channel only words the outcome in its reader's language.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from core.db import Database
from core.models import Version
from core.taste import taste_records
from core.taste.taste_records import VoteView
from core.taste.training import retrain
from core.values import versioned_id

__all__ = [
    "VoteCounts",
    "VoteOutcome",
    "VoteState",
    "cast_vote",
    "liked_versions",
    "paper_name",
    "read_paper_ref",
    "undo_vote",
    "vote_counts",
    "votes",
    "votes_on",
]

# An arXiv id as a reader types it, with an optional version: 2306.03564, 2306.03564v2, hep-th/9901001v1.
_PAPER_REF = re.compile(
    r"(?P<id>\d{4}\.\d{4,5}|[a-z][a-z.-]*/\d{7})(?:v(?P<version>\d{1,3}))?", re.IGNORECASE
)


class VoteState(StrEnum):
    """What a vote (or its undo) did."""

    RECORDED = "recorded"  # a new vote
    CHANGED = "changed"  # replaced the other kind of vote on the same version
    UNCHANGED = "unchanged"  # the same vote was there already
    UNDONE = "undone"  # an undo removed the vote(s)
    NOT_VOTED = "not voted"  # an undo found nothing to remove
    UNKNOWN_PAPER = "unknown paper"  # the paper (or that version) is not stored


@dataclass(frozen=True, slots=True)
class VoteOutcome:
    """The result of :func:`cast_vote` or :func:`undo_vote`: the paper, its version, the vote and state."""

    arxiv_id: str
    version: int | None
    value: int
    state: VoteState


def paper_name(arxiv_id: str, version: int | None) -> str:
    """``2306.03564v2``, or the bare id when no version is named: :func:`read_paper_ref` read back."""
    return versioned_id(arxiv_id, version) if version else arxiv_id


def read_paper_ref(text: str) -> tuple[str, int | None] | None:
    """``2306.03564v2`` → ("2306.03564", 2); an arXiv URL or ``arXiv:`` prefix is accepted; None for text
    that is not an arXiv id."""
    cleaned = text.strip()
    cleaned = re.sub(r"^(?:https?://)?(?:www\.)?arxiv\.org/(?:abs|pdf)/", "", cleaned, flags=re.IGNORECASE)
    cleaned = re.sub(r"^arxiv:", "", cleaned, flags=re.IGNORECASE).removesuffix(".pdf")
    found = _PAPER_REF.fullmatch(cleaned)
    if found is None:
        return None
    version = found.group("version")
    return found.group("id").lower(), int(version) if version else None


def cast_vote(
    db: Database,
    subscriber_id: int,
    arxiv_id: str,
    value: int,
    *,
    version: int | None = None,
    now: datetime | None = None,
) -> VoteOutcome:
    """Record ``value`` (:data:`LIKE` / :data:`DISLIKE`) on a stored paper (its latest version unless
    ``version`` says which), then retrain the subscriber's model when the vote changed anything."""
    voted = taste_records.vote(db, subscriber_id, arxiv_id, value, version=version, now=now)
    if voted is None:
        return VoteOutcome(arxiv_id, version, value, VoteState.UNKNOWN_PAPER)
    if voted.previous is None:
        state = VoteState.RECORDED
    else:
        state = VoteState.UNCHANGED if voted.previous == value else VoteState.CHANGED
    if state is not VoteState.UNCHANGED:
        retrain(db, subscriber_id, now=now)
    return VoteOutcome(arxiv_id, voted.version, value, state)


def undo_vote(db: Database, subscriber_id: int, arxiv_id: str, *, version: int | None = None) -> VoteOutcome:
    """Remove the subscriber's vote on ``arxiv_id`` (all its versions unless ``version`` says which), then
    retrain the subscriber's model without it."""
    removed = taste_records.unvote(db, subscriber_id, arxiv_id, version=version)
    if removed:
        retrain(db, subscriber_id)
    return VoteOutcome(arxiv_id, version, 0, VoteState.UNDONE if removed else VoteState.NOT_VOTED)


def votes(db: Database, subscriber_id: int, *, limit: int = 200) -> list[VoteView]:
    """The subscriber's votes, newest first."""
    return taste_records.votes_of(db, subscriber_id, limit=limit)


@dataclass(frozen=True, slots=True)
class VoteCounts:
    """How many papers a reader liked and disliked, and how many their imported library seeds."""

    liked: int
    disliked: int
    seeds: int


def vote_counts(db: Database, subscriber_id: int) -> VoteCounts:
    """The subscriber's likes, dislikes and library seeds, counted."""
    return VoteCounts(*taste_records.vote_counts(db, subscriber_id))


def votes_on(db: Database, subscriber_id: int, version_ids: Sequence[int]) -> dict[int, int]:
    """The subscriber's vote on each of these versions that has one (version id -> +1 or -1)."""
    return taste_records.votes_on(db, subscriber_id, version_ids)


def liked_versions(db: Database, subscriber_id: int, *, limit: int) -> list[Version]:
    """The versions the subscriber liked, the most recent vote first, at most ``limit``."""
    return taste_records.liked_versions(db, subscriber_id, limit=limit)
