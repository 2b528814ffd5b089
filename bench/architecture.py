"""Measure core/'s package structure: the cycles between its packages and the shell's reach into the store.

DESIGN.md wants core/ cut into packages by capability with no cycle between packages, and a shell (bot/,
papertrail/, and the chat bots in the channel packages of notifiers/) that calls steps, never SQL. This
prints how far the code is from that:

* the strongly connected components of the package-level import graph of core/: a package is
  ``core.<sub>`` (core.papers, core.follows, ...); the top-level modules (core.config, core.values,
  core.models, ...) count together as one package, "core (shared)". A component of more than one package
  is a cycle; the goal is one package per component.
* the imports, inside core/, of another package's SQL module (DESIGN.md: a package calls another package's
  public functions, never its SQL);
* the files of bot/, notifiers/ and papertrail/ that import a SQL module of core/ directly: the modules
  of the contract "The SQL modules import no step that runs over them" in pyproject.toml (each package's
  ``*_records`` and their helpers, the shared database modules), except ``core.db`` (the database handle
  the shell builds and passes down). The composition roots (:data:`COMPOSITION_ROOTS`: the module that
  builds the Database and runs the migrations) are left out of the count and printed apart; the
  contract "The shell calls steps, never SQL" names the same imports among its ``ignore_imports``.

Imports under ``if TYPE_CHECKING:`` run nothing and are left out, as import-linter leaves them out
(pyproject.toml); the shell count is also printed with them. grimp (installed with import-linter) builds
the graph; tests/test_package_cycles.py pins today's numbers so they can only shrink.

Usage: python bench/architecture.py
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import grimp

SHARED = "core (shared)"
# notifiers/: the channel packages hold their chat bots, which answer commands like bot/ does.
SHELL_PACKAGES = ("bot", "notifiers", "papertrail")
ROOT = Path(__file__).resolve().parent.parent
# The composition roots and the SQL modules they may import: papertrail.service.store_context builds the
# Database (core.db) and runs the migrations (core.db_migrate); papertrail.service.context builds on it.
COMPOSITION_ROOTS = {"papertrail.service.store_context": frozenset({"core.db_migrate"})}


def import_graph(*, type_checking: bool = False) -> grimp.ImportGraph:
    # No cache: grimp's cache served the graph of the other setting of exclude_type_checking_imports.
    return grimp.build_graph(
        "core", *SHELL_PACKAGES, exclude_type_checking_imports=not type_checking, cache_dir=None
    )


def core_package(module: str, packages: set[str]) -> str:
    """The package of a module of core/: its ``core.<sub>`` if one of ``packages``, else the shared group."""
    parts = module.split(".")
    candidate = ".".join(parts[:2])
    return candidate if candidate in packages else SHARED


def package_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Package -> the packages its modules import (within core/, self-imports left out)."""
    packages = {m for m in graph.find_children("core") if graph.find_children(m)}
    edges: dict[str, set[str]] = {p: set() for p in (*packages, SHARED)}
    for module in graph.find_descendants("core") | {"core"}:
        source = core_package(module, packages)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported == "core" or imported.startswith("core."):
                target = core_package(imported, packages)
                if target != source:
                    edges[source].add(target)
    return edges


def strongly_connected_components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; each component sorted, the largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(components, key=lambda c: (-len(c), c))


def contract(name: str) -> dict[str, Any]:
    """The import-linter contract of pyproject.toml whose name starts with ``name``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (found,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith(name)]
    return dict(found)


def sql_modules() -> set[str]:
    """core/'s SQL modules, as pyproject.toml's import contract lists them (see the module docstring)."""
    return set(contract("The SQL modules")["source_modules"]) - {"core.db"}


def shell_files_importing_store(graph: grimp.ImportGraph, *, roots: bool = False) -> list[str]:
    """The modules of bot/, notifiers/ and papertrail/ that import one of core/'s SQL modules directly,
    the composition roots left out (or, with ``roots``, only the roots that do)."""
    sql = sql_modules()
    found = []
    for package in SHELL_PACKAGES:
        for module in graph.find_descendants(package) | {package}:
            reached = graph.find_modules_directly_imported_by(module) & sql
            allowed = COMPOSITION_ROOTS.get(module, frozenset())
            if reached & allowed if roots else reached - allowed:
                found.append(module)
    return sorted(found)


def cross_package_sql_imports(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """(importer, SQL module) for each module of core/ importing another package's SQL module directly (the
    shared database modules left out): each is a public step the owning package does not have yet."""
    packages = {m for m in graph.find_children("core") if graph.find_children(m)}
    sql = {m for m in sql_modules() if core_package(m, packages) != SHARED}
    return sorted(
        (module, imported)
        for module in graph.find_descendants("core")
        for imported in graph.find_modules_directly_imported_by(module) & sql
        if core_package(imported, packages) != core_package(module, packages)
    )


def measure() -> tuple[list[list[str]], list[str]]:
    """(the SCCs of core/'s package graph, the shell modules importing core's SQL modules)."""
    graph = import_graph()
    return strongly_connected_components(package_edges(graph)), shell_files_importing_store(graph)


def main() -> None:
    """Print the measurement."""
    components, shell = measure()
    largest = max(len(c) for c in components)
    print(f"core/ package graph: {sum(len(c) for c in components)} packages, {len(components)} components")
    print(f"largest strongly connected component: {largest} packages (goal: 1)")
    for component in components:
        print(f"  {len(component)}: {', '.join(component)}")
    graph = import_graph()
    print(
        f"files in bot/, notifiers/ and papertrail/ importing core's SQL modules: {len(shell)} "
        "(the composition roots left out)"
    )
    for module in shell:
        print(f"  {module}")
    annotated = shell_files_importing_store(import_graph(type_checking=True))
    print(f"  ({len(annotated)} counting imports made only for type annotations)")
    across = cross_package_sql_imports(import_graph())
    print(f"imports of another package's SQL module inside core/: {len(across)}")
    for root in shell_files_importing_store(graph, roots=True):
        print(f"composition root (not counted): {root} -> {', '.join(sorted(COMPOSITION_ROOTS[root]))}")


if __name__ == "__main__":
    main()
