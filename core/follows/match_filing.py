"""The matcher's compiled index: what each key and each atom has filed under it, by shape.

``core.follows.match.Matcher`` compiles every distinct query into a :data:`Program` over interned atoms (the
leaves of
the queries). For each paper key it keeps a :class:`Probes` (how the atoms filed under that key are decided
against a paper), and for each atom a :class:`Filed` (the queries that atom sets off when it holds, sorted
into tables by the shape of the query, so that the per-paper scan needs no interpreter for common shapes).
This module holds those tables and the rules that pick a table; the scan itself is ``core.follows.match`` and
``core.follows.match_scan``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, TypeVar

from core.follows.normalise import given_letters
from core.follows.query import Author, Key, Node, PaperText, Words
from core.reasons import Reason
from core.values import PaperIn

Reasons = tuple[Reason, ...]

# A compiled query: an atom number, or (operator, operands) with the operands compiled the same way.
AND, OR, NOT = 0, 1, 2
Program = int | tuple[int, tuple["Program", ...]]
Lookup = tuple[tuple[str, ...], Reasons | None, Reasons | None]
"""A ``Words`` term decided by lookup: its terms, its reasons when in the title, when in the abstract."""

_K = TypeVar("_K")
_V = TypeVar("_V")


class Probes:
    """The atoms filed under one key, by how they are evaluated against a paper that has the key.

    Each shortcut only skips evaluations that would fail, or gives what the evaluation would give:

    * single-word ``Words`` terms are decided by a lookup (see :func:`term_lookup`): an atom holds with
      its title reasons when the key's word is a term of the title, else with its abstract reasons when
      it is one of the abstract (a field the term does not search has no reasons). So that a paper adds
      all of a word's atoms at once (``dict.update``), they are kept by outcome: ``in_title`` (the atoms
      that search the title), ``in_abstract`` (those that search the abstract) and ``abstract_only`` (those
      that search only the abstract, for a word in both fields). Two-word phrases are looked up the same
      way, among the paper's pairs of consecutive terms, in ``Matcher._phrase_pairs``;
    * ``phrases``: ``node.evaluate``, called only when all ``required`` keys (the phrase's terms) are the
      paper's: a phrase occurs only where each of its terms does (``Words.anchors`` relies on it too);
    * ``by_letter``: author queries whose every reading has given names, filed under the surname key and
      then under the letters of :func:`core.follows.normalise.given_letters` (letter -> atom -> (node, filed
      under
      more than one letter)). A paper evaluates only those filed under a letter of one of its authors with
      that surname: the name rules never pair given names whose letters do not meet. The whole table of
      ``tests/test_names.py`` goes through the index in ``tests/test_match.py`` to hold this true;
    * ``nodes``: ``node.evaluate`` for every other leaf (categories, ids, bare surnames).
    """

    __slots__ = ("abstract_only", "by_letter", "in_abstract", "in_title", "nodes", "phrases")

    def __init__(self) -> None:
        self.in_title: dict[int, Reasons] = {}
        self.in_abstract: dict[int, Reasons] = {}
        self.abstract_only: dict[int, Reasons] = {}
        self.phrases: dict[int, tuple[Node, frozenset[Key]]] = {}
        self.by_letter: dict[str, dict[int, tuple[Node, bool]]] = {}
        self.nodes: dict[int, Node] = {}

    def __bool__(self) -> bool:
        return bool(self.in_title or self.in_abstract or self.phrases or self.by_letter or self.nodes)

    def place(self, atom: int, node: Node, lookup: Lookup | None, *, add: bool) -> None:
        """File (``add``) or unfile ``atom``, whose leaf is ``node`` and whose term lookup is ``lookup``."""
        if not add:
            for table in (self.in_title, self.in_abstract, self.abstract_only, self.phrases, self.nodes):
                table.pop(atom, None)
            for letter in [letter for letter, atoms in self.by_letter.items() if atom in atoms]:
                unfile(self.by_letter, letter, atom)
            return
        if lookup is not None:
            _, title_reasons, abstract_reasons = lookup
            if title_reasons is not None:
                self.in_title[atom] = title_reasons
            if abstract_reasons is not None:
                self.in_abstract[atom] = abstract_reasons
                if title_reasons is None:
                    self.abstract_only[atom] = abstract_reasons
        elif type(node) is Words:
            self.phrases[atom] = (node, frozenset(("w", w) for w in node.words))
        elif type(node) is Author and (letters := _author_letters(node)) is not None:
            for letter in letters:
                self.by_letter.setdefault(letter, {})[atom] = (node, len(letters) > 1)
        else:
            self.nodes[atom] = node


class Clause(NamedTuple):
    """An AND of atoms, NOT atoms and ORs of atoms, or one OR of atoms: the shape of most compound follows.

    It holds when all ``required`` atoms hold, no ``forbidden`` one does, and each of ``alternatives`` has
    one that holds. ``layout`` lists the positive operands in query order (an atom, or the atoms of an OR):
    the order of the reasons; without alternatives it equals ``required``. ``shared``: the slot is filed
    under several trigger atoms, so a paper may reach it more than once.
    """

    required: tuple[int, ...]
    forbidden: tuple[int, ...]
    alternatives: tuple[tuple[int, ...], ...]
    layout: tuple[int | tuple[int, ...], ...]
    shared: bool


class Filed:
    """What one atom triggers when it holds for a paper, by the shape of the query.

    The common shapes get their own table, so that the hot loop needs no interpreter for them (the query
    that is the atom alone is in ``Matcher._own`` instead): ``atom AND NOT other``, an OR of atoms,
    ``atom AND partner``; then any other clause, with or without a partner, and programs of any other
    shape.
    """

    __slots__ = ("anyof", "clauses", "leads", "paired", "pairs", "programs", "solo")

    def __init__(self) -> None:
        self.solo: dict[int, tuple[int, int]] = {}
        """Slot -> (other, forbidden), -1 for none, for queries that hold with this atom's reasons unless
        ``other`` or ``forbidden`` holds: ``atom AND NOT forbidden``, and ``(other OR atom)``, maybe
        ``AND NOT forbidden``, through its second operand (the first one produces it when both hold)."""
        self.leads: dict[int, tuple[int, int]] = {}
        """Slot -> (other, forbidden or -1), for ``(atom OR other)``, maybe ``AND NOT forbidden``."""
        self.anyof: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        """Slot -> (atoms, forbidden), for an OR of atoms (this one among them) AND NOT each forbidden."""
        self.pairs: dict[int, dict[int, tuple[bool, int]]] = {}
        """Partner -> slot -> (whether this atom comes first, forbidden or -1), for ``atom AND partner``,
        maybe ``AND NOT forbidden``."""
        self.clauses: dict[int, Clause] = {}
        """Slot -> clause, for the other clauses that require no atom besides the trigger."""
        self.paired: dict[int, dict[int, Clause]] = {}
        """Partner -> slot -> clause, for the other clauses that also require the partner."""
        self.programs: dict[int, tuple[Program, bool]] = {}
        """Slot -> (program, filed under several atoms), for queries of any other shape."""

    def __bool__(self) -> bool:
        tables = (self.solo, self.leads, self.anyof, self.pairs, self.clauses, self.paired)
        return any(tables) or bool(self.programs)

    def place(self, atom: int, slot: int, program: Program, shared: bool, *, add: bool) -> None:
        """File (``add``) or unfile ``slot``, whose compiled query is ``program``, under this atom."""
        assert not isinstance(program, int), "single-atom queries are in Matcher._own"
        clause = _clause(program, shared)
        if clause is None:
            _place(self.programs, slot, (program, shared), add)
            return
        required, forbidden, alternatives, _, _ = clause
        if not shared and required == (atom,) and len(forbidden) == 1 and not alternatives:
            _place(self.solo, slot, (-1, forbidden[0]), add)
        elif not required and len(alternatives) == 1 and len(alternatives[0]) == 2 and len(forbidden) < 2:
            first, second = alternatives[0]
            excluded = forbidden[0] if forbidden else -1
            if atom == first:
                _place(self.leads, slot, (second, excluded), add)
            else:
                _place(self.solo, slot, (first, excluded), add)
        elif not required and len(alternatives) == 1:
            _place(self.anyof, slot, (alternatives[0], forbidden), add)
        elif (partner := _partner(clause, atom)) is None:
            _place(self.clauses, slot, clause, add)
        elif not shared and len(required) == 2 and len(forbidden) < 2 and not alternatives:
            excluded = forbidden[0] if forbidden else -1
            _place(self.pairs.setdefault(partner, {}), slot, (required[0] == atom, excluded), add)
            if not self.pairs[partner]:
                del self.pairs[partner]
        else:
            _place(self.paired.setdefault(partner, {}), slot, clause, add)
            if not self.paired[partner]:
                del self.paired[partner]


def term_lookup(node: Words) -> Lookup | None:
    """``(terms, reasons in the title, reasons in the abstract)`` if ``node`` is decided by a lookup.

    A word holds exactly when its term is among the title's or the abstract's terms, and a two-word phrase
    when its terms are consecutive there. The reasons are what ``Words.evaluate`` gives on papers made of
    just those words, and the lookup is used only if that evaluation behaves as expected (also on a paper
    without the word, or with the two words apart); longer phrases (None) are evaluated in full.
    """
    terms = node.words
    if len(terms) > 2:
        return None
    text = " ".join(terms)
    in_title = node.evaluate(_one_text_paper(text, title=True))
    in_abstract = node.evaluate(_one_text_paper(text, title=False))
    apart = node.evaluate(_one_text_paper(f"{terms[-1]} {terms[0]}" if len(terms) == 2 else "", title=True))
    expected = {"any": (True, True), "ti": (True, False), "abs": (False, True)}.get(node.field)
    if apart is not None or (in_title is not None, in_abstract is not None) != expected:
        return None
    return terms, in_title, in_abstract


def _author_letters(node: Author) -> frozenset[str] | None:
    """The letters (``core.follows.normalise.given_letters``) of every reading of ``node``; None if one has
    none."""
    letters: set[str] = set()
    for _, given in node.readings:
        found = given_letters(given)
        if found is None:
            return None
        letters |= found
    return frozenset(letters)


@lru_cache(maxsize=4096)  # the variants of one word (word, ti:word, abs:word) try the same papers
def _one_text_paper(text: str, *, title: bool) -> PaperText:
    return PaperText.of(
        PaperIn(
            arxiv_id="0000.00000",
            version=1,
            title=text if title else "",
            abstract="" if title else text,
            authors=(),
            categories=(),
        )
    )


def _clause(program: tuple[int, tuple[Program, ...]], shared: bool) -> Clause | None:
    """``program`` as a :class:`Clause`, or None if it has another shape."""
    operator, operands = program
    if operator == OR:
        atoms = tuple(op for op in operands if isinstance(op, int))
        return Clause((), (), (atoms,), (atoms,), shared) if len(atoms) == len(operands) else None
    if operator != AND:
        return None
    required: list[int] = []
    forbidden: list[int] = []
    alternatives: list[tuple[int, ...]] = []
    layout: list[int | tuple[int, ...]] = []
    for operand in operands:
        if isinstance(operand, int):
            required.append(operand)
            layout.append(operand)
            continue
        inner_operator, inner = operand
        atoms = tuple(op for op in inner if isinstance(op, int))
        if len(atoms) != len(inner):
            return None
        if inner_operator == NOT:
            forbidden.append(atoms[0])
        elif inner_operator == OR:
            alternatives.append(atoms)
            layout.append(atoms)
        else:  # pragma: no cover - the parser flattens an AND inside an AND
            return None
    return Clause(tuple(required), tuple(forbidden), tuple(alternatives), tuple(layout), shared)


def _partner(clause: Clause, trigger: int) -> int | None:
    """A required atom of ``clause`` other than ``trigger``, to file the clause under; None if none."""
    return next((atom for atom in clause.required if atom != trigger), None)


def _place(table: dict[int, _V], slot: int, value: _V, add: bool) -> None:
    if add:
        table[slot] = value
    else:
        del table[slot]


def unfile(table: dict[_K, dict[int, _V]], key: _K, item: int) -> None:
    """Delete ``table[key][item]``, and ``table[key]`` when that leaves it empty."""
    filed = table[key]
    del filed[item]
    if not filed:
        del table[key]
