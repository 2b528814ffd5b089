"""Reading what the command line printed: rich's wraps undone, quotes counted."""

from __future__ import annotations

import re


def one_line(text: str) -> str:
    """``text`` with rich's soft wraps and runs of spaces undone."""
    return " ".join(text.split())


# An apostrophe inside a word (don't, arXiv's) is no quote. (A plural possessive, readers', would read as
# one: no error message has one, and telling it from the end of a quoted 'values' needs a parser.)
_APOSTROPHES = re.compile(r"(?<=\w)'(?=\w)")


def unbalanced(message: str) -> list[str]:
    """The quote characters ``message`` holds an odd number of (apostrophes in words aside)."""
    text = _APOSTROPHES.sub("", message)
    return [mark for mark in ("'", '"', "`") if text.count(mark) % 2]
