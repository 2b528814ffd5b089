"""A paper's revision history: which stored version comes before a revision, and what the revision changed.

The one owner of both. Digests, ``papertrail show``, the paper page, the Atom feeds and the AI guides' prompt
all ask here, so they name the same fields for the same pair of versions:

* :func:`what_changed` is the rule (pure): the names of :data:`CHANGE_NAMES` whose field differs.
* The version before a revision is the newest stored version of the same paper with a lower number (a gap,
  v1 then v3, compares v3 with v1). :func:`history` applies it to one paper's versions already in hand;
  :func:`changes_of` reads it for a batch of revisions in one statement per slice of papers, over the
  caller's connection (its transaction).

What counts as a change (docs/architecture.md, "What a revision changed"): text fields after Unicode NFC and
whitespace normalisation, a blank field the same as a missing one; categories as a set; authors as
normalised names in order. TeX is compared as written.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

import sqlalchemy as sa
from sqlmodel import col

from core.models import Version

# (Version attribute, the name a change is reported by), in the order changes are listed. The names are what
# digests translate (core.delivery.render.CHANGE_LABELS) and the webhook JSON carries, so they stay as
# published: "journal-ref" and "DOI", not the column names.
CHANGED_FIELDS: tuple[tuple[str, str], ...] = (
    ("title", "title"),
    ("authors", "authors"),
    ("abstract", "abstract"),
    ("categories", "categories"),
    ("comment", "comment"),
    ("journal_ref", "journal-ref"),
    ("doi", "DOI"),
    ("license", "license"),
)
CHANGE_NAMES: tuple[str, ...] = tuple(name for _, name in CHANGED_FIELDS)
# Values per IN list: PostgreSQL binds at most 65,535 values in one statement and SQLite 32,766.
_IN_SLICE = 5_000


class Tracked(Protocol):
    """The fields of a version that :func:`what_changed` compares (a ``Version``, a ``PaperIn``, a row)."""

    @property
    def title(self) -> str: ...
    @property
    def authors(self) -> Sequence[str]: ...
    @property
    def abstract(self) -> str: ...
    @property
    def categories(self) -> Sequence[str]: ...
    @property
    def comment(self) -> str | None: ...
    @property
    def journal_ref(self) -> str | None: ...
    @property
    def doi(self) -> str | None: ...
    @property
    def license(self) -> str | None: ...


class Numbered(Tracked, Protocol):
    """A stored version: its number and the tracked fields."""

    @property
    def number(self) -> int: ...


_V = TypeVar("_V", bound=Numbered)


def what_changed(before: Tracked, after: Tracked) -> tuple[str, ...]:
    """What ``after`` changed against ``before``: names of :data:`CHANGE_NAMES`, in that order."""
    return tuple(
        name
        for field, name in CHANGED_FIELDS
        if _normal(field, getattr(before, field)) != _normal(field, getattr(after, field))
    )


def _text(value: object) -> str:
    # Sources word the same text differently: RSS, OAI and the API break lines and indent differently, and
    # may hand over composed or decomposed accents. None and a blank string both mean "not given".
    return " ".join(unicodedata.normalize("NFC", str(value or "")).split())


def _normal(field: str, value: Any) -> object:
    if field == "categories":
        # A cross-list added is a change; the same categories listed in another order are not.
        return frozenset(_text(c) for c in value or ())
    if field == "authors":
        # The order of authors is part of the paper, so a reordering is a change.
        return tuple(_text(name) for name in value or ())
    return _text(value)


def version_before(stored: Mapping[int, _V], number: int) -> _V | None:
    """The version before ``number`` among one paper's ``stored`` versions (keyed by number): the newest
    lower one, or None."""
    lower = [n for n in stored if n < number]
    return stored[max(lower)] if lower else None


def history(versions: Iterable[_V]) -> list[tuple[_V, tuple[str, ...]]]:
    """One paper's stored versions, oldest first, each with what it changed against the version before it
    (nothing for the first)."""
    by_number = {v.number: v for v in versions}
    found: list[tuple[_V, tuple[str, ...]]] = []
    for number in sorted(by_number):
        before = version_before(by_number, number)
        found.append((by_number[number], what_changed(before, by_number[number]) if before else ()))
    return found


def changes_of(
    connection: sa.Connection, versions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], tuple[str, ...]]:
    """What each of ``versions`` (paper id, number) changed against the version before it, for a batch.

    One statement per slice of papers with a revision among them, reading only the compared columns; every
    key asked is in the answer, with nothing for a v1, for a revision with no earlier stored version and
    for a version that is not stored.
    """
    wanted = set(versions)
    highest: dict[str, int] = {}
    for paper, number in wanted:
        if number > 1:
            highest[paper] = max(highest.get(paper, 0), number)
    stored: defaultdict[str, dict[int, Numbered]] = defaultdict(dict)
    papers = sorted(highest)
    for start in range(0, len(papers), _IN_SLICE):
        rows = connection.execute(
            sa.select(
                col(Version.paper_id),
                col(Version.number),
                *(col(getattr(Version, field)) for field, _ in CHANGED_FIELDS),
            ).where(col(Version.paper_id).in_(papers[start : start + _IN_SLICE]))
        )
        for row in rows:
            # Versions after the highest one asked for are never the version before anything asked.
            if row.number <= highest[row.paper_id]:
                stored[row.paper_id][int(row.number)] = cast(Numbered, row)
    found: dict[tuple[str, int], tuple[str, ...]] = {}
    for paper, number in wanted:
        after = stored[paper].get(number) if paper in stored else None
        before = version_before(stored[paper], number) if after is not None else None
        found[(paper, number)] = () if before is None or after is None else what_changed(before, after)
    return found
