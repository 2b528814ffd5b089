"""The types every chat command shares: who is asking (:class:`ChatContext`), the answer (:class:`Reply`),
the language of the reply, and small helpers for wording replies. The public names are re-exported by
``bot.commands``.

Every text a person reads is marked for translation (``call.t.gettext(...)``, ``N_`` for constants) and
translated in ``locale/<language>/LC_MESSAGES/bot.po``. The reply language is the chat's stored
``Subscriber.language``, else the platform's language of the sender (Telegram ``language_code``, Slack
locale) when PaperTrail speaks it, else the operator's default (``Settings.default_language``):
:func:`reply_language`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from core.channel import normalise_address
from core.config_edges import ChatSettings
from core.db import Database
from core.follows import subscribers
from core.languages import (
    DEFAULT_LANGUAGE,
    LANGUAGES,
    N_,
    Translator,
    normalize_language,
    reader_language,
    translator,
)
from core.models import Subscriber, SubscriberStatus

MAX_INPUT_CHARS = 2000
"""Longer messages are refused politely: a follow query is at most 1,000 characters (core.follows.query)."""
MAX_REPLY_CHARS = 3500
"""Every reply fits one Telegram message (4,096 characters) even after escaping typical text."""
SHOWN_QUERY_CHARS = 120
"""A follow's query is cut to this many characters where a reply lists or echoes it."""
PAUSED_BY_CHAT = "paused from the chat"
"""``Subscriber.status_reason`` of a subscriber paused with ``pause`` or ``digest off``."""
BLOCKED = N_("the bot was blocked in this Telegram chat")
"""``Subscriber.status_reason`` of a Telegram chat that blocked the bot (stored in English)."""
REMOVED = N_("the bot was removed from this Telegram group")
"""``Subscriber.status_reason`` of a Telegram group that removed the bot."""
KNOWN_REASONS = frozenset({BLOCKED, REMOVED})
"""Reasons PaperTrail itself writes: shown in the reader's language. Any other reason is shown as stored."""

# How replies call the chat: (at the start of a sentence, inside one).
_PLACES = {
    "chat": (N_("This chat"), N_("this chat")),
    "group": (N_("This group"), N_("this group")),
    "channel": (N_("This channel"), N_("this channel")),
}
_STATES = {
    SubscriberStatus.ACTIVE: N_("active"),
    SubscriberStatus.PAUSED: N_("paused"),
    SubscriberStatus.UNSUBSCRIBED: N_("unsubscribed"),
    SubscriberStatus.UNCONFIRMED: N_("unconfirmed"),
}


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
    ("this group"). ``chat_name`` is shown in the welcome. ``language`` is the sender's language as the
    platform reports it (Telegram ``language_code``, Slack locale, e.g. ``zh-CN``), None when unknown: the
    reply language when the chat has not chosen one (:func:`reply_language`). ``prefix`` is how commands
    are typed on the platform (``"/"`` on Telegram, ``"/papertrail "`` on Slack); every example in a reply
    uses it.
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
    def kind(self) -> str:
        """``chat`` (private), ``group`` (a Telegram group) or ``channel`` (a Slack channel)."""
        if not self.is_group:
            return "chat"
        return "channel" if self.platform == "slack" else "group"

    def place(self, t: Translator, *, capital: bool = False) -> str:
        """How replies call the chat, in ``t``'s language: ``this chat``, ``this group``, ``this channel``."""
        return t.gettext(_PLACES[self.kind][0 if capital else 1])


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

    def options(self, t: Translator) -> str:
        """``new papers only``, ``instant``, both joined by `` · ``, or empty for the defaults."""
        flags = [
            t.gettext(name)
            for name, on in ((N_("new papers only"), self.new_only), (N_("instant"), self.instant))
            if on
        ]
        return " · ".join(flags)


@dataclass(frozen=True, slots=True)
class Reply:
    """What to send back. The text is plain and NOT escaped: escape every block for the platform.

    ``command`` is the command that ran (``""`` when none was recognised). ``error`` is None when the
    command did what was asked. ``suggestions`` are whole command lines without the prefix (``follow
    cat:cs.DC``, ``timezone Europe/Berlin``) that a bot may offer as buttons; ``follows`` are the follows
    a ``follows`` reply listed. ``language`` is the language the reply is written in (``en``, ``zh``):
    what a bot adds to it (a note, a button label) should be in the same one.
    """

    blocks: tuple[Block, ...]
    command: str = ""
    error: Problem | None = None
    suggestions: tuple[str, ...] = ()
    follows: tuple[FollowItem, ...] = ()
    language: str = DEFAULT_LANGUAGE

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
    """One command being handled: everything a command function reads.

    ``language`` is the reply's language (:func:`reply_language`); :attr:`t` translates into it.
    """

    db: Database
    settings: ChatSettings
    ctx: ChatContext
    now: datetime
    name: str
    args: str
    language: str = DEFAULT_LANGUAGE

    @property
    def p(self) -> str:
        """The platform's command prefix."""
        return self.ctx.prefix

    @property
    def t(self) -> Translator:
        """The translator of the reply's language (cached per language by
        :func:`core.languages.translator`)."""
        return translator(self.language)

    @property
    def place(self) -> str:
        """``this chat``, ``this group`` or ``this channel``, translated: to use inside a sentence."""
        return self.ctx.place(self.t)

    @property
    def capital_place(self) -> str:
        """``This chat``, ``This group`` or ``This channel``, translated: to start a sentence."""
        return self.ctx.place(self.t, capital=True)

    def reply(
        self,
        *lines: str,
        error: Problem | None = None,
        suggestions: tuple[str, ...] = (),
        follows: tuple[FollowItem, ...] = (),
        language: str | None = None,
    ) -> Reply:
        """A reply of plain blocks, one per non-empty line given, in :attr:`language` unless told another."""
        blocks = tuple(Block(line) for line in lines if line)
        return Reply(blocks, self.name, error, suggestions, follows, language or self.language)

    def subscriber(self) -> Subscriber | None:
        """The chat's subscriber, None when it has none yet."""
        return subscribers.subscriber_by_address(self.db, self.ctx.address)

    def ensure_subscriber(self) -> Subscriber:
        """The chat's subscriber, created with the default schedule and timezone when new.

        A new subscriber gets the platform's language of the sender (None when unknown): see
        :meth:`adopt_language`.
        """
        return subscribers.ensure_subscriber(
            self.db,
            self.ctx.address,
            timezone=self.settings.default_timezone,
            schedule=self.settings.default_schedule,
            language=self.platform_language(),
        )

    def platform_language(self) -> str | None:
        """The platform's language of the sender, for a subscriber that has none yet; None when unknown.

        Only when the sender may change the subscription (a group member's language does not decide the
        group's); the steps never store it over a language already stored: a choice made with ``language``
        stays.
        """
        return normalize_language(self.ctx.language) if self.ctx.can_change else None

    def not_subscribed(self) -> Reply:
        """The answer to a command that needs a subscription this chat does not have."""
        return self.reply(
            self.t.gettext(
                "{Place} has no subscription yet. Send {p}start, or {p}follow QUERY to begin with a follow.",
                Place=self.capital_place,
                p=self.p,
            ),
            error=Problem.NOT_SUBSCRIBED,
        )

    def inactive_note(self, subscriber: Subscriber) -> str:
        """Why digests do not go out (paused, unsubscribed) and how to restart them; empty when active."""
        t, p = self.t, self.p
        if subscriber.status == SubscriberStatus.ACTIVE:
            return ""
        if subscriber.status == SubscriberStatus.PAUSED and subscriber.status_reason == PAUSED_BY_CHAT:
            return t.gettext("Digests are paused: {p}resume restarts them.", p=p)
        if subscriber.status == SubscriberStatus.PAUSED:
            why = reason_text(t, subscriber.status_reason)
            return t.gettext("Digests are paused ({why}): {p}resume restarts them.", why=why, p=p)
        return t.gettext(
            "Digests are off ({state}): {p}resume restarts them.", state=state_text(t, subscriber.status), p=p
        )


def reply_language(db: Database, ctx: ChatContext, *, default: str) -> str:
    """The language to answer ``ctx`` in: the chat's stored language, else the platform's, else ``default``
    (the operator's ``Settings.default_language``).

    When the chat's subscriber has no language yet and the platform reports one PaperTrail speaks, it is
    stored (only when the sender may change the subscription): a chat's language defaults from Telegram's
    ``language_code`` or Slack's locale once, and an explicit ``language`` choice is never overwritten.
    """
    platform = normalize_language(ctx.language)
    subscriber = subscribers.subscriber_by_address(db, ctx.address)
    if subscriber is not None and subscriber.id is not None:
        if subscriber.language in LANGUAGES:
            return str(subscriber.language)
        if subscriber.language is None and platform is not None and ctx.can_change:
            subscribers.adopt_language(db, subscriber.id, platform)
    return reader_language(platform, default=default)


def stored_language(db: Database, address: str, platform: str | None = None, *, default: str) -> str:
    """The reply language for ``address`` without changing anything: stored, else ``platform``'s, else
    ``default`` (the operator's); never raises (the platform's or the default on failure).

    For what the bots write themselves outside a command (a hint under a sticker, a greeting, an apology).
    """
    fallback = reader_language(platform, default=default)
    try:
        subscriber = subscribers.subscriber_by_address(db, normalise_address(address))
    except Exception:  # the database is down: the apology still goes out
        return fallback
    if subscriber is not None and subscriber.language in LANGUAGES:
        return str(subscriber.language)
    return fallback


def state_text(t: Translator, status: SubscriberStatus | str) -> str:
    """A subscriber's status (``active``, ``paused`` …) in ``t``'s language."""
    try:
        known = _STATES.get(SubscriberStatus(status))
    except ValueError:
        known = None
    return t.gettext(known) if known else str(status)


def reason_text(t: Translator, reason: str | None, limit: int = 200) -> str:
    """Why a subscriber was paused, for a reply: translated when PaperTrail wrote it, else as stored (cut)."""
    text = reason or ""
    return t.gettext(text) if text in KNOWN_REASONS else cut(text, limit)


def cut(text: str, limit: int = SHOWN_QUERY_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, ending in … when cut."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: max(limit - 1, 0)].rstrip() + "…"


__all__ = [
    "BLOCKED",
    "KNOWN_REASONS",
    "MAX_INPUT_CHARS",
    "MAX_REPLY_CHARS",
    "PAUSED_BY_CHAT",
    "REMOVED",
    "SHOWN_QUERY_CHARS",
    "Block",
    "Call",
    "ChatContext",
    "FollowItem",
    "Problem",
    "Reply",
    "cut",
    "reason_text",
    "reply_language",
    "state_text",
    "stored_language",
]
