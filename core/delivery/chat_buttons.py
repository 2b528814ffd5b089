"""The buttons a digest carries in a chat, as data both sides share: the notifiers write them under each
item, the chat bots read them back when one is pressed (the format was written in notifiers/ and
parsed in bot/ with its constants copied).

Telegram: callback data ``action:value`` of at most :data:`MAX_CALLBACK_BYTES` bytes (:class:`Action`;
``notifiers.telegram.chat_render`` reads it back). Slack: the action ids of the vote buttons
(``notifiers.slack.chat`` handles them). Pure: no I/O, no platform library.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

MAX_CALLBACK_BYTES: Final = 64
"""Telegram's limit on a button's callback data; a button whose data is longer is not sent."""

LIKE_LABEL: Final = "👍"
DISLIKE_LABEL: Final = "👎"
"""The vote buttons' labels, the same in every language (the Telegram bot marks the chosen one "👍 ✓")."""
VOTE_SIGNS: Final = {1: "+", -1: "-"}
"""The sign a Telegram vote button's data carries for a like (1) and a dislike (-1)."""

SLACK_LIKE_ACTION: Final = "papertrail_like"
SLACK_DISLIKE_ACTION: Final = "papertrail_dislike"
SLACK_VOTE_ACTIONS: Final = {SLACK_LIKE_ACTION: "like", SLACK_DISLIKE_ACTION: "dislike"}
"""The Slack vote buttons' action ids, and the command each runs; the value is the versioned id."""


class Action(StrEnum):
    """What a Telegram button does when pressed: the part of its callback data before the first colon."""

    COMMAND = "cmd"
    UNFOLLOW = "unfollow"
    WATCH = "watch"
    VOTE = "vote"


def callback_data(action: Action, value: str) -> str | None:
    """``action:value`` when it fits Telegram's 64 bytes, else None (no button then)."""
    data = f"{action.value}:{value}"
    return data if len(data.encode("utf-8")) <= MAX_CALLBACK_BYTES else None


def vote_data(arxiv_id: str, version: int, value: int) -> str | None:
    """The callback data of a vote button: ``vote:+:2306.03564v2`` (👍) or ``vote:-:…`` (👎)."""
    return callback_data(Action.VOTE, f"{VOTE_SIGNS[value]}:{arxiv_id}v{version}")
