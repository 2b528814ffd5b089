"""What the Telegram bot sends and reads back, without any I/O: replies as Telegram HTML, buttons, callbacks.

A :class:`bot.commands.Reply` is plain text. Each block is escaped for Telegram HTML (``&``, ``<``, ``>``;
quotes need no escaping outside attributes) and a ``monospace`` block becomes ``<pre>``. A reply longer than
one message (4,096 UTF-16 code units, counted by Telegram after it parses the markup) is split between
blocks, then between lines, and only as a last resort inside a line; a ``<pre>`` block split in two stays
well-formed in each part.

Buttons carry callback data of at most 64 bytes, in three forms that this module writes and reads:

* ``cmd:<command line>``: a suggestion of the reply (``cmd:follow cat:cs.DC``), run as if typed;
* ``unfollow:<follow id>``: remove that follow of the chat (the id is stable; numbers shift);
* ``watch:<arXiv id>``: follow ``id:<arXiv id>`` to hear about the paper's revisions;
* ``vote:+:<arXiv id>v<N>`` / ``vote:-:<arXiv id>v<N>``: 👍 / 👎 on that version for the chat, or take the
  vote back when it is the chosen one (:func:`voted_markup` marks it "👍 ✓").

The digest notifier writes the last three under each digest item (see docs/telegram-bot.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.chunking import pack_lines
from bot.commands_base import Reply, cut
from core.delivery.chat_buttons import (
    DISLIKE_LABEL,
    LIKE_LABEL,
    VOTE_SIGNS,
    Action,
    callback_data,
)
from core.values import ARXIV_ID_PATTERN
from notifiers.telegram.format import MAX_LENGTH, escape, utf16_len

BUTTON_LABEL_CHARS = 40
"""Labels longer than this are cut with …: phones show about this much on one button."""

_FOLLOW_ID = re.compile(r"[0-9]{1,18}")
_ARXIV_ID = re.compile(ARXIV_ID_PATTERN)
_VOTE = re.compile(rf"(?P<sign>[+-]):(?P<id>{ARXIV_ID_PATTERN})v(?P<version>[1-9][0-9]{{0,3}})")
VOTE_LABELS = {VOTE_SIGNS[1]: LIKE_LABEL, VOTE_SIGNS[-1]: DISLIKE_LABEL}
"""The labels of a digest item's vote buttons (the same in every language), by the sign in their data."""
CHOSEN = " ✓"
"""Added to the label of the vote button that is the chat's vote now."""


def html_parts(reply: Reply, limit: int = MAX_LENGTH) -> list[str]:
    """The reply as one or more Telegram HTML messages, each within ``limit`` once parsed.

    Blocks are joined by a newline; whole blocks stay together in a message when they fit.
    """
    pieces = [
        (chunk, block.monospace)
        for block in reply.blocks
        if block.text.strip()
        for chunk in _chunks(block.text, limit)
    ]
    messages: list[list[tuple[str, bool]]] = []
    size = 0
    for piece in pieces:
        length = utf16_len(piece[0])
        if messages and size + 1 + length <= limit:
            messages[-1].append(piece)
            size += 1 + length
        else:
            messages.append([piece])
            size = length
    return ["\n".join(_html(text, mono) for text, mono in message) for message in messages]


def _html(text: str, monospace: bool) -> str:
    return f"<pre>{escape(text)}</pre>" if monospace else escape(text)


def _chunks(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` UTF-16 units: between lines when possible."""
    return pack_lines(text, limit, measure=utf16_len, cut_line=_hard_split)


def _hard_split(line: str, limit: int) -> list[str]:
    """A line longer than ``limit`` cut into pieces that fit; characters are never split."""
    pieces: list[str] = []
    start, size = 0, 0
    for index, char in enumerate(line):
        width = 2 if ord(char) > 0xFFFF else 1
        if size + width > limit:
            pieces.append(line[start:index])
            start, size = index, 0
        size += width
    pieces.append(line[start:])
    return pieces


@dataclass(frozen=True, slots=True)
class Button:
    """A pressed button's callback data, read back: the action and its argument."""

    action: Action
    value: str


def read_callback(data: str | None) -> Button | None:
    """The button behind callback ``data``, or None for data this bot never wrote (or an old format)."""
    kind, sep, value = (data or "").partition(":")
    if not sep or not value:
        return None
    if kind == Action.COMMAND:
        return Button(Action.COMMAND, value)
    if kind == Action.UNFOLLOW and _FOLLOW_ID.fullmatch(value):
        return Button(Action.UNFOLLOW, value)
    if kind == Action.WATCH and _ARXIV_ID.fullmatch(value):
        return Button(Action.WATCH, value)
    if kind == Action.VOTE and _VOTE.fullmatch(value):
        return Button(Action.VOTE, value)
    return None


@dataclass(frozen=True, slots=True)
class VotePress:
    """A vote button's value read back: 👍 (``value`` 1) or 👎 (-1) on ``arxiv_id`` v``version``."""

    value: int
    arxiv_id: str
    version: int


def read_vote(value: str) -> VotePress | None:
    """The vote of a :attr:`Action.VOTE` button's value (``+:2306.03564v2``), None for anything else."""
    found = _VOTE.fullmatch(value)
    if found is None:
        return None
    return VotePress(1 if found["sign"] == "+" else -1, found["id"], int(found["version"]))


def is_chosen(markup: InlineKeyboardMarkup | None, data: str) -> bool:
    """Whether the button carrying ``data`` shows that it is the chat's vote (its label ends in ✓)."""
    if markup is None:
        return False
    return any(
        button.callback_data == data and button.text.endswith(CHOSEN)
        for row in markup.inline_keyboard
        for button in row
    )


def voted_markup(markup: InlineKeyboardMarkup | None, paper: str, vote: int) -> InlineKeyboardMarkup | None:
    """``markup`` with the 👍 / 👎 buttons of ``paper`` (``2306.03564v2``) showing ``vote`` (1, -1, 0).

    The chosen button's label gets :data:`CHOSEN`, the other loses it; every other button stays as it
    is. None when the markup has no vote buttons for that paper, or already shows ``vote``: nothing to edit.
    """
    if markup is None:
        return None
    chosen = {1: "+", -1: "-"}.get(vote)
    changed = False
    rows: list[list[InlineKeyboardButton]] = []
    for row in markup.inline_keyboard:
        kept: list[InlineKeyboardButton] = []
        for button in row:
            data = button.callback_data if isinstance(button.callback_data, str) else ""
            for sign, mark in VOTE_LABELS.items():
                if data == f"{Action.VOTE.value}:{sign}:{paper}":
                    text = mark + (CHOSEN if sign == chosen else "")
                    if text != button.text:
                        button, changed = InlineKeyboardButton(text, callback_data=data), True
            kept.append(button)
        rows.append(kept)
    return InlineKeyboardMarkup(rows) if changed else None


def keyboard(reply: Reply, prefix: str, follow_ids: Mapping[int, int]) -> InlineKeyboardMarkup | None:
    """Buttons for a reply: "✕ N. QUERY" for each follow it lists, then one per suggestion.

    ``follow_ids`` maps the numbers in ``reply.follows`` to the follows' ids (the callback carries the id,
    so a button pressed after the list changed still removes the follow it shows). Suggestions whose
    callback data would pass 64 bytes are left out: the reply's text still names them.
    """
    rows: list[list[InlineKeyboardButton]] = []
    for item in reply.follows:
        follow_id = follow_ids.get(item.number)
        data = callback_data(Action.UNFOLLOW, str(follow_id)) if follow_id is not None else None
        if data is not None:
            rows.append([InlineKeyboardButton(label(f"✕ {item.number}. {item.query}"), callback_data=data)])
    for suggestion in reply.suggestions:
        data = callback_data(Action.COMMAND, suggestion)
        if data is not None:
            rows.append([InlineKeyboardButton(label(f"{prefix}{suggestion}"), callback_data=data)])
    return InlineKeyboardMarkup(rows) if rows else None


def label(text: str) -> str:
    """A button label: one line, at most :data:`BUTTON_LABEL_CHARS` characters."""
    return cut(text, BUTTON_LABEL_CHARS)


def without_button(markup: InlineKeyboardMarkup | None, data: str) -> InlineKeyboardMarkup | None:
    """``markup`` without the button(s) carrying ``data``; None when no button is left."""
    if markup is None:
        return None
    rows = [[button for button in row if button.callback_data != data] for row in markup.inline_keyboard]
    kept = [row for row in rows if row]
    return InlineKeyboardMarkup(kept) if kept else None


__all__ = [
    "BUTTON_LABEL_CHARS",
    "CHOSEN",
    "VOTE_LABELS",
    "Button",
    "VotePress",
    "html_parts",
    "is_chosen",
    "keyboard",
    "label",
    "read_callback",
    "read_vote",
    "voted_markup",
    "without_button",
]
