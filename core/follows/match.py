"""Matcher: all active follows compiled into one index; matching costs in the paper's text, not in follows.

The index has three layers, all updated in place by :meth:`Matcher.add` and :meth:`Matcher.remove`:

* **Slots**: identical queries (``Query`` equality, so ``cat:CS.dc`` = ``cat:cs.DC``) share one slot, which
  holds the follow ids (ascending) and the query compiled over atoms. The last follow to leave a slot takes
  it out of the index.
* **Atoms**: the leaves of all queries (``cat:cs.DC``, ``au:"Zeng Li"``, ``ti:"policy lag"``, ...), interned
  across queries and filed under their anchor keys (``Node.anchors``). For a paper only the atoms filed
  under its own keys (``PaperText.keys``) are evaluated, each once; all others are false unseen, because
  anchors are necessary conditions. Words and two-word phrases are decided by lookups among the paper's
  terms, and author queries are skipped when no author of the paper could fit them (see :class:`Probes`).
* **Triggers**: each slot is filed under atoms of which at least one holds whenever the query holds: the
  atom itself for a single term, one operand's trigger for an AND (the operand that ``Query.anchors`` picks
  as the most selective), the union of the operands' triggers for an OR. A slot is looked at only when one
  of its trigger atoms holds, and then only atom results are looked up. Slots that also require a second
  atom are filed under the pair, so that a popular trigger (``cat:cs.LG``) does not visit every
  ``cat:cs.LG AND <word>`` follow. Queries without a positive term (``NOT cat:cs.CV``) have no trigger and
  are evaluated for every paper.

The work per paper is the paper's keys, the atoms filed under them, and the distinct queries triggered by
atoms that hold. :meth:`Matcher.match_groups` returns one entry per matching distinct query, so its cost does
not grow with the number of follows that share a query; :meth:`Matcher.match` expands the groups into one
``(follow_id, reasons)`` pair per follow, which costs in proportion to the matches.

This module holds, in order: the tables filed under keys and atoms (:class:`Probes`, :class:`Filed`) and the
rules that pick a table by the shape of a query, so that the per-paper scan needs no interpreter for common
shapes; evaluating compiled queries from atom results (:func:`run_program`, and shortcuts for an AND of two
atoms and a clause with ORs, each giving the reasons ``Query.evaluate`` would give, in query order); and
the :class:`Matcher`, which keeps the index and scans a paper.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import pairwise, repeat
from operator import itemgetter
from typing import NamedTuple, TypeVar

from core.follows.normalise import given_letters
from core.follows.query import And, Author, Key, Node, Not, Or, PaperText, Query, Words
from core.reasons import Reason
from core.values import PaperIn

# -------------------------------------------------------------------------------------------------------
# The compiled index: what each key and each atom has filed under it, by shape.

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


# -------------------------------------------------------------------------------------------------------
# Evaluating the compiled queries for one paper from the results of its atoms.

Group = tuple[tuple[int, ...], Reasons]
"""The follow ids (ascending) that share one matching query, and the reasons of that query."""
_Get = Callable[[int], Reasons | None]


def with_alternatives(
    alternatives: tuple[tuple[int, ...], ...],
    layout: tuple[int | tuple[int, ...], ...],
    held: dict[int, Reasons],
) -> Reasons | None:
    """Check the ORs of a clause whose other conditions hold; its reasons in query order, or None."""
    for atoms in alternatives:
        for atom in atoms:
            if atom in held:
                break
        else:
            return None
    reasons: Reasons = ()
    get = held.get
    for item in layout:
        if isinstance(item, int):
            reasons += held[item]
            continue
        for atom in item:
            found = get(atom)
            if found is not None:
                reasons += found
    return reasons


def pair_groups(
    slots: dict[int, tuple[bool, int]],
    first: Reasons,
    second: Reasons,
    held: dict[int, Reasons],
    snapshots: list[tuple[int, ...] | None],
    snapshot: Callable[[int], tuple[int, ...]],
) -> list[Group]:
    """The groups of ``atom AND partner`` queries whose two atoms hold and whose forbidden atom does not,
    with their reasons in query order."""
    in_order, reversed_order = join_reasons(first, second), join_reasons(second, first)
    return [
        (snapshots[slot] or snapshot(slot), in_order if atom_first else reversed_order)
        for slot, (atom_first, forbidden) in slots.items()
        if forbidden not in held
    ]


def join_reasons(first: Reasons, second: Reasons) -> Reasons:
    """``first + second`` with repeated reasons once, as ``Query.evaluate`` gives them."""
    if len(first) == 1 and len(second) == 1:
        return first if first == second else first + second
    return tuple(dict.fromkeys(first + second))


def dedupe(reasons: Reasons) -> Reasons:
    """Repeated reasons once, in first-seen order, as ``Query.evaluate`` gives them."""
    return reasons if len(reasons) < 2 else tuple(dict.fromkeys(reasons))


def run_program(program: Program, held: _Get) -> Reasons | None:
    """Evaluate a compiled query from atom results as ``Node.evaluate`` does (reasons not yet deduped)."""
    if isinstance(program, int):
        return held(program)
    operator, operands = program
    if operator == AND:
        reasons: Reasons = ()
        for operand in operands:
            found = held(operand) if isinstance(operand, int) else run_program(operand, held)
            if found is None:
                return None
            reasons += found
        return reasons
    if operator == OR:
        matched: Reasons | None = None
        for operand in operands:
            found = held(operand) if isinstance(operand, int) else run_program(operand, held)
            if found is not None:
                matched = found if matched is None else matched + found
        return matched
    return () if run_program(operands[0], held) is None else None


# -------------------------------------------------------------------------------------------------------
# The matcher: the index kept in place, and the scan of one paper.

_first = itemgetter(0)


class Matcher:
    """An index over ``(follow_id, query)`` pairs, updated in place as follows are added and removed.

    Not thread-safe: guard :meth:`add`, :meth:`remove` and the match calls with one lock if threads share it.
    """

    def __init__(self, follows: Iterable[tuple[int, Query]] = ()) -> None:
        """Index ``follows``; a follow id may appear only once."""
        # Slots, one per distinct query; freed numbers are reused so that the lists stay dense.
        self._slot_of: dict[Query, int] = {}
        self._queries: list[Query | None] = []
        self._programs: list[Program] = []
        self._triggers: list[tuple[int, ...] | None] = []  # the atoms a slot is filed under; None: always
        self._members: list[list[int]] = []
        self._snapshots: list[tuple[int, ...] | None] = []  # tuple copy of _members, rebuilt on demand
        self._free_slots: list[int] = []
        self._slot_of_follow: dict[int, int] = {}

        # Atoms: interned leaves, filed under their anchor keys.
        self._atom_of: dict[Node, int] = {}
        self._atoms: list[Node | None] = []
        self._atom_keys: list[frozenset[Key] | None] = []
        self._atom_refs: list[int] = []  # occurrences in slot programs; the atom leaves at zero
        self._free_atoms: list[int] = []
        self._probes: dict[Key, Probes] = {}
        self._phrase_pairs: dict[tuple[str, str], dict[int, tuple[Reasons | None, Reasons | None]]] = {}
        self._unanchored: dict[int, Node] = {}

        # Triggers: what each atom sets off when it holds, and the slots evaluated for every paper.
        self._own: dict[int, int] = {}  # atom -> the slot of the query that is that atom alone
        self._filed: dict[int, Filed] = {}
        self._always: dict[int, Program] = {}

        self.last_candidates = 0
        """Distinct queries looked at by the last match call (a diagnostic, not thread-safe)."""
        self.last_atoms = 0
        """Atoms (query leaves) evaluated in full by the last match call; word lookups are not counted."""

        for follow_id, query in follows:
            if follow_id in self._slot_of_follow:
                raise ValueError(f"follow id {follow_id} appears twice")
            self.add(follow_id, query)

    # -- maintenance ------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of follows indexed."""
        return len(self._slot_of_follow)

    @property
    def distinct_queries(self) -> int:
        """Number of distinct queries (slots) indexed."""
        return len(self._slot_of)

    @property
    def distinct_atoms(self) -> int:
        """Number of distinct leaf terms (``cat:cs.DC``, ``au:"Zeng Li"``, ...) across all queries."""
        return len(self._atom_of)

    @property
    def always_evaluated(self) -> int:
        """Number of distinct queries without a positive anchor, evaluated for every paper."""
        return len(self._always)

    def __contains__(self, follow_id: object) -> bool:
        """True if ``follow_id`` is indexed."""
        return follow_id in self._slot_of_follow

    def add(self, follow_id: int, query: Query) -> None:
        """Index one follow; raise ``ValueError`` if ``follow_id`` is already indexed.

        To change a follow's query, :meth:`remove` it and add it again.
        """
        if follow_id in self._slot_of_follow:
            raise ValueError(f"follow id {follow_id} is already indexed")
        slot = self._slot_of.get(query)
        if slot is None:
            slot = self._new_slot(query)
        members = self._members[slot]
        if not members or members[-1] < follow_id:
            members.append(follow_id)  # the usual case: ids grow as follows are created
        else:
            bisect.insort(members, follow_id)
        self._snapshots[slot] = None
        self._slot_of_follow[follow_id] = slot

    def remove(self, follow_id: int) -> None:
        """Drop one follow; raise ``KeyError`` if it is not indexed.

        The last follow of a query takes the query, and the atoms no other query uses, out of the index.
        """
        slot = self._slot_of_follow.pop(follow_id)
        members = self._members[slot]
        del members[bisect.bisect_left(members, follow_id)]
        self._snapshots[slot] = None
        if not members:
            self._drop_slot(slot)

    def _new_slot(self, query: Query) -> int:
        program = self._compile(query.root)
        trigger = self._trigger(query.root, program)
        if self._free_slots:
            slot = self._free_slots.pop()
            self._queries[slot] = query
            self._programs[slot] = program
            self._triggers[slot] = trigger
        else:
            slot = len(self._queries)
            self._queries.append(query)
            self._programs.append(program)
            self._triggers.append(trigger)
            self._members.append([])
            self._snapshots.append(None)
        self._slot_of[query] = slot
        if trigger is None:
            self._always[slot] = program
            return slot
        if isinstance(program, int):
            self._own[program] = slot
            return slot
        for atom in trigger:
            filed = self._filed.get(atom)
            if filed is None:
                filed = self._filed[atom] = Filed()
            filed.place(atom, slot, program, len(trigger) > 1, add=True)
        return slot

    def _drop_slot(self, slot: int) -> None:
        query = self._queries[slot]
        assert query is not None
        del self._slot_of[query]
        program, trigger = self._programs[slot], self._triggers[slot]
        if trigger is None:
            del self._always[slot]
        elif isinstance(program, int):
            del self._own[program]
        else:
            for atom in trigger:
                filed = self._filed[atom]
                filed.place(atom, slot, program, len(trigger) > 1, add=False)
                if not filed:
                    del self._filed[atom]
        self._release(program)
        self._queries[slot] = None
        self._programs[slot] = -1
        self._triggers[slot] = None
        self._free_slots.append(slot)

    def _compile(self, node: Node) -> Program:
        """Turn a query tree into a program over interned atoms, taking one reference per leaf."""
        if isinstance(node, And):
            return (AND, tuple(self._compile(child) for child in node.children))
        if isinstance(node, Or):
            return (OR, tuple(self._compile(child) for child in node.children))
        if isinstance(node, Not):
            return (NOT, (self._compile(node.child),))
        atom = self._atom_of.get(node)
        if atom is None:
            atom = self._new_atom(node)
        self._atom_refs[atom] += 1
        return atom

    def _new_atom(self, node: Node) -> int:
        keys = node.anchors()
        if self._free_atoms:
            atom = self._free_atoms.pop()
            self._atoms[atom] = node
            self._atom_keys[atom] = keys
            self._atom_refs[atom] = 0
        else:
            atom = len(self._atoms)
            self._atoms.append(node)
            self._atom_keys.append(keys)
            self._atom_refs.append(0)
        self._atom_of[node] = atom
        lookup = term_lookup(node) if type(node) is Words else None
        if lookup is not None and len(lookup[0]) == 2:
            first, second = lookup[0]
            self._phrase_pairs.setdefault((first, second), {})[atom] = lookup[1:]
        elif keys is None:
            self._unanchored[atom] = node
        else:
            for key in keys:
                probes = self._probes.get(key)
                if probes is None:
                    probes = self._probes[key] = Probes()
                probes.place(atom, node, lookup, add=True)
        return atom

    def _release(self, program: Program) -> None:
        """Drop the references :meth:`_compile` took; an atom no query uses leaves the index."""
        if not isinstance(program, int):
            for operand in program[1]:
                self._release(operand)
            return
        atom = program
        self._atom_refs[atom] -= 1
        if self._atom_refs[atom]:
            return
        node = self._atoms[atom]
        assert node is not None
        del self._atom_of[node]
        keys = self._atom_keys[atom]
        pair = tuple(node.words[:2]) if type(node) is Words else ()
        if len(pair) == 2 and atom in self._phrase_pairs.get(pair, ()):
            unfile(self._phrase_pairs, pair, atom)
        elif keys is None:
            del self._unanchored[atom]
        else:
            for key in keys:
                probes = self._probes[key]
                probes.place(atom, node, None, add=False)
                if not probes:
                    del self._probes[key]
        self._atoms[atom] = None
        self._atom_keys[atom] = None
        self._free_atoms.append(atom)

    def _trigger(self, node: Node, program: Program) -> tuple[int, ...] | None:
        """Atoms of which at least one holds whenever ``node`` holds; None if there is no such set."""
        if isinstance(program, int):
            return None if self._atom_keys[program] is None else (program,)
        operator, operands = program
        if operator == NOT:
            return None
        assert isinstance(node, And | Or)
        found = [self._trigger(child, op) for child, op in zip(node.children, operands, strict=True)]
        if operator == OR:
            if any(t is None for t in found):
                return None
            return tuple(dict.fromkeys(atom for t in found if t is not None for atom in t))
        # AND: any operand's trigger will do. Take the operand whose anchors the query language picks as
        # the most selective (only speed depends on this choice), else the smallest trigger.
        known = [(child, t) for child, t in zip(node.children, found, strict=True) if t is not None]
        if not known:
            return None
        best = node.anchors()
        for child, t in known:
            if child.anchors() == best:
                return t
        return min((t for _, t in known), key=len)

    # -- matching ---------------------------------------------------------------------------------------

    def match_groups(self, paper: PaperIn | PaperText) -> list[Group]:
        """Return ``(follow_ids, reasons)`` for every distinct query that matches ``paper``.

        ``follow_ids`` is an ascending tuple of the follows that share the query, and ``reasons`` are what
        ``Query.evaluate`` gives; groups come in no particular order and never share a follow id. The cost
        grows with the paper's text and the distinct queries it matches, not with the follows behind them.
        """
        text = paper if isinstance(paper, PaperText) else PaperText.of(paper)
        held = self._held_atoms(text)
        held_atoms = held.keys()
        get = held.get
        groups: list[Group] = []
        seen: set[int] = set()  # slots filed under several atoms, already looked at for this paper
        candidates = 0
        table = self._filed
        snapshots, snapshot = self._snapshots, self._snapshot
        # Single-term queries, the most common kind, produced in one comprehension.
        own = self._own
        found_own = [
            (snapshots[slot] or snapshot(slot), held[atom])
            for atom in own.keys() & held_atoms
            for slot in (own[atom],)
        ]
        candidates += len(found_own)
        groups += found_own
        for atom in table.keys() & held_atoms:
            filed = table[atom]
            atom_reasons = held[atom]
            solo = filed.solo
            if solo:
                candidates += len(solo)
                groups += [
                    (snapshots[slot] or snapshot(slot), atom_reasons)
                    for slot, (other, forbidden) in solo.items()
                    if other not in held and forbidden not in held
                ]
            # An OR of two atoms is produced through its first operand that holds: no seen-set needed.
            leads = filed.leads
            if leads:
                candidates += len(leads)
                groups += [
                    (
                        snapshots[slot] or snapshot(slot),
                        atom_reasons if (found := get(other)) is None else join_reasons(atom_reasons, found),
                    )
                    for slot, (other, forbidden) in leads.items()
                    if forbidden not in held
                ]
            for slot, (atoms, forbidden_atoms) in filed.anyof.items():
                if slot in seen:  # reached through an earlier atom of the OR
                    continue
                seen.add(slot)
                candidates += 1
                for other in forbidden_atoms:
                    if other in held:
                        break
                else:
                    reasons: Reasons = ()
                    for other in atoms:
                        found = get(other)
                        if found is not None:
                            reasons += found
                    groups.append((snapshots[slot] or snapshot(slot), dedupe(reasons)))
            pairs = filed.pairs
            if pairs:
                # The partners that hold: a set intersection, which runs in C over the smaller side (a
                # popular atom such as cat:cs.LG pairs with thousands of words; a paper holds a few hundred).
                for partner in pairs.keys() & held_atoms:
                    slots = pairs[partner]
                    candidates += len(slots)
                    groups += pair_groups(slots, atom_reasons, held[partner], held, snapshots, snapshot)
            if filed.clauses:
                candidates += self._visit(filed.clauses, held, seen, groups)
            paired = filed.paired
            if paired:
                for partner in paired.keys() & held_atoms:
                    candidates += self._visit(paired[partner], held, seen, groups)
            for slot, (program, shared) in filed.programs.items():
                if shared:
                    if slot in seen:
                        continue
                    seen.add(slot)
                candidates += 1
                result = run_program(program, get)
                if result is not None:
                    groups.append((self._snapshot(slot), dedupe(result)))
        candidates += len(self._always)
        for slot, program in self._always.items():
            result = run_program(program, get)
            if result is not None:
                groups.append((self._snapshot(slot), dedupe(result)))
        self.last_candidates = candidates
        return groups

    def _visit(
        self, clauses: dict[int, Clause], held: dict[int, Reasons], seen: set[int], groups: list[Group]
    ) -> int:
        """Evaluate ``clauses`` from the atom results in ``held``, appending matches; return how many."""
        # The hot loop: a million follows put a few thousand clauses in front of each paper.
        snapshots, members = self._snapshots, self._members
        get = held.get
        looked_at = 0
        for slot, (required, forbidden, alternatives, layout, shared) in clauses.items():
            if shared:
                if slot in seen:
                    continue
                seen.add(slot)
            looked_at += 1
            reasons: Reasons = ()
            for atom in required:
                found = get(atom)
                if found is None:
                    break
                reasons += found
            else:
                for atom in forbidden:
                    if atom in held:
                        break
                else:
                    if alternatives:
                        found = with_alternatives(alternatives, layout, held)
                        if found is None:
                            continue
                        reasons = found
                    # Query.evaluate keeps the first of repeated reasons. Two distinct reasons are the
                    # common case, cheaper to compare than to dedupe.
                    if len(reasons) > 1 and (len(reasons) > 2 or reasons[0] == reasons[1]):
                        reasons = tuple(dict.fromkeys(reasons))
                    ids = snapshots[slot]
                    if ids is None:
                        ids = snapshots[slot] = tuple(members[slot])
                    groups.append((ids, reasons))
        return looked_at

    def _snapshot(self, slot: int) -> tuple[int, ...]:
        ids = self._snapshots[slot]
        if ids is None:
            ids = self._snapshots[slot] = tuple(self._members[slot])
        return ids

    def match(self, paper: PaperIn | PaperText) -> list[tuple[int, Reasons]]:
        """Return ``(follow_id, reasons)`` for every follow that matches ``paper``, in follow-id order.

        One pair per follow, so the cost grows with the matches; :meth:`match_groups` gives the same
        matches as one entry per distinct query.
        """
        groups = self.match_groups(paper)
        if len(groups) == 1:
            ids, reasons = groups[0]
            return list(zip(ids, repeat(reasons)))
        results: list[tuple[int, Reasons]] = []
        for ids, reasons in groups:
            results += zip(ids, repeat(reasons))
        results.sort(key=_first)
        return results

    def _held_pairs(self, text: PaperText, held: dict[int, Reasons]) -> None:
        """Add the two-word phrases that hold for ``text`` to ``held``: its pairs of consecutive terms."""
        in_title = set(pairwise(text.title_words))
        in_abstract = set(pairwise(text.abstract_words))
        phrases = self._phrase_pairs
        # Look up the smaller side: a paper has a few hundred pairs, a big index tens of thousands of phrases.
        if len(phrases) < len(in_title) + len(in_abstract):
            found = [
                (pair, atoms) for pair, atoms in phrases.items() if pair in in_title or pair in in_abstract
            ]
        else:
            found = [(pair, atoms) for pair in in_title | in_abstract if (atoms := phrases.get(pair))]
        for pair, atoms in found:
            for atom, (title_reasons, abstract_reasons) in atoms.items():
                if title_reasons is not None and pair in in_title:
                    held[atom] = title_reasons
                elif abstract_reasons is not None and pair in in_abstract:
                    held[atom] = abstract_reasons

    def _held_atoms(self, text: PaperText) -> dict[int, Reasons]:
        """Evaluate, once each, the atoms filed under the paper's keys; return those that hold."""
        held: dict[int, Reasons] = {}
        table = self._probes
        keys = text.keys
        in_title, in_abstract = text.title_positions, text.abstract_positions
        authors_by_surname = text.authors_by_surname
        probed = 0
        # The paper's keys that have atoms: a set intersection in C, over the smaller side.
        for key in table.keys() & keys:
            probes = table[key]
            if probes.in_title or probes.in_abstract:
                word = key[1]
                # A word's atoms are added in bulk; abstract reasons first, so that title ones win.
                if word in in_title:
                    if word in in_abstract and probes.abstract_only:
                        held.update(probes.abstract_only)
                    held.update(probes.in_title)
                elif word in in_abstract:
                    held.update(probes.in_abstract)
            if probes.phrases:
                for atom, (node, required) in probes.phrases.items():
                    if required <= keys:
                        probed += 1
                        reasons = node.evaluate(text)
                        if reasons is not None:
                            held[atom] = dedupe(reasons)
            by_letter = probes.by_letter
            if by_letter:
                letters: set[str] = set()
                for _, name in authors_by_surname.get(key[1], ()):
                    found = given_letters(name[1])
                    if found is not None:
                        letters |= found
                tried: set[int] = set()  # atoms filed under several letters, evaluated once
                for letter in letters & by_letter.keys():
                    for atom, (node, several) in by_letter[letter].items():
                        if several:
                            if atom in tried:
                                continue
                            tried.add(atom)
                        probed += 1
                        reasons = node.evaluate(text)
                        if reasons is not None:
                            held[atom] = dedupe(reasons)
            for atom, node in probes.nodes.items():
                probed += 1
                reasons = node.evaluate(text)
                if reasons is not None:
                    # Deduped once here, so that a single-term query hands them out as they are.
                    held[atom] = dedupe(reasons)
        if self._phrase_pairs:
            self._held_pairs(text, held)
        for atom, node in self._unanchored.items():
            probed += 1
            reasons = node.evaluate(text)
            if reasons is not None:
                held[atom] = dedupe(reasons)
        self.last_atoms = probed
        return held
