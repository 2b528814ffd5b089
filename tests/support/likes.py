"""A reader's likes on the recorded day, earlier and later papers."""

from __future__ import annotations

from functools import cache

from core.values import PaperIn
from tests.support.taste_day import day

# Every galaxy-astrophysics paper (astro-ph.GA) among the earlier ones: a narrow interest, for which the
# model's default threshold finds a few of the later papers, as it is meant to (docs/recommendations.md).
LIKES = 9


@cache
def new_papers() -> tuple[PaperIn, ...]:
    """The day's v1 versions (new papers), in feed order."""
    return tuple(p for p in day() if p.version == 1)


@cache
def earlier() -> tuple[PaperIn, ...]:
    """Half of the day's new papers, stored as if seen two days before: the liked ones come from these."""
    return new_papers()[::2]


@cache
def later() -> tuple[PaperIn, ...]:
    """The other half, the news the pass scores."""
    return new_papers()[1::2]


def liked_papers(count: int = LIKES) -> list[PaperIn]:
    """Galaxy-astrophysics papers among the earlier ones."""
    found = [p for p in earlier() if p.categories[0] == "astro-ph.GA"][:count]
    assert len(found) == count
    return found
