"""One command grammar for every chat: parse a message, run the command on the store, say what happened.

The Telegram bot and the Slack app both call :func:`handle` with the text of a message and a
:class:`ChatContext` (which subscriber the chat is, whether the sender may change it, how commands are
typed there) and send back the :class:`Reply`. Neither re-implements a command. The grammar, every command
and the limits are described in docs/chat-commands.md::

    message := [ "/" ] [ "papertrail" ] COMMAND [ "@" BOTNAME ] [ ARGUMENTS ]     at most 2,000 characters
    COMMAND := start | help | follow | unfollow | follows | try | digest | timezone | pause | resume | status
             | join | leave

Command words are matched case-insensitively after Unicode NFKC folding (so a full-width ``／ｆｏｌｌｏｗ``
works too); ``/follow@PaperTrailBot`` is Telegram's form in groups. Runs of whitespace in the arguments,
newlines included, count as one space. Control and bidi-override characters are removed first.

Replies are **plain text and not escaped**: the bots escape every block for their format (HTML for
Telegram, mrkdwn for Slack) and show ``monospace`` blocks (a query with a caret under an error) in a
fixed-width font. A reply is at most :data:`MAX_REPLY_CHARS` characters before escaping.
"""

from __future__ import annotations

import difflib
import logging
import re
import unicodedata
from collections.abc import Callable
from datetime import datetime

from bot import commands_follows, commands_newsletters, commands_settings
from bot import commands_help as texts
from bot.commands_base import (
    MAX_INPUT_CHARS,
    MAX_REPLY_CHARS,
    PAUSED_BY_CHAT,
    Block,
    Call,
    ChatContext,
    FollowItem,
    Problem,
    Reply,
    cut,
    plural,
)
from bot.commands_follows import follow_items
from bot.commands_status import describe_schedule
from core.config import Settings
from core.digests import resume as resume_subscriber
from core.models import Subscriber, SubscriberStatus, utcnow
from core.query import QueryError, parse
from core.store import Store
from core.text_safety import strip_control

log = logging.getLogger(__name__)

COMMANDS = texts.COMMANDS
"""Every command with its arguments and a one-line summary: for Telegram's ``setMyCommands`` menu."""


def handle(
    store: Store, settings: Settings, ctx: ChatContext, text: str, *, now: datetime | None = None
) -> Reply:
    """Run one chat message as a command and return the reply to send; never raises.

    Synchronous, like the store: an async bot may call it directly (as the rest of the service calls the
    store) or through ``asyncio.to_thread``. An unexpected failure (the database is down) is logged with
    its traceback and answered with an apology, so that a chat always gets an answer. ``now`` is for
    tests; it defaults to the current time.
    """
    now = now or utcnow()
    try:
        reply = _dispatch(store, settings, ctx, text, now)
    except Exception:
        log.exception("chat command from %s failed: %r", ctx.address, text[:200])
        reply = Reply(
            (Block("Sorry, something went wrong on PaperTrail's side. Please try again in a few minutes."),),
            error=Problem.INTERNAL,
        )
    return _finish(reply)


def split_command(text: str) -> tuple[str, str]:
    """(the command word, folded for lookup; the arguments, whitespace runs as single spaces).

    Accepts ``/follow@PaperTrailBot x`` (Telegram's form in groups), ``follow x``, ``FOLLOW x`` and a
    leading ``papertrail`` word (``/papertrail follow x`` pasted into a message). An empty message gives
    ``("", "")``.
    """
    words = strip_control(text).split()
    if words and unicodedata.normalize("NFKC", words[0]).casefold().lstrip("/") == "papertrail":
        words = words[1:]
    if not words:
        return "", ""
    word = unicodedata.normalize("NFKC", words[0]).casefold()
    word = word.removeprefix("/").split("@", 1)[0].rstrip(":,.!?")
    return word, " ".join(words[1:])


def _dispatch(store: Store, settings: Settings, ctx: ChatContext, text: str, now: datetime) -> Reply:
    p = ctx.prefix
    if len(text) > MAX_INPUT_CHARS:
        return Reply(
            (
                Block(
                    f"That message is {len(text):,} characters long; a command can be at most "
                    f"{MAX_INPUT_CHARS:,} (a follow query at most 1,000). Send a shorter one; "
                    f"{p}help lists the commands."
                ),
            ),
            error=Problem.TOO_LONG,
        )
    word, args = split_command(text)
    if not word:
        return Reply(
            (Block(f"Send a command, e.g. {p}follow cat:cs.DC; {p}help lists them all."),),
            error=Problem.EMPTY,
        )
    name = texts.ALIASES.get(word, word)
    run = _COMMANDS.get(name)
    if run is None:
        return _unknown(ctx, word, args, text)
    call = Call(store, settings, ctx, now, name, args)
    # `digest` and `timezone` without arguments only show the setting, `join` lists the newsletters;
    # `start` decides for itself.
    changes = texts.BY_NAME[name].changes and name != "start"
    if name in ("digest", "timezone", "join") and not args:
        changes = False
    if changes and not ctx.can_change:
        return call.reply(
            f"Only admins of {ctx.place} can change its follows and settings. "
            f"Anyone can use {p}follows, {p}status, {p}try and {p}help.",
            error=Problem.NOT_ALLOWED,
        )
    return run(call)


def _finish(reply: Reply) -> Reply:
    """Strip control characters from everything shown and keep the whole within MAX_REPLY_CHARS."""
    blocks: list[Block] = []
    room = MAX_REPLY_CHARS
    for block in reply.blocks:
        text = strip_control(block.text)
        if len(text) + 1 > room:
            # A safety net: replies are built to fit, so this cuts only what a future change lets grow.
            blocks.append(Block(text[: max(room - 2, 0)] + "…", block.monospace))
            break
        blocks.append(Block(text, block.monospace))
        room -= len(text) + 1
    return Reply(tuple(blocks), reply.command, reply.error, reply.suggestions, reply.follows)


# Something that looks like a query sent without a command.
_QUERYISH = re.compile(r"(?i)(?:^|[\s(])(?:cat|au|ti|abs|id):")


def _unknown(ctx: ChatContext, word: str, args: str, text: str) -> Reply:
    p = ctx.prefix
    whole = " ".join(strip_control(text).split())
    guess = _closest_command(word)
    # A near miss of a command word is a typo ("folow cat:cs.AI"), with or without a slash (Slack's
    # commands never have one); otherwise a message that parses as a query is a query without a command.
    if guess is None and not whole.startswith("/") and _QUERYISH.search(whole) and _parses(whole):
        shown = cut(whole, 80)
        return Reply(
            (Block(f"To follow that, send {p}follow {shown} — or {p}try {shown} to see what it matches."),),
            error=Problem.UNKNOWN_COMMAND,
            suggestions=(f"follow {whole}", f"try {whole}"),
        )
    shown = cut(word, 40)
    if guess is None:
        return Reply(
            (Block(f'Unknown command "{shown}". {p}help lists the commands, e.g. {p}follow cat:cs.DC.'),),
            error=Problem.UNKNOWN_COMMAND,
        )
    return Reply(
        (Block(f'Unknown command "{shown}". Did you mean {p}{guess}? {p}help lists all commands.'),),
        error=Problem.UNKNOWN_COMMAND,
        suggestions=(f"{guess} {args}".strip(),),
    )


def _parses(text: str) -> bool:
    try:
        parse(text)
    except QueryError:
        return False
    return True


def _closest_command(word: str) -> str | None:
    """The command meant by a word people try (``list``, ``stop``) or a typo of one (``folow``)."""
    if word in texts.HINTS:
        return texts.HINTS[word]
    names = [info.name for info in texts.COMMANDS] + list(texts.ALIASES)
    found = difflib.get_close_matches(word[:40], names, n=1, cutoff=0.6)
    return texts.ALIASES.get(found[0], found[0]) if found else None


def _start(call: Call) -> Reply:
    """``start``: set the chat up with the default schedule (admins only in groups) and say what next."""
    p = call.p
    existing = call.subscriber()
    if existing is not None:
        count = len(call.store.follows_of(existing.id or 0))
        note = call.inactive_note(existing)
        if _failed_delivery(existing) and call.ctx.can_change:
            # Telegram sends /start when someone unblocks the bot: the chat works again, so resume.
            note = f"Digests were paused ({cut(existing.status_reason or '', 200)}); "
            note += "they are on again."
            existing = resume_subscriber(call.store, existing.address)
        return call.reply(
            f"Welcome back. {call.ctx.capital_place} follows {plural(count, 'query', 'queries')}; "
            f"digests go out {describe_schedule(existing)}.",
            note,
            f"{p}follows lists them, {p}follow QUERY adds one, {p}help shows all commands.",
        )
    if not call.ctx.can_change:
        return call.reply(
            f"PaperTrail is not set up in {call.ctx.place} yet, and only its admins can set it up: "
            f"ask one to send {p}start.",
            error=Problem.NOT_ALLOWED,
        )
    subscriber = call.ensure_subscriber()
    name = cut(call.ctx.chat_name, 60)
    return call.reply(
        f"Welcome to PaperTrail{', ' + name if name else ''}! New arXiv papers matching "
        f"{call.ctx.place}'s follows will arrive in a digest {describe_schedule(subscriber)}.",
        f'Next, follow something: {p}follow cat:cs.DC or {p}follow au:"Zeng Li". '
        f"{p}try QUERY shows what a query would have matched lately; {p}help lists all commands.",
        suggestions=("help follow", "try cat:cs.DC"),
    )


def _failed_delivery(subscriber: Subscriber) -> bool:
    """Paused by the ledger after a permanent delivery failure (not by the chat's own ``pause``)."""
    return subscriber.status == SubscriberStatus.PAUSED and subscriber.status_reason != PAUSED_BY_CHAT


def _help(call: Call) -> Reply:
    """``help``: every command; ``help COMMAND``: one command with examples."""
    p = call.p
    topic = call.args.split(" ", 1)[0].removeprefix("/").casefold() if call.args else ""
    if not topic:
        return call.reply(texts.overview(p))
    name = texts.ALIASES.get(topic, topic)
    if name in texts.BY_NAME:
        return call.reply(texts.page(name, p))
    guess = _closest_command(topic)
    return call.reply(
        f'There is no command "{cut(topic, 40)}".' + (f" Did you mean {p}help {guess}?" if guess else ""),
        texts.command_list(p),
        error=Problem.NOT_FOUND,
        suggestions=(f"help {guess}",) if guess else (),
    )


_COMMANDS: dict[str, Callable[[Call], Reply]] = {
    "start": _start,
    "help": _help,
    "follow": commands_follows.follow,
    "unfollow": commands_follows.unfollow,
    "follows": commands_follows.follows,
    "try": commands_follows.try_,
    "digest": commands_settings.digest,
    "timezone": commands_settings.timezone,
    "pause": commands_settings.pause,
    "resume": commands_settings.resume,
    "status": commands_settings.status,
    "join": commands_newsletters.join,
    "leave": commands_newsletters.leave,
}

__all__ = [
    "COMMANDS",
    "MAX_INPUT_CHARS",
    "MAX_REPLY_CHARS",
    "PAUSED_BY_CHAT",
    "Block",
    "ChatContext",
    "FollowItem",
    "Problem",
    "Reply",
    "follow_items",
    "handle",
    "split_command",
]
