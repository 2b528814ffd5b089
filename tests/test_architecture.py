"""docs/architecture.md's walk of one paper (issue 19) stays true to the code: at most eight files, each one
exists, and every name its table says runs there is defined in that file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WALK_HEADING = "### Following one paper, in eight files"


def _walk_rows() -> list[tuple[str, str]]:
    """(file, what happens there) for each row of the walk's table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split(WALK_HEADING, 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            rows.append((cells[1].strip("`"), cells[2]))
    return rows


def _defined(path: Path) -> set[str]:
    """Every class, function and method name defined in a module, methods also as ``Class.method``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}.{item.name}")
    return names


def test_the_walk_is_at_most_eight_files_that_exist() -> None:
    rows = _walk_rows()
    files = [name for name, _ in rows]
    assert 3 <= len(rows) <= 8, rows
    assert len(set(files)) == len(files), "a file appears twice in the walk"
    for name in files:
        assert (ROOT / name).is_file(), f"the walk names {name}, which does not exist"


def test_every_name_the_walk_gives_is_defined_in_its_file() -> None:
    for name, what in _walk_rows():
        defined = _defined(ROOT / name)
        # A row's first backticked identifier is what runs in that row's file; backticked paths (with a
        # slash or .py) point elsewhere and are skipped.
        wanted = [w for w in re.findall(r"`([^`]+)`", what) if "/" not in w and not w.endswith(".py")]
        assert wanted, f"{name}: the row names nothing that runs there"
        assert wanted[0] in defined, f"{name}: `{wanted[0]}` is not defined there"
