"""One command grammar for every chat: parse a message, run the command on the store, say what happened.

The Telegram bot and the Slack app both call :func:`handle` with the text of a message and a
:class:`ChatContext` (which subscriber the chat is, whether the sender may change it, how commands are
typed there) and send back the :class:`Reply`. Neither re-implements a command. Which commands exist, what
they are called, who may run them and their help are one table, :data:`bot.commands_table.COMMANDS`.
The grammar, every command and the limits are described in docs/chat-commands.md::

    message := [ "/" ] [ "papertrail" ] COMMAND [ "@" BOTNAME ] [ ARGUMENTS ]     at most 2,000 characters
    COMMAND := start | help | follow | unfollow | follows | try | digest | timezone | pause | resume | status
             | join | leave | language | like | dislike | unvote | likes | recommend

Command words are matched case-insensitively after Unicode NFKC folding (so a full-width ``／ｆｏｌｌｏｗ``
works too); ``/follow@PaperTrailBot`` is Telegram's form in groups. Runs of whitespace in the arguments,
newlines included, count as one space. Control and bidi-override characters are removed first.

Replies are **plain text and not escaped**: the bots escape every block for their format (HTML for
Telegram, mrkdwn for Slack) and show ``monospace`` blocks (a query with a caret under an error) in a
fixed-width font. A reply is at most :data:`MAX_REPLY_CHARS` characters before escaping.

Replies are in the chat's language (English or Simplified Chinese): the one chosen with ``language``,
else the sender's platform language, else the operator's default language (``PAPERTRAIL_DEFAULT_LANGUAGE``,
:func:`bot.commands_base.reply_language`).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from datetime import datetime

from bot import commands_language, commands_table, commands_votes
from bot.commands_base import (
    MAX_INPUT_CHARS,
    MAX_REPLY_CHARS,
    Block,
    Call,
    ChatContext,
    Problem,
    Reply,
    cut,
    reply_language,
    stored_language,
)
from core.config_edges import ChatSettings
from core.db import Database
from core.escaping import strip_control
from core.follows.query import QueryError, parse
from core.languages import N_, Translator, translator
from core.models import utcnow

log = logging.getLogger(__name__)


def handle(
    db: Database, settings: ChatSettings, ctx: ChatContext, text: str, *, now: datetime | None = None
) -> Reply:
    """Run one chat message as a command and return the reply to send; never raises.

    Synchronous, like the store: an async bot may call it directly (as the rest of the service calls the
    store) or through ``asyncio.to_thread``. An unexpected failure (the database is down) is logged with
    its traceback and answered with an apology, so that a chat always gets an answer. ``now`` is for
    tests; it defaults to the current time.
    """
    now = now or utcnow()
    try:
        reply = _dispatch(db, settings, ctx, text, now)
    except Exception:
        log.exception("chat command from %s failed: %r", ctx.address, text[:200])
        t = translator(stored_language(db, ctx.address, ctx.language, default=settings.default_language))
        reply = Reply((Block(t.gettext(SORRY)),), error=Problem.INTERNAL, language=t.language)
    return _finish(reply)


SORRY = N_("Sorry, something went wrong on PaperTrail's side. Please try again in a few minutes.")
"""The apology for a failure on PaperTrail's side (the Slack app sends it too)."""


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


def _dispatch(db: Database, settings: ChatSettings, ctx: ChatContext, text: str, now: datetime) -> Reply:
    p = ctx.prefix
    language = reply_language(db, ctx, default=settings.default_language)
    t = translator(language)
    if len(text) > MAX_INPUT_CHARS:
        return Reply(
            (
                Block(
                    t.gettext(
                        "That message is {length:,} characters long; a command can be at most {limit:,} "
                        "(a follow query at most 1,000). Send a shorter one; {p}help lists the commands.",
                        length=len(text),
                        limit=MAX_INPUT_CHARS,
                        p=p,
                    )
                ),
            ),
            error=Problem.TOO_LONG,
            language=language,
        )
    word, args = split_command(text)
    if not word:
        return Reply(
            (Block(t.gettext("Send a command, e.g. {p}follow cat:cs.DC; {p}help lists them all.", p=p)),),
            error=Problem.EMPTY,
            language=language,
        )
    command = commands_table.find(word)
    if command is None:
        return _unknown(ctx, t, word, args, text)
    call = Call(db, settings, ctx, now, command.name, args, language)
    if command.changes_with(args) and not ctx.can_change:
        if command.vote:
            refusal = t.gettext(commands_votes.NOT_ALLOWED, place=call.place, p=p)
        else:
            refusal = t.gettext(
                "Only admins of {place} can change its follows and settings. "
                "Anyone can use {p}follows, {p}status, {p}try and {p}help.",
                place=call.place,
                p=p,
            )
        return call.reply(refusal, error=Problem.NOT_ALLOWED)
    return command.run(call)


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
    return Reply(tuple(blocks), reply.command, reply.error, reply.suggestions, reply.follows, reply.language)


# Something that looks like a query sent without a command.
_QUERYISH = re.compile(r"(?i)(?:^|[\s(])(?:cat|au|ti|abs|id):")


def _unknown(ctx: ChatContext, t: Translator, word: str, args: str, text: str) -> Reply:
    p = ctx.prefix
    whole = " ".join(strip_control(text).split())
    guess = commands_table.closest(word)
    # A near miss of a command word is a typo ("folow cat:cs.AI"), with or without a slash (Slack's
    # commands never have one); otherwise a message that parses as a query is a query without a command.
    if guess is None and not whole.startswith("/") and _QUERYISH.search(whole) and _parses(whole):
        shown = cut(whole, 80)
        return Reply(
            (
                Block(
                    t.gettext(
                        "To follow that, send {p}follow {query} — or {p}try {query} to see what it matches.",
                        p=p,
                        query=shown,
                    )
                ),
            ),
            error=Problem.UNKNOWN_COMMAND,
            suggestions=(f"follow {whole}", f"try {whole}"),
            language=t.language,
        )
    shown = cut(word, 40)
    if guess is None:
        return Reply(
            (
                Block(
                    t.gettext(
                        'Unknown command "{word}". {p}help lists the commands, e.g. {p}follow cat:cs.DC.',
                        word=shown,
                        p=p,
                    )
                ),
            ),
            error=Problem.UNKNOWN_COMMAND,
            language=t.language,
        )
    suggestion = f"{guess} {args}".strip()
    if guess == "language" and not args:
        # "中文", "english": the language meant is clear, so the button sets it.
        chosen = commands_language.language_of(word)
        suggestion = f"language {chosen}" if chosen else suggestion
    return Reply(
        (
            Block(
                t.gettext(
                    'Unknown command "{word}". Did you mean {p}{command}? {p}help lists all commands.',
                    word=shown,
                    p=p,
                    command=guess,
                )
            ),
        ),
        error=Problem.UNKNOWN_COMMAND,
        suggestions=(suggestion,),
        language=t.language,
    )


def _parses(text: str) -> bool:
    try:
        parse(text)
    except QueryError:
        return False
    return True


__all__ = ["SORRY", "handle", "split_command"]
