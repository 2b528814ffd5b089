"""Text out of parsed XML, the way every arXiv response needs it."""

from __future__ import annotations

from typing import Any


def element_text(element: Any) -> str:
    """All text inside an element, nested children included; "" for a missing element."""
    if element is None:
        return ""
    return "".join(element.itertext())


def collapse(text: str) -> str:
    """Collapse every run of whitespace (arXiv hard-wraps long fields) into one space and trim the ends."""
    return " ".join(text.split())
