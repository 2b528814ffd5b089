"""Cutting a long chat reply into messages: between lines where possible, inside a line only when a line
alone is too long. Shared by the Telegram and Slack bots, which measure and cut lines their own way."""

from __future__ import annotations

from collections.abc import Callable


def pack_lines(
    text: str, limit: int, *, measure: Callable[[str], int], cut_line: Callable[[str, int], list[str]]
) -> list[str]:
    """``text`` in pieces of at most ``limit`` units (as ``measure`` counts them), joined back with newlines.

    ``cut_line(line, limit)`` splits a single line that is too long on its own, without breaking what must
    stay whole in the platform's format (a UTF-16 surrogate pair, an HTML entity).
    """
    if measure(text) <= limit:
        return [text]
    pieces: list[str] = []
    current = ""
    for line in text.split("\n"):
        for part in cut_line(line, limit):
            joined = f"{current}\n{part}" if current else part
            if current and measure(joined) > limit:
                pieces.append(current)
                current = part
            else:
                current = joined
    if current:
        pieces.append(current)
    return pieces
