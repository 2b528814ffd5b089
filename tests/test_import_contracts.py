"""The pure-core import contract (pyproject.toml, run by ``make test`` through import-linter) covers every
module of core/: each is either pure (a source module, which must not import the store) or one of the
modules that talk to a database (forbidden to the pure ones). A new module that is on neither side would
let a pure module import it unchecked (a planted ``core.tex -> core.store_ledger`` passed, before
core/ became packages)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _contract() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (pure,) = [
        c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("Pure core modules")
    ]
    return {
        "source_modules": list(pure["source_modules"]),
        "forbidden_modules": list(pure["forbidden_modules"]),
    }


def _modules_under(folder: str) -> set[str]:
    """Every module below ``folder`` as a dotted name, packages' ``__init__`` files left out."""
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / folder).rglob("*.py")
        if path.stem != "__init__"
    }


def test_every_core_module_is_on_exactly_one_side_of_the_pure_core_contract() -> None:
    contract = _contract()
    pure, io = set(contract["source_modules"]), set(contract["forbidden_modules"])
    modules = _modules_under("core")
    assert not pure & io, f"on both sides: {sorted(pure & io)}"
    assert modules - pure - io == set(), "add these to the pure or the forbidden side of the contract"
    assert (pure | io) - modules == set(), "the contract names modules that no longer exist"


def test_the_store_and_every_step_over_it_are_forbidden_to_the_pure_modules() -> None:
    io = set(_contract()["forbidden_modules"])
    stores = _modules_under("core/store")
    assert stores <= io
    assert {"core.papers.pipeline", "core.delivery.digests", "core.taste.recommend", "core.taste.votes"} <= io
