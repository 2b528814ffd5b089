"""Large feeds for the tests: the recorded day (1,504 items) with its items repeated, ids renamed per copy.

Copy ``k`` of an item has every arXiv id in it (``YYMM.NNNNN``) given the month ``k`` counted from January
2000, so that ids stay unique and valid and a store does real work; copy 0 keeps the recorded ids.
"""

from __future__ import annotations

import re

from tests.conftest import BIG_FEED

_ID_RE = re.compile(rb"\b\d{4}\.(\d{5})(?!\d)")
_ITEMS_RE = re.compile(rb"(\s*<item>.*?</item>)", re.DOTALL)


def feed_copies(copies: int) -> bytes:
    """The recorded feed with its items ``copies`` times over (1,504 x ``copies`` items)."""
    data = BIG_FEED.read_bytes()
    items = _ITEMS_RE.findall(data)
    head = data[: data.index(items[0])]
    tail = data[data.index(items[-1]) + len(items[-1]) :]
    block = b"".join(items)
    parts = [head, block]
    for copy in range(1, copies):
        month = f"{copy // 12 % 100:02d}{copy % 12 + 1:02d}".encode()
        parts.append(_ID_RE.sub(month + rb".\1", block))
    parts.append(tail)
    return b"".join(parts)
