"""Evaluating the matcher's compiled queries for one paper from the results of its atoms.

``core.follows.match.Matcher`` first decides every atom filed under the paper's keys, then runs each triggered
query over those results: :func:`run_program` for a query of any shape, and the shortcuts here for the
common shapes (an AND of two atoms, a clause with ORs). Each gives the reasons that ``Query.evaluate``
would give, in query order, repeated reasons once.
"""

from __future__ import annotations

from collections.abc import Callable

from core.follows.match_filing import AND, OR, Program, Reasons

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
