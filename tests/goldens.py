"""Golden files under ``tests/golden/``: compare, or rewrite them with ``PAPERTRAIL_UPDATE_GOLDEN=1``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from notifiers.slack.blocks import SlackPayload

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


def dump_slack(payloads: Sequence[SlackPayload]) -> str:
    """Slack payloads as JSON with one block per line: reviewable diffs, still valid JSON."""
    messages = []
    for payload in payloads:
        blocks = ",\n".join("   " + json.dumps(b, ensure_ascii=False, sort_keys=True) for b in payload.blocks)
        messages.append(
            f' {{"text": {json.dumps(payload.text, ensure_ascii=False)}, "blocks": [\n{blocks}\n ]}}'
        )
    return "[\n" + ",\n".join(messages) + "\n]\n"
