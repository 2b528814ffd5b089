"""The Telegram bot's answers to updates: messages, edits, button presses, and the bot's own membership.

Every command goes through the one grammar, :func:`bot.commands.handle`; this module decides who may
change what (Telegram's admins), which messages are meant for the bot, and how replies look on Telegram.

- Private chats: every text message is a command, with or without ``/`` (the grammar also answers a query
  sent without a command). Stickers, photos and other non-text messages get a short hint.
- Groups and supergroups: only ``/command`` (or ``/command@ThisBot``, or ``@ThisBot command``) is read;
  ``/command@OtherBot`` and everything else is left alone. Anyone may list and try; only the group's
  administrators (``getChatMember`` status creator or administrator, cached for a minute) and anonymous
  admins writing as the group may change its follows and settings.
- A digest's 👍 / 👎 buttons record the chat's vote on that version (pressed again: take it back); the
  presser gets a toast, the keyboard marks the chosen button ("👍 ✓"), and nothing is posted to the chat.
  In groups only administrators may vote, as only they may unfollow: the votes teach PaperTrail what the
  whole group reads. A member pressing one is told so in an alert.
- Edited messages are not re-run: re-running an edited ``/follow`` would add a second follow next to the
  first. The bot says so, and the person sends the command again.
- The bot blocked in a private chat, or removed from a group: the subscriber is paused with the reason (its
  follows are kept); ``/start`` from someone who may change it turns digests on again. Added to a group:
  the bot greets it with what to send first.

What the bot writes itself (the hints above, the greeting) is in the chat's language like every command
reply: the stored one, else the sender's Telegram ``language_code``, else the operator's default language.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import telegram
from telegram import Chat, ChatMemberUpdated, Update, User
from telegram.constants import ChatMemberStatus, ChatType
from telegram.error import TelegramError
from telegram.ext import CallbackContext

from bot.commands import handle
from bot.commands_base import BLOCKED, REMOVED, Block, ChatContext, Problem, Reply, cut, stored_language
from bot.commands_votes import press_vote
from core.config_edges import ChatSettings
from core.db import Database
from core.delivery.chat_buttons import Action
from core.follows import subscribers
from core.languages import DEFAULT_LANGUAGE, N_, Translator, translator
from notifiers.ratelimit import RateLimiter
from notifiers.telegram.chat_render import (
    Button,
    html_parts,
    is_chosen,
    keyboard,
    read_callback,
    read_vote,
    voted_markup,
    without_button,
)
from notifiers.telegram.notifier import Budget, SendError, send_message

log = logging.getLogger(__name__)

Context = CallbackContext[Any, Any, Any, Any]

ADMIN_CACHE_SECONDS = 60.0
"""How long one getChatMember answer decides whether a group member is an admin."""
ADMIN_CACHE_SIZE = 4096
REPLY_BUDGET = Budget(max_wait=5.0, max_retries=3)
"""A reply sits out a flood-control wait up to 5 s and sends one part at most 3 more times; a longer wait
drops it (someone is waiting for the answer; a digest waits longer)."""
ALERT_CHARS = 200
"""Telegram's limit on the text of an answerCallbackQuery alert."""

NO_TEXT = N_("PaperTrail reads text commands only, e.g. /follow cat:cs.DC or /follows. /help lists them all.")
EDITED = N_(
    "Edited messages are not run again, so nothing changed. "
    "Send the corrected command as a new message; /follows shows what this chat follows now."
)
BUTTON_GONE = N_("This button no longer works. /help lists the commands.")
FOLLOW_GONE = N_("That follow is no longer in this chat's follows. /follows lists them.")
_GONE = frozenset({ChatMemberStatus.LEFT, ChatMemberStatus.BANNED})
_ADMINS = frozenset({ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR})
_CHATS = frozenset({ChatType.PRIVATE, ChatType.GROUP, ChatType.SUPERGROUP})


def text_reply(text: str, error: Problem | None = None, language: str = DEFAULT_LANGUAGE) -> Reply:
    """A reply of one plain block that the bot itself writes (not a command's answer)."""
    return Reply((Block(text),), error=error, language=language)


def address_of(chat_id: int) -> str:
    """The subscriber address of a Telegram chat."""
    return f"telegram:{chat_id}"


class ChatHandlers:
    """The update callbacks the Application runs; one instance per bot."""

    def __init__(
        self,
        settings: ChatSettings,
        db: Database,
        bot: Callable[[], telegram.Bot],
        clock: Callable[[], datetime],
        limiter: RateLimiter,
        api_url: str,
    ) -> None:
        """``bot`` returns the initialised Bot (the Application's); ``clock`` is "now" for the grammar;
        ``limiter`` paces replies, the digest notifier's own, so that both keep to one chat's limits;
        ``api_url``: the Bot API server, named in the errors of a send."""
        self.settings = settings
        self.db = db
        self._bot = bot
        self._clock = clock
        self._limiter = limiter
        self._api_url = api_url
        self._admins: dict[tuple[int, int], tuple[float, bool]] = {}

    # -- messages ------------------------------------------------------------------------------------

    async def language(self, chat_id: int, user: User | None) -> Translator:
        """The translator of a chat's language for what the bot writes itself: stored, else the sender's,
        else the operator's default."""
        code = user.language_code if user is not None else None
        language = await asyncio.to_thread(
            stored_language, self.db, address_of(chat_id), code, default=self.settings.default_language
        )
        return translator(language)

    async def on_message(self, update: Update, context: Context) -> None:
        """A new message: run it as a command when it is meant for the bot, and answer once."""
        message = update.message
        if message is None or message.chat.type not in _CHATS:
            return
        chat = message.chat
        if message.migrate_to_chat_id or message.migrate_from_chat_id:
            # A group became a supergroup (new id): the subscription moves with it.
            old = message.migrate_from_chat_id or chat.id
            new = message.migrate_to_chat_id or chat.id
            await asyncio.to_thread(self._move, old, new)
            return
        if message.text is None:
            if chat.type == ChatType.PRIVATE and message.effective_attachment is not None:
                t = await self.language(chat.id, message.from_user)
                await self.send(chat.id, text_reply(t.gettext(NO_TEXT), Problem.EMPTY, t.language))
            return
        if chat.type != ChatType.PRIVATE and message.is_automatic_forward:
            return  # a channel post copied into its discussion group, not a command
        text = self.addressed(message.text, chat)
        if text is None:
            return
        ctx = await self.context(chat, message.from_user, message.sender_chat)
        reply, ids = await asyncio.to_thread(self._handle, ctx, text)
        log.info(
            "telegram: %s in %s: %s",
            reply.command or "no command",
            ctx.address,
            reply.error or "ok",
            extra={"role": "bots"},
        )
        await self.send(chat.id, reply, reply_to=self._reply_to(chat, message.message_id), ids=ids)

    async def on_edited(self, update: Update, context: Context) -> None:
        """An edited message: say that edits are not re-run (in groups, only for commands to this bot)."""
        message = update.edited_message
        if message is None or message.text is None or message.chat.type not in _CHATS:
            return
        if self.addressed(message.text, message.chat) is None:
            return
        t = await self.language(message.chat.id, message.from_user)
        await self.send(
            message.chat.id, text_reply(t.gettext(EDITED), language=t.language), reply_to=message.message_id
        )

    def addressed(self, text: str, chat: Chat) -> str | None:
        """The command text of a message meant for this bot, or None for one it should leave alone.

        In a private chat every message is meant for the bot. In a group only ``/command``,
        ``/command@ThisBot`` and ``@ThisBot command`` are; ``/command@OtherBot`` is another bot's.
        """
        if chat.type == ChatType.PRIVATE:
            return text
        words = text.split(maxsplit=1)
        if not words:
            return None
        first, rest = words[0], words[1] if len(words) > 1 else ""
        me = self._bot().username.casefold()
        if first.startswith("/"):
            _, at, target = first.partition("@")
            return text if not at or target.casefold() == me else None
        return rest if first.casefold() == f"@{me}" else None

    async def context(self, chat: Chat, user: User | None, sender_chat: Chat | None) -> ChatContext:
        """Who is asking, as the grammar needs it; in groups, whether they are an admin."""
        group = chat.type != ChatType.PRIVATE
        if group:
            can_change = await self.is_admin(chat.id, user, sender_chat)
            name = chat.title or ""
        else:
            can_change = True
            name = user.full_name if user is not None else chat.full_name or ""
        return ChatContext(
            address=address_of(chat.id),
            platform="telegram",
            can_change=can_change,
            is_group=group,
            chat_name=name,
            language=user.language_code if user is not None else None,
            prefix="/",
        )

    async def is_admin(self, chat_id: int, user: User | None, sender_chat: Chat | None) -> bool:
        """Whether the sender administers the group: getChatMember, cached for a minute.

        An anonymous admin writes as the group itself (``sender_chat`` is the chat). Someone writing as a
        channel is not an admin of the group. When Telegram cannot say, the answer is no (logged).
        """
        if sender_chat is not None:
            return sender_chat.id == chat_id
        if user is None:
            return False
        key, now = (chat_id, user.id), time.monotonic()
        cached = self._admins.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            member = await self._bot().get_chat_member(chat_id, user.id)
        except TelegramError as exc:
            log.warning(
                "telegram: cannot check whether user %s administers chat %s (%s); treated as a member",
                user.id,
                chat_id,
                exc.message,
                extra={"role": "bots"},
            )
            return False
        admin = member.status in _ADMINS
        if len(self._admins) >= ADMIN_CACHE_SIZE:
            self._admins.pop(next(iter(self._admins)))  # the oldest entry
        self._admins[key] = (now + ADMIN_CACHE_SECONDS, admin)
        return admin

    def _handle(self, ctx: ChatContext, text: str) -> tuple[Reply, dict[int, int]]:
        """Run the grammar (in a worker thread: the store is synchronous) and find the listed follows' ids."""
        reply = handle(self.db, self.settings, ctx, text, now=self._clock())
        return reply, self._follow_ids(ctx, reply)

    def _follow_ids(self, ctx: ChatContext, reply: Reply) -> dict[int, int]:
        """``follows`` numbers -> follow ids, for the reply's unfollow buttons (empty without a list)."""
        if not reply.follows:
            return {}
        try:
            rows = subscribers.follows_at(self.db, ctx.address)
        except Exception:  # the reply still goes out, without buttons
            log.exception("telegram: cannot read the follows of %s for buttons", ctx.address)
            return {}
        return {number: row.id for number, row in enumerate(rows, 1) if row.id is not None}

    # -- buttons -------------------------------------------------------------------------------------

    async def on_callback(self, update: Update, context: Context) -> None:
        """A button press: run what the button says as the presser, answer the query, retire the button."""
        query = update.callback_query
        if query is None:
            return
        message = query.message
        button = read_callback(query.data)
        if message is None or message.chat.type not in _CHATS:
            await self._answer(query)  # an inline-mode button: none of this bot's
            return
        if button is None:
            t = await self.language(message.chat.id, query.from_user)
            await self._answer(query, t.gettext(BUTTON_GONE), alert=True)
            return
        chat = message.chat
        ctx = await self.context(chat, query.from_user, None)
        if button.action == Action.VOTE:
            await self._vote(query, message, ctx, button)
            return
        reply, ids = await asyncio.to_thread(self._press, ctx, button)
        log.info(
            "telegram: button %s in %s: %s",
            button.action.value,
            ctx.address,
            reply.error or "ok",
            extra={"role": "bots"},
        )
        if reply.error == Problem.NOT_ALLOWED and ctx.is_group:
            # A refusal goes to the one who pressed, not to the whole group.
            await self._answer(query, reply.text, alert=True)
            return
        await self.send(chat.id, reply, ids=ids)
        await self._answer(query)
        if reply.ok and isinstance(message, telegram.Message):
            await self._retire(message, query.data or "", button)

    async def _vote(
        self, query: telegram.CallbackQuery, message: object, ctx: ChatContext, button: Button
    ) -> None:
        """A digest's 👍 / 👎: record the vote (or, on the button marked chosen, take it back), say so in a
        toast, and mark the chosen button.

        Nothing is posted to the chat: the toast goes to the presser alone, and the keyboard shows the
        chat's vote to everyone. A refusal (a group member, a paper no longer stored) is an alert.
        """
        vote = read_vote(button.value)
        assert vote is not None  # read_callback only lets well-formed vote data through
        markup = message.reply_markup if isinstance(message, telegram.Message) else None
        chosen = is_chosen(markup, query.data or "")
        pressed = await asyncio.to_thread(
            press_vote,
            self.db,
            self.settings,
            ctx,
            vote.arxiv_id,
            vote.version,
            vote.value,
            chosen=chosen,
            now=self._clock(),
        )
        log.info(
            "telegram: vote button in %s: %s",
            ctx.address,
            pressed.error or f"vote {pressed.vote}",
            extra={"role": "bots"},
        )
        await self._answer(query, pressed.text, alert=pressed.error is not None)
        if pressed.vote is None or not isinstance(message, telegram.Message):
            return
        edited = voted_markup(markup, f"{vote.arxiv_id}v{vote.version}", pressed.vote)
        if edited is None:
            return
        try:
            await self._bot().edit_message_reply_markup(
                chat_id=message.chat.id, message_id=message.message_id, reply_markup=edited
            )
        except TelegramError as exc:  # too old to edit: the vote is recorded all the same
            log.debug("telegram: vote buttons of message %s kept: %s", message.message_id, exc.message)

    def _press(self, ctx: ChatContext, button: Button) -> tuple[Reply, dict[int, int]]:
        """The command a button stands for, through the grammar (so its checks apply)."""
        if button.action == Action.WATCH:
            return self._handle(ctx, f"follow id:{button.value}")
        if button.action == Action.UNFOLLOW:
            number = self._number_of(ctx.address, int(button.value))
            if number is None:
                language = stored_language(
                    self.db, ctx.address, ctx.language, default=self.settings.default_language
                )
                t = translator(language)
                return text_reply(t.gettext(FOLLOW_GONE), Problem.NOT_FOUND, t.language), {}
            return self._handle(ctx, f"unfollow {number}")
        return self._handle(ctx, button.value)

    def _number_of(self, address: str, follow_id: int) -> int | None:
        """The number ``follows`` shows for follow ``follow_id`` of this chat; None when it is not there."""
        for number, row in enumerate(subscribers.follows_at(self.db, address), 1):
            if row.id == follow_id:
                return number
        return None

    async def _retire(self, message: telegram.Message, data: str, button: Button) -> None:
        """After a press: suggestions are spent (all go); an unfollow or watch button goes alone."""
        if message.reply_markup is None:
            return
        markup = None if button.action == Action.COMMAND else without_button(message.reply_markup, data)
        try:
            await self._bot().edit_message_reply_markup(
                chat_id=message.chat.id, message_id=message.message_id, reply_markup=markup
            )
        except TelegramError as exc:  # too old to edit, or already edited: the buttons just stay
            log.debug("telegram: buttons of message %s kept: %s", message.message_id, exc.message)

    async def _answer(self, query: telegram.CallbackQuery, text: str = "", *, alert: bool = False) -> None:
        try:
            await self._bot().answer_callback_query(
                query.id, text=cut(text, ALERT_CHARS) if text else None, show_alert=alert
            )
        except TelegramError as exc:  # the press is more than ~15 minutes old: nothing to answer
            log.debug("telegram: callback query %s not answered: %s", query.id, exc.message)

    # -- the bot's own membership ----------------------------------------------------------------------

    async def on_my_chat_member(self, update: Update, context: Context) -> None:
        """Blocked or removed: pause the chat's subscription. Added to a group: greet it."""
        change = update.my_chat_member
        if change is None or change.chat.type not in _CHATS:
            return
        old, new = change.old_chat_member.status, change.new_chat_member.status
        chat = change.chat
        if new in _GONE and old not in _GONE:
            reason = BLOCKED if chat.type == ChatType.PRIVATE else REMOVED
            await asyncio.to_thread(self._pause, address_of(chat.id), reason)
        elif old in _GONE and new not in _GONE and chat.type != ChatType.PRIVATE:
            known = await asyncio.to_thread(subscribers.subscriber_by_address, self.db, address_of(chat.id))
            t = await self.language(chat.id, change.from_user)
            await self.send(chat.id, text_reply(greeting(change, known is not None, t), language=t.language))

    def _pause(self, address: str, reason: str) -> None:
        """Pause an active subscriber with ``reason``; a chat paused by its own ``pause`` stays as it is."""
        subscriber = subscribers.subscriber_by_address(self.db, address)
        if (
            subscriber is None
            or subscriber.id is None
            or not subscribers.pause(self.db, subscriber.id, reason)
        ):
            return
        log.info("telegram: %s paused: %s", address, reason, extra={"role": "bots"})

    def _move(self, old_id: int, new_id: int) -> None:
        """Move the subscription of a group that Telegram upgraded to a supergroup with a new id."""
        old, new = address_of(old_id), address_of(new_id)
        if not subscribers.move_address(self.db, old, new):
            return
        log.info("telegram: %s moved to %s (supergroup)", old, new, extra={"role": "bots"})

    # -- sending ---------------------------------------------------------------------------------------

    async def send(
        self,
        chat_id: int,
        reply: Reply,
        *,
        reply_to: int | None = None,
        ids: dict[int, int] | None = None,
    ) -> list[telegram.Message]:
        """Send a reply as Telegram HTML (split when long; buttons under the last part); never raises.

        Each part goes through the digests' send path (:func:`notifiers.telegram.notifier.send_message`)
        and their limiter: per chat, per group and overall, so a burst of replies is paced, not refused,
        and shares Telegram's limits with the digests going out to the same chat. A part Telegram does not
        take (a chat that blocked the bot, a longer flood wait, the Bot API failing) is logged and ends
        the reply: the update is done either way.
        """
        parts = html_parts(reply)
        markup = keyboard(reply, "/", ids or {})
        sent: list[telegram.Message] = []
        chat: int | str = chat_id
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            try:
                outcome = await send_message(
                    self._bot(),
                    chat,
                    part,
                    html=True,
                    markup=markup if last else None,
                    limiter=self._limiter,
                    budget=REPLY_BUDGET,
                    api_url=self._api_url,
                    reply_to=reply_to if index == 0 else None,
                )
            except SendError as exc:
                if exc.retryable:
                    log.warning("telegram: reply to chat %s dropped: %s", chat, exc.reason)
                else:
                    log.info("telegram: cannot answer chat %s: %s", chat, exc.reason)
                break
            sent.append(outcome.message)
            chat = outcome.chat
        return sent

    @staticmethod
    def _reply_to(chat: Chat, message_id: int) -> int | None:
        """In a group the answer quotes the command (several people talk there); in a private chat not."""
        return message_id if chat.type != ChatType.PRIVATE else None


def greeting(change: ChatMemberUpdated, known: bool, t: Translator | None = None) -> str:
    """What the bot says when it is added to a group (``known``: the group had a subscription)."""
    t = t or translator(None)
    title = cut(change.chat.title or "", 60)
    hello = t.gettext("Hello, {title}!", title=title) if title else t.gettext("Hello!")
    if known:
        return t.gettext(
            "{hello} PaperTrail is back. This group's follows are kept; an admin can send /start to turn "
            "digests on again. /follows lists them, /help lists all commands.",
            hello=hello,
        )
    return t.gettext(
        "{hello} PaperTrail posts new arXiv papers that match this group's follows. An admin can set it "
        "up with /start and add a follow with /follow QUERY, e.g. /follow cat:cs.DC. "
        "Anyone can use /follows, /try, /status and /help.",
        hello=hello,
    )


__all__ = [
    "ADMIN_CACHE_SECONDS",
    "BLOCKED",
    "BUTTON_GONE",
    "EDITED",
    "FOLLOW_GONE",
    "NO_TEXT",
    "REMOVED",
    "ChatHandlers",
    "address_of",
    "greeting",
    "text_reply",
]
