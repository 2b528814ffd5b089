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
accent-insensitively, regular plurals folded (``model`` = ``models``, see ``core.follows.normalise.term``); a
phrase (or a
bare word with hyphens, like ``multi-agent``) matches consecutive words. TeX markup and inline math are
stripped from titles and abstracts first (``core.follows.normalise.strip_tex``). Typographic quotes (“ ” „)
count as
``"`` because phones substitute them; a backslash keeps the next character in the term (``au:G\"odel``).
Categories are checked against arXiv's taxonomy (``core.follows.taxonomy``); unknown ones and unknown fields
are
refused with the closest real names.

A parsed :class:`Query` is immutable, has a normal form (:meth:`Query.canonical`) and evaluates against a
paper, returning the reasons of the positive terms that matched. :meth:`Query.anchors` tells the matcher
which paper keys the query needs, so that ``core.follows.match`` can index thousands of follows.

The pieces: ``core.follows.query_nodes`` holds the paper side (:class:`PaperText`) and the query tree, and
``core.follows.query_parse`` the lexer, the parser and :class:`QueryError`. Import all of them from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from core.follows.query_nodes import (
    And,
    Author,
    Category,
    Key,
    Node,
    Not,
    Or,
    PaperId,
    PaperText,
    Reasons,
    Words,
)
from core.follows.query_parse import FIELDS, MAX_DEPTH, MAX_QUERY_CHARS, MAX_TERMS, QueryError, parse_tree
from core.values import PaperIn


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
