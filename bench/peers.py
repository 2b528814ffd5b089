"""Two off-the-shelf search engines matching the same follows against the same day: the peers of ``Matcher``.

Each peer indexes the day's papers (a tantivy index in RAM; an in-memory SQLite FTS5 table) and runs one
query per distinct follow over it, the way one would match follows with a search engine. Follows are
translated from their parsed :class:`core.follows.query.Query`, term by term:

* ``cat:cs.LG`` / ``cat:cs.*`` / ``id:...``: one exact token in a ``cats`` field that holds the paper's
  canonical categories, their archives and its id;
* ``au:"Zeng Li"``: the phrase ``zeng li`` (given names, then surname) in an ``authors`` field, one value
  per author (FTS5: authors separated by a token no name has); ``au:Li``: the surname alone;
* words and phrases: a term or phrase in ``title``, ``abstract`` or either, as the field says;
* ``AND``, ``OR``, ``NOT``: the engine's boolean operators (a query without a positive term is "every paper
  except ...": tantivy's ``all_query``, FTS5 a token every paper carries).

Where the semantics differ from PaperTrail's (so the peers return somewhat different matches; the
benchmark counts how many (query, paper) pairs agree): the peers fold case and accents but not plurals
(``models`` is not ``model``), do not strip TeX, and know none of the name rules (``au:"Z. Li"`` is the
phrase ``z li``: it misses "Zeng Li"; "Li, Zeng" typed in comma form is turned into ``zeng li`` here, which
is more than an engine would do by itself; no particles, hyphenated or run-together given names). Hyphens
split words in all three, so ``multi-agent`` is the phrase ``multi agent`` everywhere. And the peers give no
reasons, only which papers match.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

import tantivy

from core.follows.normalise import words
from core.follows.query import And, Author, Category, Node, Not, Or, PaperId, Query, Words
from core.follows.taxonomy import archive_of, canonical_category
from core.values import PaperIn

_EVERY = "zzevery"
"""A token every paper carries in ``cats``, for queries with no positive term."""
_AUTHOR_GAP = "zzgap"
"""Put between two authors in FTS5's ``authors`` column, so that a phrase never spans two names."""


def _token(value: str) -> str:
    """A category, archive or id as one token of letters and digits (FTS5's tokenizer splits on ``.``)."""
    return re.sub(r"[^a-z0-9]", lambda m: f"x{ord(m.group()):x}", value.lower())


def _cat_tokens(paper: PaperIn) -> list[str]:
    tokens = {f"c{_token(canonical_category(c))}" for c in paper.categories}
    tokens.update(f"a{_token(archive_of(c))}" for c in paper.categories)
    tokens.add(f"i{_token(paper.arxiv_id.strip())}")
    tokens.add(_EVERY)
    return sorted(tokens)


def _leaf_token(node: Category | PaperId) -> str:
    if isinstance(node, PaperId):
        return f"i{_token(node.arxiv_id)}"
    return f"{'a' if node.archive else 'c'}{_token(node.category)}"


def _author_phrases(node: Author) -> list[list[str]]:
    """Each reading of the name as the words an author field would hold: given names, then surname."""
    return [[w for name in given for w in words(name)] + words(surname) for surname, given in node.readings]


class Tantivy:
    """The day in a tantivy index held in RAM; follows as prebuilt ``tantivy.Query`` objects."""

    def __init__(self, papers: Sequence[PaperIn]) -> None:
        builder = tantivy.SchemaBuilder()
        for field in ("title", "abstract", "authors"):
            builder.add_text_field(field, tokenizer_name="fold")
        builder.add_text_field("cats", tokenizer_name="raw", index_option="basic")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema)
        self.index.register_tokenizer(
            "fold",
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .build(),
        )
        writer = self.index.writer(num_threads=1)
        for paper in papers:
            doc = tantivy.Document()
            doc.add_text("title", paper.title)
            doc.add_text("abstract", paper.abstract)
            for author in paper.authors:
                doc.add_text("authors", author)
            for token in _cat_tokens(paper):
                doc.add_text("cats", token)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.size = len(papers)

    def compile(self, query: Query) -> tantivy.Query:
        """The follow as a tantivy query."""
        return self._node(query.root)

    def _words(self, field: str, terms: list[str]) -> tantivy.Query:
        if len(terms) == 1:
            return tantivy.Query.term_query(self.schema, field, terms[0])
        phrase: list[str | tuple[int, str]] = list(terms)
        return tantivy.Query.phrase_query(self.schema, field, phrase)

    def _any(self, queries: list[tantivy.Query]) -> tantivy.Query:
        if len(queries) == 1:
            return queries[0]
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in queries])

    def _node(self, node: Node) -> tantivy.Query:
        if isinstance(node, Words):
            terms = [w for d in node.display for w in words(d)]
            fields = {"any": ("title", "abstract"), "ti": ("title",), "abs": ("abstract",)}[node.field]
            return self._any([self._words(f, terms) for f in fields])
        if isinstance(node, Author):
            return self._any([self._words("authors", p) for p in _author_phrases(node)])
        if isinstance(node, Category | PaperId):
            return tantivy.Query.term_query(self.schema, "cats", _leaf_token(node))
        if isinstance(node, Or):
            return self._any([self._node(c) for c in node.children])
        children = node.children if isinstance(node, And) else (node,)
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for child in children:
            if isinstance(child, Not):
                clauses.append((tantivy.Occur.MustNot, self._node(child.child)))
            else:
                clauses.append((tantivy.Occur.Must, self._node(child)))
        if all(occur == tantivy.Occur.MustNot for occur, _ in clauses):
            clauses.append((tantivy.Occur.Must, tantivy.Query.all_query()))
        return tantivy.Query.boolean_query(clauses)

    def match(self, query: tantivy.Query) -> list[int]:
        """The day's papers (index order) that ``query`` matches."""
        return [address.doc for _, address in self.searcher.search(query, limit=self.size).hits]


class Fts5:
    """The day in an in-memory SQLite FTS5 table; follows as MATCH expressions."""

    def __init__(self, papers: Sequence[PaperIn]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE day USING fts5(title, abstract, authors, cats,"
            " tokenize = 'unicode61 remove_diacritics 2')"
        )
        self.db.executemany(
            "INSERT INTO day(rowid, title, abstract, authors, cats) VALUES (?, ?, ?, ?, ?)",
            [
                (n, p.title, p.abstract, f" {_AUTHOR_GAP} ".join(p.authors), " ".join(_cat_tokens(p)))
                for n, p in enumerate(papers)
            ],
        )
        self.db.execute("INSERT INTO day(day) VALUES ('optimize')")
        self.db.commit()

    def compile(self, query: Query) -> str:
        """The follow as an FTS5 MATCH expression."""
        return self._node(query.root)

    def _node(self, node: Node) -> str:
        if isinstance(node, Words):
            phrase = '"' + " ".join(w for d in node.display for w in words(d)) + '"'
            columns = {"any": "{title abstract}", "ti": "title", "abs": "abstract"}[node.field]
            return f"{columns} : {phrase}"
        if isinstance(node, Author):
            phrases = ['authors : "' + " ".join(p) + '"' for p in _author_phrases(node)]
            return phrases[0] if len(phrases) == 1 else "(" + " OR ".join(phrases) + ")"
        if isinstance(node, Category | PaperId):
            return f'cats : "{_leaf_token(node)}"'
        if isinstance(node, Or):
            return "(" + " OR ".join(self._node(c) for c in node.children) + ")"
        children = node.children if isinstance(node, And) else (node,)
        positive = [self._node(c) for c in children if not isinstance(c, Not)]
        negative = [self._node(c.child) for c in children if isinstance(c, Not)]
        # FTS5's NOT is binary ("a NOT b") and binds tighter than AND: parenthesise both sides.
        expression = "(" + " AND ".join(positive or [f'cats : "{_EVERY}"']) + ")"
        if negative:
            expression += " NOT (" + " OR ".join(negative) + ")"
        return expression

    def match(self, expression: str) -> list[int]:
        """The day's papers (rowid = index in the day) that ``expression`` matches."""
        return [row for (row,) in self.db.execute("SELECT rowid FROM day WHERE day MATCH ?", (expression,))]
