"""A reader's learned recommendations as a setting: on with up to N per digest, or off, and the
state the ``recommend`` command and ``papertrail recommend`` show. The chat and the command line word the
outcome; the rules are here, once.

Turning them on needs :data:`core.taste.model.MIN_POSITIVES` liked papers (votes and library entries):
fewer say too little about a reader's taste to recommend from.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.db import Database
from core.follows import subscriber_records
from core.models import Subscriber
from core.taste import taste_records

# Recommendations per digest: the default of ``recommend on`` and the most a reader may ask for (a digest
# shows at most PAPERTRAIL_DIGEST_MAX_ITEMS items in all; recommendations come after the follows' matches).
DEFAULT_COUNT = 5
MAX_COUNT = 20


class NotEnoughLikes(ValueError):
    """``recommend on`` before the reader liked enough papers; ``state`` says how many there are."""

    def __init__(self, state: TasteState) -> None:
        super().__init__(
            f"recommendations need at least {state.needed} liked papers; there are {state.positives}: "
            "like papers from the digests (or with `like ID`), or import a library"
        )
        self.state = state


@dataclass(frozen=True, slots=True)
class TasteState:
    """What a reader's recommendations stand on: the setting, the signals and whether a model exists."""

    recommend: int | None
    """Up to this many per digest; None: off."""
    likes: int
    dislikes: int
    seeds: int
    """Papers of an imported library, counted as liked."""
    model: bool
    """Whether a model is trained (it needs :attr:`needed` liked papers, and papers to contrast them with)."""
    needed: int
    """The liked papers a model needs."""

    @property
    def positives(self) -> int:
        """Liked papers: votes and library entries."""
        return self.likes + self.seeds

    @property
    def enough(self) -> bool:
        """True when there are enough liked papers to turn recommendations on."""
        return self.positives >= self.needed


def taste_state(db: Database, subscriber: Subscriber) -> TasteState:
    """The subscriber's recommendation setting, signals and model."""
    from core.taste.model import MIN_POSITIVES

    sid = subscriber.id or 0
    likes, dislikes, seeds = taste_records.vote_counts(db, sid)
    model = taste_records.model_of(db, sid) is not None
    return TasteState(subscriber.recommend, likes, dislikes, seeds, model, MIN_POSITIVES)


def check_count(count: int) -> int:
    """``count`` when it is a number of recommendations a reader may ask for; ValueError saying the range
    otherwise."""
    if not 1 <= count <= MAX_COUNT:
        raise ValueError(f"the number of recommendations per digest is 1 to {MAX_COUNT}, not {count}")
    return count


def turn_on(db: Database, subscriber: Subscriber, count: int = DEFAULT_COUNT) -> TasteState:
    """Recommendations on, up to ``count`` per digest; returns the new state.

    Raises ValueError for a count out of range and :class:`NotEnoughLikes` with too few liked papers. A
    model missing while the likes are enough (trained before a library import, say) is trained now.
    """
    from core.taste.training import retrain

    check_count(count)
    state = taste_state(db, subscriber)
    if not state.enough:
        raise NotEnoughLikes(state)
    if not state.model:
        retrain(db, subscriber.id or 0)
    updated = subscriber_records.update_subscriber(db, subscriber.id or 0, recommend=count)
    return taste_state(db, updated)


def turn_off(db: Database, subscriber: Subscriber) -> TasteState:
    """Recommendations off; the votes, the library and the model are kept for turning them on again."""
    updated = subscriber_records.update_subscriber(db, subscriber.id or 0, recommend=None)
    return taste_state(db, updated)


__all__ = [
    "DEFAULT_COUNT",
    "MAX_COUNT",
    "NotEnoughLikes",
    "TasteState",
    "check_count",
    "taste_state",
    "turn_off",
    "turn_on",
]
