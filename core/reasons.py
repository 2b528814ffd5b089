"""Why a paper matched, as data: which field, which term or name, which follow, which newsletter.

A :class:`Reason` is made where a query decides (``core.follows.query``), carried through the matcher, stored
as
JSON objects (:meth:`Reason.as_data`; in ``match.reasons`` grouped by the follow that gave them, see
:func:`reasons_from_data`) and worded only when a digest is rendered in its reader's language
(``core.delivery.render.reason_text``). Ranking and a newsletter copy's origin read the fields,
never the words.

A Reason is also a ``str``: its English wording (``title: "policy lag"``, ``author Zeng Li``). The matcher
treats reasons as opaque hashable values and dedupes them by that text, and the CLI and logs print it; the
structured fields ride along without costing the hot loop a second representation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

TITLE: Final = "title"
ABSTRACT: Final = "abstract"
AUTHOR: Final = "author"
CATEGORY: Final = "category"
PAPER: Final = "paper"
NEWSLETTER: Final = "newsletter"
"""A member's copy of a newsletter item that carried no reason of its own: the term is the name."""
LIKED: Final = "liked"
"""A recommendation: the term is the arXiv id of the liked paper it is closest to."""
SHARED: Final = "shared"
"""A recommendation: the term is one of the strongest terms it shares with the papers the reader liked."""

# The English wording of each field, the form ``str(reason)`` takes (and the logs and the CLI show).
_ENGLISH: Final = {
    TITLE: "title: {}",
    ABSTRACT: "abstract: {}",
    AUTHOR: "author {}",
    CATEGORY: "category {}",
    PAPER: "paper {}",
    NEWSLETTER: "newsletter {}",
    LIKED: "close to {}, which you liked",
    SHARED: "shares {}",
}
FIELDS: Final = frozenset(_ENGLISH)


class Reason(str):
    """One reason a version matched: ``field`` (see :data:`FIELDS`) and ``term`` (the matched value).

    ``follow`` is the follow that gave it, once the match is stored; ``newsletter`` the newsletter a
    member's copy came from. Equal to, and hashed like, its English wording.
    """

    field: str
    term: str
    follow: int | None
    newsletter: str | None

    def __new__(
        cls, field: str, term: str, *, follow: int | None = None, newsletter: str | None = None
    ) -> Reason:
        """A reason of ``field`` for ``term``; ValueError for a field that is not one of :data:`FIELDS`."""
        try:
            text = _ENGLISH[field].format(term)
        except KeyError:
            raise ValueError(f"unknown reason field {field!r}; expected one of {sorted(FIELDS)}") from None
        if newsletter is not None and field != NEWSLETTER:
            text = f"newsletter {newsletter}: {text}"
        self = super().__new__(cls, text)
        self.field = field
        self.term = term
        self.follow = follow
        self.newsletter = newsletter if field != NEWSLETTER else term
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        # str's own pickling would rebuild a plain str and lose the fields.
        return (_rebuild, (self.field, self.term, self.follow, self.newsletter))

    def as_data(self) -> dict[str, Any]:
        """The JSON object a stored hit lists this reason as: ``field`` and ``term`` (the follow and the
        newsletter belong to the hit, see :func:`reasons_from_data`)."""
        return {"field": self.field, "term": self.term}


def _rebuild(field: str, term: str, follow: int | None, newsletter: str | None) -> Reason:
    return Reason(field, term, follow=follow, newsletter=newsletter)


def reasons_from_data(stored: Iterable[Mapping[str, Any]] | None) -> tuple[Reason, ...]:
    """The reasons of a stored ``match.reasons`` list, in follow order, each distinct reason once.

    ``stored`` holds one hit per follow that matched, ``{"follow": id, "reasons": [{"field", "term"}, …]}``,
    or for a member's copy of a newsletter item ``{"newsletter": name, "reasons": […]}``; a copy whose
    item had no reason of its own reads as the newsletter itself.
    """
    hits = sorted(stored or (), key=lambda hit: (hit.get("follow") is None, hit.get("follow") or 0))
    found: dict[str, Reason] = {}
    for hit in hits:
        follow, newsletter = hit.get("follow"), hit.get("newsletter")
        listed = hit.get("reasons") or ()
        if not listed and newsletter is not None:
            found.setdefault(f"newsletter {newsletter}", Reason(NEWSLETTER, str(newsletter)))
        for item in listed:
            made = Reason(str(item["field"]), str(item["term"]), follow=follow, newsletter=newsletter)
            found.setdefault(made, made)
    return tuple(found.values())


def hit_data(
    reasons: Iterable[Reason], *, follow: int | None = None, newsletter: str | None = None
) -> dict[str, Any]:
    """One stored hit: the reasons one follow (or one newsletter's copy) gave for one version."""
    data: dict[str, Any] = {"reasons": [reason.as_data() for reason in reasons]}
    if follow is not None:
        data["follow"] = follow
    if newsletter is not None:
        data["newsletter"] = newsletter
    return data


_interned: dict[tuple[str, str], Reason] = {}


def reason(field: str, term: str) -> Reason:
    """The one shared :class:`Reason` of ``field`` and ``term`` (no follow): a query leaf makes the same
    few reasons for paper after paper, so they are built once."""
    key = (field, term)
    found = _interned.get(key)
    if found is None:
        if len(_interned) > 100_000:  # bounded: terms come from papers (categories) and queries
            _interned.clear()
        found = _interned[key] = Reason(field, term)
    return found


def recommendation_hit(score: float, reasons: Iterable[Reason]) -> dict[str, Any]:
    """The stored hit of a learned recommendation: the model's score and its reasons
    (:data:`LIKED`, :data:`SHARED`). Its Match row has no follow: ``follow_ids`` is empty."""
    return {"recommended": round(float(score), 4), "reasons": [reason.as_data() for reason in reasons]}


def recommended_score(stored: Iterable[Mapping[str, Any]] | None) -> float | None:
    """The score of a stored ``match.reasons`` list that a recommendation made, None for any other row.

    A row is a recommendation only when no follow and no newsletter gave it a hit: should a follow's hit
    ever share a row with a recommendation's, the follow wins and the item stays among the follows' matches
    (a recommendation must never move a follow's match out of its section or past the digest's cap).
    """
    hits = list(stored or ())
    if any(hit.get("follow") is not None or hit.get("newsletter") is not None for hit in hits):
        return None
    for hit in hits:
        score = hit.get("recommended")
        if score is not None:
            return float(score)
    return None
