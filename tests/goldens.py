"""Golden files under ``tests/golden/``: compare, or rewrite them with ``PAPERTRAIL_UPDATE_GOLDEN=1``."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).with_name("golden")
# Read at import: the conftest clears PAPERTRAIL_* variables before each test.
UPDATE = os.environ.get("PAPERTRAIL_UPDATE_GOLDEN") == "1"


def check_golden(name: str, actual: str) -> None:
    """Assert that ``actual`` equals the golden file ``name`` (or rewrite it when updating)."""
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == actual, (
        f"{name} changed; PAPERTRAIL_UPDATE_GOLDEN=1 rewrites it"
    )
