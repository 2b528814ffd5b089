"""A ratchet on core/'s package cycles and on the shell's reach into the store (bench/architecture.py
measures both; docs/architecture.md, "Measured structure", records them).

The goal is one package per strongly connected component (no cycle between core's packages) and no file of
bot/, papertrail/ or a chat bot in notifiers/ importing one of core's SQL modules (each package's
``*_records`` and their helpers). Today's numbers are pinned: the test fails when either grows, and when
either shrinks, so that the pin moves down with the code (lower it in the same change).
"""

from __future__ import annotations

from bench.architecture import (
    COMPOSITION_ROOTS,
    contract,
    cross_package_sql_imports,
    import_graph,
    measure,
    strongly_connected_components,
)

# Today: no cycle; every package of core/ is its own component, the shared modules one more, in the order
# of docs/architecture.md ("The order of core's packages"; a layers contract in pyproject.toml keeps it).
LARGEST_COMPONENT = 1
# The shell calls steps (30 files imported a SQL module before it did). The composition root, which builds
# the Database and runs the migrations, is not counted (bench.architecture.COMPOSITION_ROOTS).
SHELL_FILES_IMPORTING_STORE = 0
# Inside core/, imports of another package's SQL module where the owner has no public step for it yet
# (docs/architecture.md, "The database and each table's SQL"); the goal is 0.
CROSS_PACKAGE_SQL_IMPORTS = 31


def test_the_package_cycles_of_core_do_not_grow() -> None:
    components, _ = measure()
    largest = max(len(c) for c in components)
    assert largest <= LARGEST_COMPONENT, f"a package cycle grew: {components[0]}"
    assert largest == LARGEST_COMPONENT, f"cycles shrank to {largest}: lower LARGEST_COMPONENT to match"


def test_the_shell_does_not_import_the_store_more() -> None:
    _, shell = measure()
    assert len(shell) <= SHELL_FILES_IMPORTING_STORE, f"more shell files import core's SQL modules: {shell}"
    assert len(shell) == SHELL_FILES_IMPORTING_STORE, (
        f"fewer shell files import SQL modules ({len(shell)}): lower SHELL_FILES_IMPORTING_STORE to match"
    )


def test_core_does_not_reach_into_another_packages_sql_more() -> None:
    found = cross_package_sql_imports(import_graph())
    assert len(found) <= CROSS_PACKAGE_SQL_IMPORTS, f"a package reads another's SQL anew: {found}"
    assert len(found) == CROSS_PACKAGE_SQL_IMPORTS, (
        f"fewer imports of another package's SQL ({len(found)}): lower CROSS_PACKAGE_SQL_IMPORTS to match"
    )


def test_the_component_finder_sees_a_cycle_and_a_chain() -> None:
    # The measure must be able to fail: a two-package cycle is one component, a one-way chain is not.
    assert strongly_connected_components({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"], ["c"]]
    assert strongly_connected_components({"a": {"b"}, "b": {"c"}, "c": set()}) == [["a"], ["b"], ["c"]]


def test_the_composition_roots_are_the_ones_the_contract_names() -> None:
    # The measure leaves out exactly the imports the contract "The shell calls steps, never SQL" allows.
    ignored = set(contract("The shell calls steps, never SQL")["ignore_imports"])
    for root, modules in COMPOSITION_ROOTS.items():
        assert {f"{root} -> {module}" for module in modules} <= ignored
