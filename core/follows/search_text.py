"""Full-text search of the library with the follow language's own word rules, for SQLite FTS5 and PostgreSQL.

The paper browser's search box takes a follow (``core.follows.query``). Both databases index the same
:class:`SearchDoc`, made from :class:`core.follows.query.PaperText`, so the index holds exactly the match
terms the
follow matcher compares (``core.follows.normalise``: TeX stripped, case and accents folded, words split at
punctuation,
regular plurals made singular), and :func:`compile_search` turns a follow into an FTS5 MATCH expression and
a PostgreSQL tsquery literal over those terms. Neither database's own word rules are involved:

- every term becomes one **token** of ``[a-z0-9]`` (:func:`token`), which FTS5's ``unicode61`` (or
  ``ascii``) tokenizer keeps as one token and which a tsvector literal takes verbatim (no parser, no
  stemming, no stop words: the tsvector is built with ``CAST(literal AS tsvector)`` and the query with
  ``CAST(literal AS tsquery)``, never with ``to_tsvector``/``to_tsquery``);
- the document has three parts: the title's tokens, the abstract's, and **meta** tokens for the keys of
  the other fields, each with a one-letter prefix: ``a`` + the last word of an author's surname (the key
  ``Author`` looks authors up by), ``c`` + a category, ``r`` + an archive (``cat:cs.*``), ``i`` + the
  paper id. FTS5 keeps them in three columns (``title``, ``abstract``, ``meta``); a tsvector gives them the
  weights A, B and C, and a query term carries the weights of its fields (``'graph':AB``).

The store's tables (core.papers.search_index): on SQLite a contentless FTS5 table
``search_doc(title, abstract, meta)`` with ``tokenize='ascii'`` (the tokens are already lower-case
``[a-z0-9]`` runs, so any tokenizer splits them exactly at the spaces; ``detail=full``, the default, keeps
the positions phrases need); on PostgreSQL a ``tsvector`` column filled with ``CAST(literal AS tsvector)``.
``tests/test_search_text.py`` checks both against the follow matcher.

Where the index and the follow rules differ (the test checks the rest on a recorded day, in both
databases):

- ``au:`` is a superset: the index holds only the last word of each author's surname, while the follow
  also compares the other surname words and the given names (``au:"Zeng Li"`` finds every Li). The caller
  checks the candidates with ``SearchQuery.query.evaluate``; :attr:`SearchQuery.exact` says when that is
  not needed. For the same reason a ``NOT`` over an ``au:`` term is left out of the index query (a NOT of
  a superset would drop papers that match), which keeps the index answer a superset.
- ``NOT`` needs something positive beside it and cannot stand inside ``OR`` (FTS5's NOT is binary, and
  such a search would return most of the library anyway): :func:`compile_search` refuses these with
  :class:`SearchError`, saying what to write instead.
- A term that is not a ``[a-z0-9]`` run becomes ``x`` + its UTF-8 in hex (``"α"`` -> ``"xceb1"``), so an
  ASCII word that happens to spell ``x`` + the hex of a non-ASCII term (``xceb1``) is found by that term
  too. Such a word would have to be written in a paper on purpose. Tokens longer than
  :data:`MAX_TOKEN_CHARS` become ``y`` + a 128-bit BLAKE2b hash of the term, with the same (smaller) risk;
  PostgreSQL refuses lexemes over 2046 bytes, and this keeps both databases on the same tokens.
- PostgreSQL keeps at most 256 positions per lexeme and positions up to 16383 (:func:`tsvector_literal`
  drops the rest, see there): a word a paper repeats more than 256 times is still found, but a phrase
  through one of its later occurrences is not; text past position 16383 (some 16,000 words, far beyond
  arXiv's 1,920-character abstracts) is not in the PostgreSQL index at all. FTS5 has neither limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from hashlib import blake2b

from core.follows.normalise import name_key, strip_tex, terms, words
from core.follows.query import (
    MAX_QUERY_CHARS,
    MAX_TERMS,
    And,
    Author,
    Category,
    Node,
    Not,
    Or,
    PaperId,
    PaperText,
    Query,
    QueryError,
    Words,
    parse,
)
from core.follows.taxonomy import archive_of, canonical_category
from core.values import PaperIn

MAX_TOKEN_CHARS = 240
"""The longest token written as itself or in hex; a longer one is hashed (see the module docstring)."""

TSVECTOR_MAX_POSITION = 16383
TSVECTOR_MAX_POSITIONS = 256
"""PostgreSQL's limits: the largest word position, and the most positions one lexeme keeps."""

# Positions in the tsvector: every meta token at position 1 (no query ever looks at meta positions), the
# title from 3 and the abstract one position after the title's end, so that no phrase can run from one
# part into the next (a phrase needs consecutive positions).
_META_POSITION = 1
_TITLE_START = 3

_PLAIN_TOKEN = re.compile(r"[a-z0-9]+")
_BARE_ID = re.compile(
    r"(?:arxiv:)?([0-9]{4}\.[0-9]{4,5}|[a-z][a-z-]*(?:\.[a-z]{2})?/[0-9]{7})(?:v[0-9]+)?", re.I
)
_NAME = re.compile(r"[a-z.-]+")
_NAME_CODES = str.maketrans(".-", "01")

FTS5_COLUMNS = ("title", "abstract", "meta")
"""The column names :attr:`SearchQuery.fts5` refers to, in the order :class:`SearchDoc` lists its parts."""

_FTS5_FIELD = {"any": "{title abstract}", "ti": "title", "abs": "abstract"}
_TSQUERY_WEIGHTS = {"any": "AB", "ti": "A", "abs": "B"}
_META = "meta"
_META_WEIGHT = "C"
# "3A", "4A", ...: the labels of the first positions, made once (an abstract has a few hundred words);
# index 0 holds the bare weight, for positions beyond.
_LABELLED = 2048
_LABELS_A = ("A", *(f"{n}A" for n in range(1, _LABELLED)))
_LABELS_B = ("B", *(f"{n}B" for n in range(1, _LABELLED)))


class SearchError(ValueError):
    """A search that cannot be run; ``str()`` says why and what to write instead, in English."""


# Cached: every word of every indexed paper goes through it, and word frequencies are very skewed.
@lru_cache(maxsize=1 << 16)
def token(term: str) -> str:
    """The index token of a match term (``core.follows.normalise.term``): only ``[a-z0-9]``, one token for
    any tokenizer.

    A term of ``[a-z0-9]`` stays as it is (``"graph"``, ``"3d"``); any other becomes ``"x"`` + its UTF-8
    in hex (``"α"`` -> ``"xceb1"``). A token that would be longer than :data:`MAX_TOKEN_CHARS` becomes
    ``"y"`` + a BLAKE2b hash of the term. The module docstring discusses the (tiny) collision risk.
    """
    if len(term) <= MAX_TOKEN_CHARS and _PLAIN_TOKEN.fullmatch(term):
        return term
    hexed = "x" + term.encode().hex()
    if len(hexed) <= MAX_TOKEN_CHARS:
        return hexed
    return "y" + blake2b(term.encode(), digest_size=16).hexdigest()


def _name_code(name: str) -> str:
    """A category or archive in ``[a-z0-9]``: ``cs.lg`` -> ``cs0lg``, ``math-ph`` -> ``math1ph``.

    arXiv's names are letters, dots and hyphens, and letters never become digits, so this is one-to-one;
    anything else goes through :func:`token`.
    """
    return name.translate(_NAME_CODES) if _NAME.fullmatch(name) else token(name)


def author_token(surname_word: str) -> str:
    """The meta token of an author's last surname word (a key of ``PaperText.authors_by_surname``)."""
    return "a" + token(surname_word)


def category_token(category: str) -> str:
    """The meta token of a folded category (``"cs.lg"`` -> ``"ccs0lg"``, ``"math-ph"`` -> ``"cmath1ph"``)."""
    return "c" + _name_code(category)


def archive_token(archive: str) -> str:
    """The meta token of an archive, for ``cat:cs.*`` (``"cs"`` -> ``"rcs"``)."""
    return "r" + _name_code(archive)


def id_token(arxiv_id: str) -> str:
    """The meta token of a paper id: ``"i"`` + its UTF-8 in hex, one-to-one for new and old ids alike.

    ``"2411.12345"`` -> ``"i323431312e3132333435"``, ``"hep-th/9901001"`` -> ``"i6865702d74682f..."``.
    """
    return "i" + arxiv_id.encode().hex()


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """What the index holds for one paper: three strings of space-separated tokens."""

    title: str
    """The title's match terms as tokens, in order."""
    abstract: str
    """The abstract's match terms as tokens, in order."""
    meta: str
    """Author, category, archive and id tokens (each once)."""


def search_doc(text: PaperText) -> SearchDoc:
    """The index document of a paper, from the same :class:`PaperText` the follow matcher reads.

    ``search_doc(PaperText.of(paper))``. Meta holds, in this order and without repeats, the author tokens
    (the keys of ``authors_by_surname``), the folded categories, the archives and the id.
    """
    meta = [author_token(w) for w in text.authors_by_surname]
    meta += [category_token(c) for c in text.folded_categories]
    meta += [archive_token(a) for a in text.archives]
    meta.append(id_token(text.arxiv_id))
    return SearchDoc(
        title=" ".join(map(token, text.title_words)),
        abstract=" ".join(map(token, text.abstract_words)),
        meta=" ".join(dict.fromkeys(meta)),
    )


def paper_doc(paper: PaperIn) -> SearchDoc:
    """``search_doc(PaperText.of(paper))``, computed directly: what the store indexes for each version.

    ``PaperText.of`` also builds word positions and the matcher's index keys, which an index entry does
    not need; this reads only the terms and keys the entry holds (about half the work), and caches the
    author and category tokens, which repeat across papers. ``tests/test_search_text.py`` checks the two
    agree on every paper of the recorded day.
    """
    meta = [token for token in map(_author_meta, paper.authors) if token]
    categories = [_category_meta(category) for category in paper.categories]
    meta += [category for category, _ in categories]
    meta += [archive for _, archive in categories]
    meta.append(id_token(paper.arxiv_id.strip().lower()))
    return SearchDoc(
        title=" ".join(map(token, terms(strip_tex(paper.title)))),
        abstract=" ".join(map(token, terms(strip_tex(paper.abstract)))),
        meta=" ".join(dict.fromkeys(meta)),
    )


@lru_cache(maxsize=1 << 14)
def _author_meta(display: str) -> str:
    """The meta token of one author as listed ("" when the name has no surname)."""
    surname = name_key(display)[0]
    return author_token(surname.split()[-1]) if surname else ""


@lru_cache(maxsize=1 << 10)
def _category_meta(category: str) -> tuple[str, str]:
    """The category and archive meta tokens of one category as listed."""
    return category_token(canonical_category(category)), archive_token(archive_of(category))


def _lexeme(value: str) -> str:
    """A quoted tsvector/tsquery lexeme; tokens never need it, but a quote or backslash would be escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(doc: SearchDoc) -> str:
    """The PostgreSQL tsvector literal of ``doc``, for ``CAST(:literal AS tsvector)``.

    Title tokens get weight A, abstract tokens B, meta tokens C: ``'graph':3A,17B 'ccs0lg':1C``. Meta
    tokens all stand at position 1, the title starts at 3 and the abstract one position after the
    title's end, so no phrase spans two parts. Positions past :data:`TSVECTOR_MAX_POSITION` are dropped
    rather than clamped (PostgreSQL would pile them onto 16383, where a phrase could falsely meet), and
    each lexeme keeps its first :data:`TSVECTOR_MAX_POSITIONS` positions; a lexeme left with none is left
    out. See the module docstring for what that costs.
    """
    positions: dict[str, list[str]] = {tok: [f"{_META_POSITION}{_META_WEIGHT}"] for tok in doc.meta.split()}
    title = doc.title.split()
    abstract = doc.abstract.split()
    abstract_start = _TITLE_START + len(title) + 1
    # A plain loop with the position labels formatted in advance: the store writes one of these per paper
    # of a backfill.
    for start, tokens, labels in ((_TITLE_START, title, _LABELS_A), (abstract_start, abstract, _LABELS_B)):
        for position, tok in enumerate(tokens, start):
            if position > TSVECTOR_MAX_POSITION:
                break
            label = labels[position] if position < _LABELLED else f"{position}{labels[0]}"
            found = positions.get(tok)
            if found is None:
                positions[tok] = [label]
            elif len(found) < TSVECTOR_MAX_POSITIONS:
                found.append(label)
    if "'" in doc.title + doc.abstract + doc.meta or "\\" in doc.title + doc.abstract + doc.meta:
        return " ".join(f"{_lexeme(tok)}:{','.join(found)}" for tok, found in positions.items())
    # Tokens are [a-z0-9] (token()): no quote to escape.
    return " ".join(f"'{tok}':{','.join(found)}" for tok, found in positions.items())


# --- queries -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A search, compiled for both databases from one parsed follow.

    The index answer (``fts5`` or ``tsquery``) always contains every paper ``query`` accepts. When
    ``exact`` is set it is exactly those papers; otherwise the caller keeps the candidates for which
    ``query.evaluate(PaperText.of(paper))`` is not None.
    """

    query: Query
    """The follow, for exact verification and for showing the canonical form."""
    fts5: str
    """An FTS5 MATCH expression over columns ``title``, ``abstract``, ``meta``."""
    tsquery: str
    """A PostgreSQL tsquery literal, for ``CAST(:q AS tsquery)`` against :func:`tsvector_literal`."""
    exact: bool
    """True when the index answer is exactly ``query``'s answer: no ``au:`` term, since the index holds
    only the last word of each author's surname and ``au:`` also compares given names and the other
    surname words (so the index answer of an author term is a superset)."""
    plain: bool = False
    """True when the text did not parse as a follow and was searched as plain words, all required."""
    note: str = ""
    """Why the text was searched as plain words: the parse error, in English (see ``error``)."""
    error: QueryError | None = None
    """That parse error, to be said in a reader's language (``error.said(t)``, ``error.excerpt()``)."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    fts5: str
    tsquery: str


def _has_author(node: Node) -> bool:
    if isinstance(node, Author):
        return True
    if isinstance(node, And | Or):
        return any(_has_author(c) for c in node.children)
    if isinstance(node, Not):
        return _has_author(node.child)
    return False


def _fts5_string(tokens: list[str]) -> str:
    # Tokens are [a-z0-9], so no '"' needs doubling; quoted anyway so no token reads as an operator.
    return '"' + " ".join(tokens) + '"'


def _meta(tokens: list[str]) -> _Compiled:
    unique = list(dict.fromkeys(tokens))
    fts5 = [f"{_META} : {_fts5_string([t])}" for t in unique]
    tsq = [f"{_lexeme(t)}:{_META_WEIGHT}" for t in unique]
    if len(unique) == 1:
        return _Compiled(fts5[0], tsq[0])
    return _Compiled("(" + " OR ".join(fts5) + ")", "(" + " | ".join(tsq) + ")")


def _compile(node: Node) -> _Compiled:
    """The index expression of ``node``: a superset of its papers, and exactly them without ``au:``."""
    if isinstance(node, Words):
        tokens = [token(t) for t in node.words]
        weight = _TSQUERY_WEIGHTS[node.field]
        # In a phrase each operand carries the weight: '<->' alone would accept any part of the text.
        tsq = " <-> ".join(f"{_lexeme(t)}:{weight}" for t in tokens)
        return _Compiled(
            f"{_FTS5_FIELD[node.field]} : {_fts5_string(tokens)}", f"({tsq})" if len(tokens) > 1 else tsq
        )
    if isinstance(node, Author):
        # Every reading shares the last surname word that Author.evaluate looks authors up by.
        return _meta([author_token(surname.split()[-1]) for surname, _ in node.readings])
    if isinstance(node, Category):
        return _meta([archive_token(node.category) if node.archive else category_token(node.category)])
    if isinstance(node, PaperId):
        return _meta([id_token(node.arxiv_id)])
    if isinstance(node, Or):
        for child in node.children:
            if isinstance(child, Not):
                raise SearchError(
                    f"NOT cannot stand inside OR in a search ('{node.canonical()}' would match almost every "
                    f"paper); put NOT outside the OR, e.g. '(a OR b) AND NOT c'"
                )
        parts = [_compile(c) for c in node.children]
        return _Compiled(
            "(" + " OR ".join(p.fts5 for p in parts) + ")", "(" + " | ".join(p.tsquery for p in parts) + ")"
        )
    if isinstance(node, And):
        positives = [c for c in node.children if not isinstance(c, Not)]
        negatives = [c.child for c in node.children if isinstance(c, Not)]
        if not positives:
            raise _only_not(node)
        pos = [_compile(c) for c in positives]
        # The NOT of a superset would drop papers that match, so an inexact negative is left to the
        # caller's check (the answer stays a superset); an exact one is searched.
        neg = [_compile(c) for c in negatives if not _has_author(c)]
        fts5 = pos[0].fts5 if len(pos) == 1 else "(" + " AND ".join(p.fts5 for p in pos) + ")"
        if neg:
            # FTS5's NOT is binary (a NOT b), so the negatives go together as one OR on its right.
            right = neg[0].fts5 if len(neg) == 1 else "(" + " OR ".join(n.fts5 for n in neg) + ")"
            fts5 = f"({fts5} NOT {right})"
        operands = [p.tsquery for p in pos] + [f"!{n.tsquery}" for n in neg]
        return _Compiled(fts5, "(" + " & ".join(operands) + ")")
    if isinstance(node, Not):
        raise _only_not(node)
    raise TypeError(f"unknown query node {node!r}")  # pragma: no cover - the parser makes no other nodes


def _only_not(node: Node) -> SearchError:
    return SearchError(
        f"'{node.canonical()}' has only NOT terms, and a search needs something to look for; "
        f"add a word or a field, e.g. 'graph AND {node.canonical()}'"
    )


def compile_search(text: str) -> SearchQuery:
    """Compile a search box's text: a follow (``core.follows.query``), else its plain words, all required.

    Text that does not parse as a follow (``C++ (``, an unbalanced quote, an unknown field) is searched
    as the words of the text (``core.follows.normalise.words`` after ``strip_tex``, as a bare word is read),
    each in
    the title or the abstract, with ``plain=True`` and the parse error in ``note`` and ``error``.
    Raises :class:`SearchError` for text with no words, text over ``core.follows.query.MAX_QUERY_CHARS`` or
    with
    more than ``MAX_TERMS`` plain words, and follows the index cannot search (only NOT terms, NOT inside
    OR).
    """
    bare_id = _BARE_ID.fullmatch(text.strip())
    if bare_id:
        # A pasted arXiv id (``2411.17700``, ``arXiv:2411.17700v2``) means that paper, not its digits as
        # words: a follow needs ``id:``, a search box should not.
        text = f"id:{bare_id[1]}"
    try:
        query = parse(text)
    except QueryError as err:
        if len(text) > MAX_QUERY_CHARS:
            raise SearchError(f"search too long: the limit is {MAX_QUERY_CHARS} characters") from err
        found = list(dict.fromkeys(words(strip_tex(text))))
        if not found:
            raise SearchError(
                f'nothing to search for ({err}); write a word, a "phrase" or a field such as cat:cs.LG'
            ) from err
        if len(found) > MAX_TERMS:
            raise SearchError(f"too many words to search for: the limit is {MAX_TERMS}") from err
        nodes = tuple(Words("any", (w,)) for w in found)
        plain_query = Query(nodes[0] if len(nodes) == 1 else And(nodes))
        compiled = _compile(plain_query.root)
        return SearchQuery(
            plain_query, compiled.fts5, compiled.tsquery, exact=True, plain=True, note=str(err), error=err
        )
    compiled = _compile(query.root)
    return SearchQuery(query, compiled.fts5, compiled.tsquery, exact=not _has_author(query.root))


__all__ = [
    "FTS5_COLUMNS",
    "MAX_TOKEN_CHARS",
    "TSVECTOR_MAX_POSITION",
    "TSVECTOR_MAX_POSITIONS",
    "SearchDoc",
    "SearchError",
    "SearchQuery",
    "archive_token",
    "author_token",
    "category_token",
    "compile_search",
    "id_token",
    "paper_doc",
    "search_doc",
    "token",
    "tsvector_literal",
]
