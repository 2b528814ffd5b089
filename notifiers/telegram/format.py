"""Telegram formatting: a rendered digest cut into Telegram messages, each with its row of buttons per item.

Format: Telegram HTML (``parse_mode=HTML``, templates/telegram.html.j2). Limit: the adapter's declared
``max_length`` (:data:`MAX_LENGTH`, 4096 UTF-16 code units per message). Telegram counts the text *after*
parsing the markup, so measuring the HTML (which is never shorter) keeps every part under the limit. A long
digest is split between items with :func:`core.channel.pack_blocks`; a block too long on its own
loses its
markup and is cut (:func:`shorten_html`). Each part records the items it shows as it is packed, so that
their buttons (:func:`item_buttons`) go with it. Sending is notifiers/telegram/notifier.py's.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

import telegram

from core.channel import pack_blocks
from core.delivery.chat_buttons import DISLIKE_LABEL, LIKE_LABEL, Action, callback_data, vote_data
from core.languages import translator
from core.values import DigestItem, Message, versioned_id

MAX_LENGTH = 4096
ELLIPSIS = "…"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: how Telegram measures messages (an emoji outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def escape(text: str) -> str:
    """``text`` escaped for Telegram HTML: ``&``, ``<`` and ``>`` (quotes are literal outside attributes)."""
    return html.escape(text, quote=False)


class _TextOnly(HTMLParser):
    """Collects the text of an HTML fragment, character references decoded, tags dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_to_text(fragment: str) -> str:
    """The plain text a Telegram HTML fragment shows: tags removed, entities decoded."""
    parser = _TextOnly()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.parts)


def _cut(text: str, limit: int, *, encode: bool) -> str:
    """The longest prefix of ``text`` (plus an ellipsis) within ``limit`` UTF-16 units once encoded.

    ``encode`` HTML-escapes the prefix (escaping lengthens text, so the cut is searched, not computed).
    """

    def rendered(n: int) -> str:
        head = text[:n].rstrip() + ELLIPSIS
        return escape(head) if encode else head

    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if utf16_len(rendered(middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    return rendered(low)


def shorten_html(block: str, limit: int) -> str:
    """A well-formed stand-in for one Telegram HTML block longer than ``limit``.

    Cutting through markup could leave a tag open, so the block loses its tags: its text, escaped and cut
    to fit. Only a block with a pathological title or author list ever gets here.
    """
    text = html_to_text(block).strip()
    whole = escape(text) + "\n\n"
    return whole if utf16_len(whole) <= limit else _cut(text, limit - 2, encode=True) + "\n\n"


def shorten_text(block: str, limit: int) -> str:
    """One plain-text block cut to ``limit`` UTF-16 units."""
    return _cut(block.strip(), limit - 2, encode=False) + "\n\n"


@dataclass(frozen=True, slots=True)
class Part:
    """One Telegram message of a digest: its text, whether that text is Telegram HTML, the items it shows,
    and the digest's language (its buttons are worded in it)."""

    text: str
    is_html: bool
    items: tuple[DigestItem, ...] = ()
    language: str = "en"


# Telegram allows 100 buttons per message (more is refused: "reply markup is too long"). An item's row has
# up to four: unfollow, watch, 👍, 👎; so a message holds at most 25 items (split_message), which only
# items without an abstract ever reach: a real one takes a few hundred of the 4,096 characters.
MAX_BUTTONS = 100
BUTTONS_PER_ITEM = 4
MAX_BUTTON_ROWS = MAX_BUTTONS // BUTTONS_PER_ITEM


def item_buttons(
    items: Sequence[DigestItem], language: str | None = None
) -> telegram.InlineKeyboardMarkup | None:
    """One row per item: unfollow the follow that matched it (the first by id), watch the paper, 👍, 👎.

    ``unfollow:<follow id>`` and ``watch:<arXiv id>`` are answered by the Telegram bot (bots role), which
    runs ``unfollow N`` / ``follow id:ARXIV_ID`` for whoever presses, with the group-admin check;
    ``vote:+:<arXiv id>v<N>`` and ``vote:-:…`` record (or, pressed again, take back) the chat's vote on that
    version, with the same check. The labels are worded in ``language`` (English for None); the query and
    the id in them are shown as they are. At most :data:`MAX_BUTTON_ROWS` items get a row.
    """
    t = translator(language)
    rows: list[list[telegram.InlineKeyboardButton]] = []
    for item in items[:MAX_BUTTON_ROWS]:
        row = []
        if item.follows:
            follow_id, query = item.follows[0]
            unfollow = callback_data(Action.UNFOLLOW, str(follow_id))
            row.append(_button(t.gettext("✕ Unfollow {query}", query=query), unfollow))
        watch = callback_data(Action.WATCH, item.arxiv_id)
        row.append(_button(t.gettext("Watch {arxiv_id}", arxiv_id=item.arxiv_id), watch))
        row.append(_button(LIKE_LABEL, vote_data(item.arxiv_id, item.version, 1)))
        row.append(_button(DISLIKE_LABEL, vote_data(item.arxiv_id, item.version, -1)))
        rows.append([button for button in row if button is not None])
    rows = [row for row in rows if row]
    return telegram.InlineKeyboardMarkup(rows) if rows else None


def _button(label: str, data: str | None) -> telegram.InlineKeyboardButton | None:
    if data is None:  # over Telegram's 64 bytes (core.delivery.chat_buttons.callback_data)
        return None
    shown = label if len(label) <= 40 else label[:39].rstrip() + ELLIPSIS
    return telegram.InlineKeyboardButton(shown, callback_data=data)


def _block_items(message: Message) -> list[tuple[str, ...]]:
    """The versioned ids each HTML block shows, from the template's layout (telegram.html.j2): the
    header, then one block per item in ``message.items`` order, then the footer."""
    shown = [(versioned_id(item.arxiv_id, item.version),) for item in message.items]
    if len(message.html_blocks) != len(shown) + 2:
        raise ValueError(
            f"telegram.html.j2 rendered {len(message.html_blocks)} blocks for {len(shown)} items; it must "
            "render a header, one block per item and a footer"
        )
    return [(), *shown, ()]


def split_message(message: Message, limit: int | None = MAX_LENGTH) -> list[Part]:
    """The messages a digest takes: HTML blocks packed to ``limit`` (text blocks when there is no HTML).

    ``limit`` is the adapter's ``max_length``. Deterministic, so a retry that skips
    ``message.skip_parts`` skips exactly what was delivered.
    """
    if message.html_blocks:
        # At most MAX_BUTTON_ROWS items a message, so that every item gets its row of buttons.
        packed = pack_blocks(
            message.html_blocks,
            limit,
            shorten=shorten_html,
            measure=utf16_len,
            items=_block_items(message),
            max_items=MAX_BUTTON_ROWS,
        )
        is_html = True
    else:
        # The shared plain-text template has no cuts: split its blocks at blank lines (between items).
        blocks = message.text_blocks or (message.text,)
        paragraphs = [piece for block in blocks for piece in _paragraphs(block)]
        packed = pack_blocks(paragraphs, limit, shorten=shorten_text, measure=utf16_len)
        is_html = False
    by_id = {versioned_id(item.arxiv_id, item.version): item for item in message.items}
    # Blank lines at the seams of blocks lie outside every tag: stripping them keeps the markup whole.
    return [
        Part(part.text.strip(), is_html, tuple(by_id[i] for i in part.items), message.language)
        for part in packed
        if part.text.strip()
    ]


def _paragraphs(block: str) -> list[str]:
    """``block`` cut after each blank line; the pieces joined give ``block`` back."""
    pieces = block.split("\n\n")
    return [piece + "\n\n" for piece in pieces[:-1]] + [pieces[-1]]
