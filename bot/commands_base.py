"""The types every chat command shares: who is asking (:class:`ChatContext`), the answer (:class:`Reply`),
and small helpers for wording replies. The public names are re-exported by ``bot.commands``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from core.config import Settings
from core.delivery import normalise_address
from core.models import Subscriber, SubscriberStatus
from core.store import Store

MAX_INPUT_CHARS = 2000
"""Longer messages are refused politely: a follow query is at most 1,000 characters (core.query)."""
MAX_REPLY_CHARS = 3500
"""Every reply fits one Telegram message (4,096 characters) even after escaping typical text."""
SHOWN_QUERY_CHARS = 120
"""A follow's query is cut to this many characters where a reply lists or echoes it."""
PAUSED_BY_CHAT = "paused from the chat"
"""``Subscriber.status_reason`` of a subscriber paused with ``pause`` or ``digest off``."""


class Problem(StrEnum):
    """Why a command did not do what was asked (``Reply.error``); bots may style replies by it."""

    EMPTY = "empty"
    TOO_LONG = "too_long"
    UNKNOWN_COMMAND = "unknown_command"
    NOT_ALLOWED = "not_allowed"
    NOT_SUBSCRIBED = "not_subscribed"
    BAD_QUERY = "bad_query"
    BAD_ARGUMENT = "bad_argument"
    NOT_FOUND = "not_found"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class ChatContext:
    """Who is talking, from where, as the platform sees it. Built by the bot for each message.

    ``address`` is the subscriber this chat maps to (``telegram:<chat id>``, ``slack:<channel or user
    id>``); it is validated and normalised on construction (ValueError for a malformed one: a bot bug).
    ``can_change`` is the platform's verdict on whether the sender may change the subscription (True in a
    private chat and for a group's administrators); the grammar refuses changes when it is False and
    still answers ``help``, ``follows``, ``try`` and ``status``. ``is_group`` only words the replies
    ("this group"). ``chat_name`` is shown in the welcome. ``language`` is the sender's IETF language code
    when known: replies are English for now, and it is carried so that translations need no change to the
    bots. ``prefix`` is how commands are typed on the platform (``"/"`` on Telegram, ``"/papertrail "``
    on Slack); every example in a reply uses it.
    """

    address: str
    platform: str = "telegram"
    can_change: bool = True
    is_group: bool = False
    chat_name: str = ""
    language: str | None = None
    prefix: str = "/"

    def __post_init__(self) -> None:
        # Frozen: normalising goes through object.__setattr__, once, here.
        object.__setattr__(self, "address", normalise_address(self.address))

    @property
    def place(self) -> str:
        """How replies call the chat: ``this chat``, ``this group`` (Telegram) or ``this channel`` (Slack)."""
        if not self.is_group:
            return "this chat"
        return "this channel" if self.platform == "slack" else "this group"

    @property
    def capital_place(self) -> str:
        """``This chat``, ``This group`` or ``This channel``: :attr:`place` to start a sentence."""
        return self.place.capitalize()


@dataclass(frozen=True, slots=True)
class Block:
    """One paragraph of a reply, plain text. ``monospace`` blocks need a fixed-width font (a caret)."""

    text: str
    monospace: bool = False


@dataclass(frozen=True, slots=True)
class FollowItem:
    """A follow as ``follows`` numbers it; bots may render ``unfollow NUMBER`` buttons from these."""

    number: int
    query: str
    new_only: bool
    instant: bool

    @property
    def options(self) -> str:
        """``new papers only``, ``instant``, both joined by `` · ``, or empty for the defaults."""
        flags = [name for name, on in (("new papers only", self.new_only), ("instant", self.instant)) if on]
        return " · ".join(flags)


@dataclass(frozen=True, slots=True)
class Reply:
    """What to send back. The text is plain and NOT escaped: escape every block for the platform.

    ``command`` is the command that ran (``""`` when none was recognised). ``error`` is None when the
    command did what was asked. ``suggestions`` are whole command lines without the prefix (``follow
    cat:cs.DC``, ``timezone Europe/Berlin``) that a bot may offer as buttons; ``follows`` are the follows
    a ``follows`` reply listed.
    """

    blocks: tuple[Block, ...]
    command: str = ""
    error: Problem | None = None
    suggestions: tuple[str, ...] = ()
    follows: tuple[FollowItem, ...] = ()

    @property
    def text(self) -> str:
        """All blocks, one after the other, separated by newlines."""
        return "\n".join(block.text for block in self.blocks)

    @property
    def ok(self) -> bool:
        """True when the command did what was asked."""
        return self.error is None


@dataclass(frozen=True, slots=True)
class Call:
    """One command being handled: everything a command function reads."""

    store: Store
    settings: Settings
    ctx: ChatContext
    now: datetime
    name: str
    args: str

    @property
    def p(self) -> str:
        """The platform's command prefix."""
        return self.ctx.prefix

    def reply(
        self,
        *lines: str,
        error: Problem | None = None,
        suggestions: tuple[str, ...] = (),
        follows: tuple[FollowItem, ...] = (),
    ) -> Reply:
        """A reply of plain blocks, one per non-empty line given."""
        blocks = tuple(Block(line) for line in lines if line)
        return Reply(blocks, self.name, error, suggestions, follows)

    def subscriber(self) -> Subscriber | None:
        """The chat's subscriber, None when it has none yet."""
        found = self.store.get_subscriber(self.ctx.address)
        return found if found is not None and found.id is not None else None

    def ensure_subscriber(self) -> Subscriber:
        """The chat's subscriber, created with the default schedule and timezone when new."""
        subscriber, _ = self.store.ensure_subscriber(
            self.ctx.address, timezone=self.settings.default_timezone, schedule=self.settings.default_schedule
        )
        return subscriber

    def not_subscribed(self) -> Reply:
        """The answer to a command that needs a subscription this chat does not have."""
        return self.reply(
            f"{self.ctx.capital_place} has no subscription yet. "
            f"Send {self.p}start, or {self.p}follow QUERY to begin with a follow.",
            error=Problem.NOT_SUBSCRIBED,
        )

    def inactive_note(self, subscriber: Subscriber) -> str:
        """Why digests do not go out (paused, unsubscribed) and how to restart them; empty when active."""
        if subscriber.status == SubscriberStatus.ACTIVE:
            return ""
        again = f"{self.p}resume restarts them."
        if subscriber.status == SubscriberStatus.PAUSED and subscriber.status_reason == PAUSED_BY_CHAT:
            return f"Digests are paused: {again}"
        if subscriber.status == SubscriberStatus.PAUSED:
            why = cut(subscriber.status_reason or "", 200)
            return f"Digests are paused ({why}): {again}"
        return f"Digests are off ({subscriber.status}): {again}"


def cut(text: str, limit: int = SHOWN_QUERY_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, ending in … when cut."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: max(limit - 1, 0)].rstrip() + "…"


def plural(count: int, one: str, many: str) -> str:
    """``1 follow``, ``3 follows``."""
    return f"{count} {one if count == 1 else many}"


__all__ = [
    "MAX_INPUT_CHARS",
    "MAX_REPLY_CHARS",
    "PAUSED_BY_CHAT",
    "SHOWN_QUERY_CHARS",
    "Block",
    "Call",
    "ChatContext",
    "FollowItem",
    "Problem",
    "Reply",
    "cut",
    "plural",
]
