"""The follow language's lexer and parser: query text to a tree of ``core.follows.query_nodes``, or a
QueryError.

The grammar is in ``core.follows.query``'s docstring; :func:`core.follows.query.parse` is the entry point and
wraps the tree
that :func:`parse_tree` returns in a :class:`core.follows.query.Query`. Every error (:class:`QueryError`)
points at
the bad position and says what was expected in the reader's language, with the closest real field or
category when the user misspelt one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from core.follows.normalise import query_name_keys, strip_tex, words
from core.follows.query_nodes import And, Author, Category, Node, Not, Or, PaperId, Words
from core.follows.taxonomy import (
    ARCHIVES,
    CATEGORIES,
    DIVIDED_ARCHIVES,
    SUBSUMED,
    canonical_category,
    closest,
    suggest_category,
)
from core.languages import DEFAULT_LANGUAGE, N_, Alternatives, Listed, Phrase, Translator, translator

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
