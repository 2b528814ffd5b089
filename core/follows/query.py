"""The follow language: ``parse(text) -> Query``, with errors that point at the bad position.

Grammar (operators are recognised only in upper case; ``and``, ``or``, ``not`` are ordinary words)::

    query    := or_expr
    or_expr  := and_expr ( "OR" and_expr )*
    and_expr := unary ( ( "AND" | "ANDNOT" )? unary )*      juxtaposition means AND
    unary    := "NOT" unary | primary
    primary  := "(" or_expr ")" | term
    term     := [ field ":" ] ( word | '"' phrase '"' )      no space between the colon and the value
    field    := cat | au | ti | abs | id                      case-insensitive

A term without a field searches the title or the abstract. Words match whole words, case- and
accent-insensitively, regular plurals folded (``model`` = ``models``, see ``core.follows.normalise.term``);
a phrase (or a bare word with hyphens, like ``multi-agent``) matches consecutive words. TeX markup and inline
math are stripped from titles and abstracts first (``core.follows.normalise.strip_tex``). Typographic quotes
(“ ” „) count as ``"`` because phones substitute them; a backslash keeps the next character in the term
(``au:G\\"odel``). Categories are checked against arXiv's taxonomy (``core.follows.taxonomy``); unknown ones
and unknown fields are refused with the closest real names.

A parsed :class:`Query` is immutable, has a normal form (:meth:`Query.canonical`) and evaluates against a
paper, returning the reasons of the positive terms that matched. :meth:`Query.anchors` tells the matcher
which paper keys the query needs, so that ``core.follows.match`` can index thousands of follows.

This module holds, in order: the paper side (:class:`PaperText`) and the query tree (:class:`Node` and its
leaves and operators, each a frozen dataclass that renders its canonical text, evaluates against a
``PaperText`` and names the index keys it needs), the lexer and parser (:func:`parse_tree`, every error a
:class:`QueryError` that points at the bad position and says what was expected in the reader's language,
with the closest real field or category when the user misspelt one), and :class:`Query`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from core.follows.normalise import (
    NameKey,
    name_key,
    name_matches,
    query_name_keys,
    strip_tex,
    term,
    terms,
    words,
)
from core.follows.taxonomy import (
    ARCHIVES,
    CATEGORIES,
    DIVIDED_ARCHIVES,
    SUBSUMED,
    archive_of,
    canonical_category,
    closest,
    spell,
    suggest_category,
)
from core.languages import DEFAULT_LANGUAGE, N_, Alternatives, Listed, Phrase, Translator, translator
from core.reasons import ABSTRACT, AUTHOR, CATEGORY, PAPER, TITLE, Reason, reason
from core.values import PaperIn

__all__ = [
    "FIELDS",
    "MAX_DEPTH",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "And",
    "Author",
    "Category",
    "Key",
    "Node",
    "Not",
    "Or",
    "PaperId",
    "PaperText",
    "Query",
    "QueryError",
    "Words",
    "parse",
]


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


# -------------------------------------------------------------------------------------------------------
# The lexer and the parser: query text to a tree of nodes, or a QueryError that points at the bad position.

MAX_QUERY_CHARS = 1000
MAX_TERMS = 50
MAX_DEPTH = 20
"""Limits that keep one follow cheap to store, show and evaluate (depth counts parentheses and NOTs)."""

FIELDS = ("cat", "au", "ti", "abs", "id")
OPERATORS = frozenset({"AND", "OR", "NOT", "ANDNOT"})

# Names people try for a field: arXiv's long names and plain words. Only used to suggest the right field.
_FIELD_GUESSES = {
    "author": "au", "authors": "au", "name": "au", "title": "ti", "abstract": "abs", "summary": "abs",
    "category": "cat", "categories": "cat", "subject": "cat", "paper": "id", "arxiv": "id",
}  # fmt: skip
_CATEGORY_IDS = frozenset(c.lower() for c in CATEGORIES)

_QUOTES = '"“”„'
_CLOSING_QUOTES = '"“”'
_FIELD = re.compile(r"([A-Za-z]+):(.*)", re.DOTALL)
_CATEGORY = re.compile(r"([a-z][a-z-]*)(?:\.([a-z][a-z-]*|\*))?")
_NEW_ID = re.compile(r"([0-9]{4}\.[0-9]{4,5})(v[0-9]+)?")
_ID_IN_LINK = re.compile(
    r"arxiv\.org/(?:abs|pdf|html)/([0-9]{4}\.[0-9]{4,5}|[a-z][a-z-]*(?:\.[a-z]{2})?/[0-9]{7})"
)
_OLD_ID = re.compile(r"([a-z][a-z-]*)(?:\.[a-z]{2})?/([0-9]{7})(v[0-9]+)?")


class QueryError(ValueError):
    """A follow that does not parse; ``str()`` says what was expected and where, in English.

    ``position`` is a 0-based character offset into the query text (``len(text)`` for "at the end").
    ``excerpt()`` renders the query with a caret under that position. The problem and the hint are
    :class:`core.languages.Phrase` objects (``phrase``, ``hint_phrase``), so a chat or a web page says
    them in
    its reader's language with :meth:`said`; ``message`` and ``hint`` are the English texts.
    """

    def __init__(self, message: str | Phrase, position: int, hint: str | Phrase = "", text: str = "") -> None:
        self.phrase = message if isinstance(message, Phrase) else Phrase(message)
        self.hint_phrase = hint if isinstance(hint, Phrase) else Phrase(hint) if hint else None
        self.message = str(self.phrase)
        self.hint = str(self.hint_phrase) if self.hint_phrase else ""
        self.position = position
        self.text = text
        super().__init__(str(self))

    def __reduce__(self) -> tuple[type[QueryError], tuple[Phrase, int, Phrase | str, str]]:
        # The default would rebuild from str(self) alone; keep the fields across pickling (worker processes).
        return (QueryError, (self.phrase, self.position, self.hint_phrase or "", self.text))

    def __str__(self) -> str:
        return self.said(translator(DEFAULT_LANGUAGE))

    def said(self, t: Translator) -> str:
        """``expected a search term after 'OR' at position 23``, in ``t``'s language."""
        said = t.gettext(
            "{problem} at position {position}", problem=self.phrase.said(t), position=self.position
        )
        if self.hint_phrase:
            said = t.gettext("{problem}; {hint}", problem=said, hint=self.hint_phrase.said(t))
        return said

    def excerpt(self, width: int = 60) -> str:
        """Two lines: (a window of) the query text and a caret under the bad position."""
        start = max(0, min(self.position - width // 2, len(self.text) - width))
        end = min(len(self.text), start + width)
        prefix = "…" if start > 0 else ""
        suffix = "…" if end < len(self.text) else ""
        line = prefix + self.text[start:end].replace("\n", " ") + suffix
        return f"{line}\n{' ' * (len(prefix) + self.position - start)}^"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: Literal["(", ")", "op", "term", "end"]
    pos: int
    text: str = ""
    field: str = ""
    value: str = ""
    value_pos: int = 0
    quoted: bool = False


def _read_phrase(text: str, start: int) -> tuple[str, int]:
    """Read the quoted phrase opening at ``start``; return its content and the index after it.

    A backslash keeps the next character inside the phrase, so ``"G\\"odel"`` (TeX for Gödel) is one phrase.
    """
    k = start + 1
    while k < len(text) and text[k] not in _CLOSING_QUOTES:
        k += 2 if text[k] == "\\" else 1
    if k >= len(text):
        raise QueryError(Phrase(N_("unterminated quoted phrase")), start, Phrase(N_('add a closing "')))
    content = text[start + 1 : k]
    if not content.strip():
        raise QueryError(Phrase(N_("empty quoted phrase")), start)
    return content, k + 1


def _run_end(text: str, start: int) -> int:
    """The end of the unquoted run starting at ``start``: up to a space, a parenthesis or a quote.

    A backslash keeps the next non-space character in the run (``au:G\\"odel``, ``\\(``).
    """
    j, n = start, len(text)
    while j < n and not text[j].isspace() and text[j] not in "()" and text[j] not in _QUOTES:
        j += 2 if text[j] == "\\" and j + 1 < n and not text[j + 1].isspace() else 1
    return j


def _did_you_mean(options: list[str]) -> Phrase:
    """``did you mean X?``, ``did you mean X or Y?``, ``did you mean X, Y or Z?``."""
    return Phrase(N_("did you mean {option}?"), option=Alternatives(options))


def _unknown_field(name: str, value: str, pos: int) -> QueryError:
    """The error for ``name:`` that is not a field, with the field the user most likely meant."""
    folded = name.lower()
    if folded == "all":
        hint = Phrase(N_("all: is not supported; a word without a field searches the title and the abstract"))
    elif folded in ("http", "https") or "arxiv.org/" in value.lower():
        found = _ID_IN_LINK.search(value.lower())
        hint = (
            Phrase(N_("write id:{id} to follow that paper"), id=found.group(1))
            if found
            else Phrase(N_("a link is not a query"))
        )
    else:
        guesses = [_FIELD_GUESSES.get(g, g) for g in closest(folded, [*FIELDS, *_FIELD_GUESSES])]
        fields = list(dict.fromkeys(guesses))
        hint = (
            _did_you_mean([f"{f}:" for f in fields])
            if fields
            else Phrase(N_("fields are cat:, au:, ti:, abs:, id:"))
        )
    return QueryError(Phrase(N_("unknown field '{field}:'"), field=name), pos, hint)


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "()":
            tokens.append(_Token("(" if c == "(" else ")", i, text=c))
            i += 1
        elif c in _QUOTES:
            value, end = _read_phrase(text, i)
            tokens.append(_Token("term", i, text=text[i:end], value=value, value_pos=i + 1, quoted=True))
            i = end
        else:
            j = _run_end(text, i)
            run = text[i:j]
            if run in OPERATORS:
                tokens.append(_Token("op", i, text=run))
                i = j
                continue
            m = _FIELD.fullmatch(run)
            if m is None:
                tokens.append(_Token("term", i, text=run, value=run, value_pos=i))
                i = j
                continue
            field = m.group(1).lower()
            if field not in FIELDS:
                raise _unknown_field(m.group(1), m.group(2), i)
            value_pos = i + len(m.group(1)) + 1
            if m.group(2):
                value, end, quoted = m.group(2), j, False
            elif j < n and text[j] in _QUOTES:
                value, end = _read_phrase(text, j)
                value_pos, quoted = j + 1, True
            else:
                raise QueryError(
                    Phrase(N_("""expected a word or "phrase" after '{field}:'"""), field=m.group(1)),
                    value_pos,
                )
            tokens.append(
                _Token(
                    "term", i, text=text[i:end], field=field, value=value, value_pos=value_pos, quoted=quoted
                )
            )
            i = end
    tokens.append(_Token("end", n))
    return tokens


def _term(token: _Token) -> Node:
    """Build the node for one term token, validating its value."""
    value, pos, field = token.value, token.value_pos, token.field
    if field in ("", "ti", "abs"):
        if "*" in value:
            raise QueryError(
                Phrase(N_("wildcards are not supported")),
                pos + value.index("*"),
                Phrase(N_("words match whole words; cat: accepts cs.*")),
            )
        if not token.quoted and not field and len(value) > 1 and value.startswith("-"):
            raise QueryError(
                Phrase(N_("a leading '-' does not exclude")), pos, Phrase(N_("write NOT word to exclude"))
            )
        found = tuple(words(strip_tex(value)))
        if not found:
            tex = "\\" in value or "$" in value
            hint = Phrase(
                N_("TeX math and commands are not searched")
                if tex
                else N_("words are made of letters and digits")
            )
            raise QueryError(Phrase(N_("nothing to search for in '{value}'"), value=value), pos, hint)
        kind: Literal["any", "ti", "abs"] = "ti" if field == "ti" else "abs" if field == "abs" else "any"
        return Words(kind, found)
    if field == "au":
        readings = query_name_keys(value)
        if not readings[0][0]:
            raise QueryError(
                Phrase(N_("no name in '{value}'"), value=value),
                pos,
                Phrase(N_('write e.g. au:Li or au:"Zeng Li"')),
            )
        return Author(readings)
    if field == "cat":
        return _category(value, pos)
    return PaperId(_arxiv_id(value.strip(), pos))


def _category(value: str, pos: int) -> Category:
    """Validate a ``cat:`` value against arXiv's taxonomy; the error names the closest real categories."""
    shown = value.strip()
    m = _CATEGORY.fullmatch(shown.lower())
    if m is None:
        raise QueryError(
            Phrase(N_("not a category: '{value}'"), value=value),
            pos,
            Phrase(N_("write e.g. cat:cs.DC or cat:cs.*")),
        )
    archive, subject = m.group(1), m.group(2)
    if subject is None or subject == "*":
        if archive in DIVIDED_ARCHIVES:
            return Category(archive, archive=True)
        if archive in ARCHIVES:
            return Category(archive, archive=False)  # hep-th, hep-th.*: the archive is the category
        if archive in SUBSUMED:
            hint = Phrase(
                N_("{archive} is now {new}: write cat:{new}"), archive=archive, new=SUBSUMED[archive]
            )
        else:
            options = suggest_category(shown)
            hint = _did_you_mean(options) if options else _archives()
        raise QueryError(
            Phrase(N_("unknown arXiv archive '{archive}'"), archive=shown.split(".")[0]), pos, hint
        )
    full = f"{archive}.{subject}"
    if full in _CATEGORY_IDS:
        return Category(canonical_category(full), archive=False)
    options = suggest_category(shown)
    if options:
        hint = _did_you_mean(options)
    elif archive in DIVIDED_ARCHIVES:
        hint = Phrase(
            N_("see arxiv.org/category_taxonomy, or write cat:{archive}.* for all of {archive}"),
            archive=archive,
        )
    elif archive in ARCHIVES:
        hint = Phrase(N_("{archive} has no subject classes: write cat:{archive}"), archive=archive)
    else:
        hint = _archives()
    raise QueryError(Phrase(N_("unknown category '{category}'"), category=shown), pos, hint)


def _archives() -> Phrase:
    return Phrase(N_("archives are {archives}"), archives=Listed(sorted(ARCHIVES)))


def _arxiv_id(value: str, pos: int) -> str:
    """Validate and normalise an ``id:`` value; a version suffix is an error (follows watch all versions)."""
    bare = value[6:] if value.lower().startswith("arxiv:") else value
    offset = pos + len(value) - len(bare)
    new = _NEW_ID.fullmatch(bare)
    old = _OLD_ID.fullmatch(bare.lower())
    if new is not None:
        ident, version = new.group(1), new.group(2)
    elif old is not None:
        # "math.GT/0309136" and "math/0309136" are the same paper; arXiv's canonical id drops the class.
        ident, version = f"{old.group(1)}/{old.group(2)}", old.group(3)
    else:
        raise QueryError(
            Phrase(N_("not an arXiv id: '{value}'"), value=value),
            pos,
            Phrase(N_("write e.g. id:2411.17700 or id:quant-ph/0201082")),
        )
    if version:
        raise QueryError(
            Phrase(N_("unexpected version suffix '{version}'"), version=version),
            offset + len(bare) - len(version),
            Phrase(N_("drop it: id:{id} follows every version"), id=ident),
        )
    return ident


def _and(items: list[Node]) -> Node:
    return _combine(items, And)


def _or(items: list[Node]) -> Node:
    return _combine(items, Or)


def _combine(items: list[Node], kind: type[And] | type[Or]) -> Node:
    # Flatten nested nodes of the same kind and drop repeated operands, so equal meanings print equally.
    flat: list[Node] = []
    for item in items:
        for child in item.children if isinstance(item, kind) else (item,):
            if child not in flat:
                flat.append(child)
    return flat[0] if len(flat) == 1 else kind(tuple(flat))


def _not(item: Node) -> Node:
    return item.child if isinstance(item, Not) else Not(item)


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.terms = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def is_op(self, *names: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text in names

    def parse(self) -> Node:
        first = self.peek()
        if first.kind == "end":
            raise QueryError(
                Phrase(N_("empty query")),
                0,
                Phrase(N_('write a word, a "phrase" or a field such as cat:cs.DC')),
            )
        node = self.or_expr(0)
        rest = self.peek()
        if rest.kind == ")":
            raise QueryError(Phrase(N_("unexpected ')'")), rest.pos, Phrase(N_("it has no matching '('")))
        if rest.kind != "end":  # pragma: no cover - and_expr consumes everything else
            raise QueryError(Phrase(N_("unexpected '{text}'"), text=rest.text), rest.pos)
        return node

    def or_expr(self, depth: int) -> Node:
        items = [self.and_expr(depth)]
        while self.is_op("OR"):
            self.take()
            items.append(self.and_expr(depth))
        return _or(items)

    def and_expr(self, depth: int) -> Node:
        items = [self.unary(depth)]
        while True:
            token = self.peek()
            if self.is_op("AND", "ANDNOT"):
                self.take()
                item = self.unary(depth)
                items.append(_not(item) if token.text == "ANDNOT" else item)
            elif token.kind in ("term", "(") or self.is_op("NOT"):
                items.append(self.unary(depth))
            else:
                return _and(items)

    def unary(self, depth: int) -> Node:
        if self.is_op("NOT"):
            self.check_depth(depth + 1)
            self.take()
            return _not(self.unary(depth + 1))
        return self.primary(depth)

    def primary(self, depth: int) -> Node:
        token = self.peek()
        if token.kind == "term":
            self.terms += 1
            if self.terms > MAX_TERMS:
                raise QueryError(
                    Phrase(N_("too many search terms")),
                    token.pos,
                    Phrase(N_("the limit is {limit}"), limit=MAX_TERMS),
                )
            self.take()
            return _term(token)
        if token.kind == "(":
            self.check_depth(depth + 1)
            self.take()
            inner = self.or_expr(depth + 1)
            close = self.peek()
            if close.kind != ")":
                raise QueryError(
                    Phrase(N_("expected a closing ')'")),
                    close.pos,
                    Phrase(N_("the '(' at position {position} is still open"), position=token.pos),
                )
            self.take()
            return inner
        raise self.missing_term(token)

    def check_depth(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise QueryError(
                Phrase(N_("query nested too deeply")),
                self.peek().pos,
                Phrase(N_("the limit is {limit} levels"), limit=MAX_DEPTH),
            )

    def missing_term(self, token: _Token) -> QueryError:
        """The error for a place that needed a term but holds ``token``."""
        prev = self.tokens[self.i - 1] if self.i > 0 else None
        if prev is not None and prev.kind == "(" and token.kind == ")":
            return QueryError(Phrase(N_("empty parentheses")), prev.pos)
        if prev is None and token.kind == ")":
            return QueryError(Phrase(N_("unexpected ')'")), token.pos, Phrase(N_("it has no matching '('")))
        if prev is not None and prev.kind in ("op", "("):
            found = "" if token.kind == "end" else Phrase(N_("found '{text}'"), text=token.text)
            return QueryError(
                Phrase(N_("expected a search term after '{word}'"), word=prev.text), token.pos, found
            )
        return QueryError(Phrase(N_("expected a search term before '{word}'"), word=token.text), token.pos)


def parse_tree(text: str) -> Node:
    """Parse a follow into its tree; raise :class:`QueryError` (a ``ValueError``) at the first problem."""
    try:
        if len(text) > MAX_QUERY_CHARS:
            raise QueryError(
                Phrase(N_("query too long")),
                MAX_QUERY_CHARS,
                Phrase(N_("the limit is {limit} characters"), limit=MAX_QUERY_CHARS),
            )
        return _Parser(_lex(text)).parse()
    except QueryError as err:
        err.text = text
        raise


# -------------------------------------------------------------------------------------------------------
# A parsed follow.


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed follow. Equal queries have equal canonical forms."""

    root: Node
    _hash: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The matcher keys its slots by Query: hash the tree once, not on every lookup (a dataclass's hash
        # walks the whole tree each time). Set through object because the class is frozen.
        object.__setattr__(self, "_hash", hash(self.root))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Query], tuple[Node]]:
        # Rebuilt from the tree alone: string hashes differ between processes, so a stored hash would not do.
        return (Query, (self.root,))

    def canonical(self) -> str:
        """The normal form: folded words, explicit ``AND``/``OR``/``NOT``, arXiv-style categories.

        ``parse(q.canonical()) == q`` always holds, so the canonical text dedupes and displays follows.
        ``ANDNOT`` is written ``AND NOT``; operands keep the order the user gave.
        """
        return self.root.canonical()

    def evaluate(self, paper: PaperIn | PaperText) -> Reasons | None:
        """None if ``paper`` does not match, else the distinct reasons of the positive terms that matched.

        Pass a :class:`PaperText` when evaluating many queries against one paper, to tokenise it once.
        """
        text = paper if isinstance(paper, PaperText) else PaperText.of(paper)
        found = self.root.evaluate(text)
        return None if found is None else tuple(dict.fromkeys(found))

    def anchors(self) -> frozenset[Key] | None:
        """Index keys of which a matching paper has at least one; None if the query has no positive anchor."""
        return self.root.anchors()

    def __str__(self) -> str:
        return self.canonical()


def parse(text: str) -> Query:
    """Parse a follow; raise :class:`QueryError` (a ``ValueError``) pointing at the first problem."""
    return Query(parse_tree(text))
