"""Escaping helpers for untrusted text on channels that have no markup of their own."""

from __future__ import annotations

import re

# C0 and C1 control characters except tab and newline (ANSI escape sequences start with one of them), and
# the bidirectional embeddings, overrides and isolates (U+202A-E, U+2066-9), which can make a title display
# reversed or reorder the text around it ("Trojan Source"). Right-to-left scripts need none of them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def strip_control(text: str) -> str:
    """Remove control and bidi-override characters: untrusted text cannot drive a terminal or reorder text."""
    return _CONTROL.sub("", text)


_HEADER_BREAK = re.compile(r"[\r\n]+")


def one_line(text: str) -> str:
    """Fold a value onto one line, for headers such as an email subject (no header injection)."""
    return _HEADER_BREAK.sub(" ", strip_control(text)).strip()
