"""Escaping helpers for untrusted text on channels that have no markup of their own."""

from __future__ import annotations

import re

# C0 and C1 control characters except tab and newline: ANSI escape sequences start with one of them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_control(text: str) -> str:
    """Remove control characters so untrusted text cannot move the cursor or recolour a terminal."""
    return _CONTROL.sub("", text)


_HEADER_BREAK = re.compile(r"[\r\n]+")


def one_line(text: str) -> str:
    """Fold a value onto one line, for headers such as an email subject (no header injection)."""
    return _HEADER_BREAK.sub(" ", strip_control(text)).strip()
