"""The follow language's values: the paper side (:class:`PaperText`) and the query tree (:class:`Node`).

A paper is folded and split once into a :class:`PaperText`; every leaf of a parsed follow (:class:`Words`,
:class:`Author`, :class:`Category`, :class:`PaperId`) and every operator (:class:`And`, :class:`Or`,
:class:`Not`) is a frozen dataclass that renders its canonical text, evaluates against a ``PaperText`` and
names the index keys it needs (:meth:`Node.anchors`, used by ``core.follows.match``).
``core.follows.query_parse`` builds
these trees from text and ``core.follows.query`` wraps one in a :class:`core.follows.query.Query`; import
them from
``core.follows.query``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from core.follows.normalise import NameKey, name_key, name_matches, query_name_keys, strip_tex, term, terms
from core.follows.taxonomy import archive_of, canonical_category, spell
from core.reasons import ABSTRACT, AUTHOR, CATEGORY, PAPER, TITLE, Reason, reason
from core.values import PaperIn

Key = tuple[str, str]
"""An index key: ("w", word), ("cat", "cs.dc"), ("arch", "cs"), ("au", last surname word), ("id", id)."""

# ---------------------------------------------------------------------------------------------------------
# The paper side: tokenised once, shared by every query evaluated against it.


@dataclass(frozen=True, slots=True, eq=False)
class PaperText:
    """A paper's searchable text, folded and split once so that each query only does lookups."""

    arxiv_id: str
    title_words: tuple[str, ...]
    """The title's match terms (``core.follows.normalise.terms`` after ``strip_tex``), in order."""
    abstract_words: tuple[str, ...]
    """The abstract's match terms, in order."""
    title_positions: Mapping[str, tuple[int, ...]]
    """Term -> its positions in ``title_words``."""
    abstract_positions: Mapping[str, tuple[int, ...]]
    categories: tuple[str, ...]
    """As the source gave them (for reasons), parallel to ``folded_categories`` and ``archives``."""
    folded_categories: tuple[str, ...]
    """Lower case, aliases replaced by arXiv's canonical id (``math.MP`` -> ``math-ph``)."""
    archives: tuple[str, ...]
    """The archive of each category as listed (``math.MP`` -> ``math``)."""
    authors_by_surname: Mapping[str, tuple[tuple[str, NameKey], ...]]
    """Last surname word -> ``(display name, name key)`` of the authors with that surname, in paper order."""
    keys: frozenset[Key]
    """Every index key this paper satisfies; see :meth:`Query.anchors`."""

    @classmethod
    def of(cls, paper: PaperIn) -> PaperText:
        """Fold and split ``paper`` once."""
        title_words = tuple(terms(strip_tex(paper.title)))
        abstract_words = tuple(terms(strip_tex(paper.abstract)))
        folded_categories = tuple(canonical_category(c) for c in paper.categories)
        archives = tuple(archive_of(c) for c in paper.categories)
        authors: dict[str, list[tuple[str, NameKey]]] = {}
        for display in paper.authors:
            key = name_key(display)
            if key[0]:
                authors.setdefault(key[0].split()[-1], []).append((display, key))
        keys: set[Key] = {("w", w) for w in title_words}
        keys.update(("w", w) for w in abstract_words)
        keys.update(("cat", c) for c in folded_categories)
        keys.update(("arch", a) for a in archives)
        keys.update(("au", surname) for surname in authors)
        arxiv_id = paper.arxiv_id.strip().lower()
        keys.add(("id", arxiv_id))
        return cls(
            arxiv_id=arxiv_id,
            title_words=title_words,
            abstract_words=abstract_words,
            title_positions=_positions(title_words),
            abstract_positions=_positions(abstract_words),
            categories=paper.categories,
            folded_categories=folded_categories,
            archives=archives,
            authors_by_surname={k: tuple(v) for k, v in authors.items()},
            keys=frozenset(keys),
        )

    def in_title(self, phrase: tuple[str, ...]) -> bool:
        """True if ``phrase`` (match terms) occurs as consecutive words of the title."""
        return _has_phrase(self.title_words, self.title_positions, phrase)

    def in_abstract(self, phrase: tuple[str, ...]) -> bool:
        """True if ``phrase`` (match terms) occurs as consecutive words of the abstract."""
        return _has_phrase(self.abstract_words, self.abstract_positions, phrase)


def _positions(ws: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    found: dict[str, list[int]] = {}
    for i, w in enumerate(ws):
        found.setdefault(w, []).append(i)
    return {w: tuple(p) for w, p in found.items()}


def _has_phrase(
    ws: tuple[str, ...], positions: Mapping[str, tuple[int, ...]], phrase: tuple[str, ...]
) -> bool:
    n = len(phrase)
    return any(ws[p : p + n] == phrase for p in positions.get(phrase[0], ()))


# ---------------------------------------------------------------------------------------------------------
# The query side: an immutable tree of nodes.

Reasons = tuple[Reason, ...]


class Node:
    """A node of a parsed query. Subclasses are frozen dataclasses, so trees are hashable and comparable."""

    __slots__ = ()

    def canonical(self) -> str:
        """The normal form of this node as query text."""
        raise NotImplementedError

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """None if the node does not hold for ``paper``, else the reasons of its positive terms."""
        raise NotImplementedError

    def anchors(self) -> frozenset[Key] | None:
        """Keys of which ``paper.keys`` must contain at least one for this node to hold; None if unknown."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Words(Node):
    """A word or phrase in the title (``ti:``), the abstract (``abs:``) or either (no field)."""

    field: Literal["any", "ti", "abs"]
    display: tuple[str, ...]
    """The words as the user typed them, case and accents folded: shown in reasons and the canonical form."""
    words: tuple[str, ...] = dataclasses.field(init=False)
    """The match terms (``core.follows.normalise.term`` of each displayed word): what is looked up in the
    paper."""

    def __post_init__(self) -> None:
        # Derived, so that equal displays always give equal terms; set through object because it is frozen.
        object.__setattr__(self, "words", tuple(term(w) for w in self.display))

    def _value(self) -> str:
        return self.display[0] if len(self.display) == 1 else '"' + " ".join(self.display) + '"'

    def canonical(self) -> str:
        """``ti:word``, ``abs:"a phrase"`` or a bare word / phrase."""
        return self._value() if self.field == "any" else f"{self.field}:{self._value()}"

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """Reason ``title: word`` when the title has it, else ``abstract: word``."""
        if self.field != "abs" and paper.in_title(self.words):
            return (reason(TITLE, self._value()),)
        if self.field != "ti" and paper.in_abstract(self.words):
            return (reason(ABSTRACT, self._value()),)
        return None

    def anchors(self) -> frozenset[Key] | None:
        """One term, the rarest by a rough guess: every term of a phrase must occur in a matching paper."""
        return frozenset({min((("w", w) for w in self.words), key=lambda k: (_key_share(k), -len(k[1])))})


@dataclass(frozen=True, slots=True)
class Author(Node):
    """``au:``: one or two readings of a typed name (see ``core.follows.normalise.query_name_keys``)."""

    readings: tuple[NameKey, ...]

    def canonical(self) -> str:
        """``au:li``, ``au:"zeng li"``, or the comma form when only that reads back the same."""
        surname, given = self.readings[0]
        text = " ".join((*given, surname))
        if query_name_keys(text) != self.readings:
            text = f"{surname}, {' '.join(given)}".rstrip()
        return f"au:{text}" if " " not in text and "," not in text else f'au:"{text}"'

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """Reason ``author <display name>`` for each matching author of the paper."""
        candidates = paper.authors_by_surname.get(self.readings[0][0].split()[-1], ())
        found = tuple(
            reason(AUTHOR, display)
            for display, key in candidates
            if any(name_matches(reading, key) for reading in self.readings)
        )
        return found or None

    def anchors(self) -> frozenset[Key] | None:
        """The last surname word, which every reading shares with every author it matches."""
        return frozenset({("au", self.readings[0][0].split()[-1])})


@dataclass(frozen=True, slots=True)
class Category(Node):
    """``cat:cs.dc`` (one category, primary or cross-list) or ``cat:cs.*`` (a whole archive)."""

    category: str
    """Lower case and canonical (``math.MP`` is stored as ``math-ph``); an archive name when ``archive``."""
    archive: bool
    """Set for a divided archive (``cs``, ``math``); an undivided one (``hep-th``) is a category."""

    def canonical(self) -> str:
        """arXiv's usual spelling: ``cat:cs.DC``, ``cat:physics.acc-ph``, ``cat:cs.*``, ``cat:hep-th``."""
        return f"cat:{self.category}.*" if self.archive else f"cat:{spell(self.category)}"

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """Reason ``category <the paper's first matching category>``, as the paper lists it."""
        found = paper.archives if self.archive else paper.folded_categories
        for given, folded in zip(paper.categories, found, strict=True):
            if folded == self.category:
                return (reason(CATEGORY, given),)
        return None

    def anchors(self) -> frozenset[Key] | None:
        """``("arch", archive)`` or ``("cat", category)``."""
        return frozenset({("arch" if self.archive else "cat", self.category)})


@dataclass(frozen=True, slots=True)
class PaperId(Node):
    """``id:2611.08864``: one paper, any version."""

    arxiv_id: str

    def canonical(self) -> str:
        """``id:<id>``."""
        return f"id:{self.arxiv_id}"

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """Reason ``paper <id>``."""
        return (reason(PAPER, self.arxiv_id),) if paper.arxiv_id == self.arxiv_id else None

    def anchors(self) -> frozenset[Key] | None:
        """``("id", id)``."""
        return frozenset({("id", self.arxiv_id)})


@dataclass(frozen=True, slots=True)
class And(Node):
    """All children hold (two or more, none of them an And)."""

    children: tuple[Node, ...]

    def canonical(self) -> str:
        """Children joined by ``AND``; OR children in parentheses."""
        return " AND ".join(
            f"({c.canonical()})" if isinstance(c, Or) else c.canonical() for c in self.children
        )

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """The reasons of all children, or None as soon as one fails."""
        reasons: list[Reason] = []
        for child in self.children:
            found = child.evaluate(paper)
            if found is None:
                return None
            reasons.extend(found)
        return tuple(reasons)

    def anchors(self) -> frozenset[Key] | None:
        """The anchors of the most selective child that has any: one child's keys suffice."""
        known = [a for a in (c.anchors() for c in self.children) if a is not None]
        return min(known, key=_selectivity) if known else None


@dataclass(frozen=True, slots=True)
class Or(Node):
    """At least one child holds (two or more, none of them an Or)."""

    children: tuple[Node, ...]

    def canonical(self) -> str:
        """Children joined by ``OR``; AND binds tighter, so no parentheses are needed."""
        return " OR ".join(c.canonical() for c in self.children)

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """The reasons of every child that holds (all are evaluated, to report every reason)."""
        reasons: list[Reason] = []
        matched = False
        for child in self.children:
            found = child.evaluate(paper)
            if found is not None:
                matched = True
                reasons.extend(found)
        return tuple(reasons) if matched else None

    def anchors(self) -> frozenset[Key] | None:
        """The union of the children's anchors; None if any child has none."""
        union: set[Key] = set()
        for child in self.children:
            found = child.anchors()
            if found is None:
                return None
            union |= found
        return frozenset(union)


@dataclass(frozen=True, slots=True)
class Not(Node):
    """The child does not hold. Contributes no reasons."""

    child: Node

    def canonical(self) -> str:
        """``NOT term`` or ``NOT (...)``."""
        inner = self.child.canonical()
        return f"NOT ({inner})" if isinstance(self.child, And | Or) else f"NOT {inner}"

    def evaluate(self, paper: PaperText) -> Reasons | None:
        """An empty reason tuple when the child fails."""
        return () if self.child.evaluate(paper) is None else None

    def anchors(self) -> frozenset[Key] | None:
        """None: absence of something cannot be looked up."""
        return None


# Rough guesses of the share of papers that carry a key: a paper id is unique, a surname rare, most words
# rare, a category common and an archive very common. Word keys are match terms, hence the list is folded.
# An OR of keys costs the sum of its parts. Only the speed of matching depends on these numbers, never its
# result.
_KEY_SHARE = {"id": 0.0001, "au": 0.001, "cat": 0.03, "arch": 0.2}
_COMMON_WORDS = frozenset(
    term(w)
    for w in [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "based",
        "be",
        "by",
        "data",
        "deep",
        "for",
        "from",
        "in",
        "is",
        "learning",
        "method",
        "methods",
        "model",
        "models",
        "network",
        "networks",
        "neural",
        "new",
        "of",
        "on",
        "our",
        "paper",
        "problem",
        "results",
        "show",
        "study",
        "system",
        "systems",
        "that",
        "the",
        "this",
        "to",
        "two",
        "use",
        "using",
        "via",
        "we",
        "which",
        "with",
    ]
)


def _key_share(key: Key) -> float:
    kind, value = key
    if kind == "w":
        return 0.2 if value in _COMMON_WORDS else 0.05 if len(value) < 4 else 0.01
    return _KEY_SHARE[kind]


def _selectivity(keys: frozenset[Key]) -> tuple[float, int]:
    return sum(_key_share(k) for k in keys), len(keys)
