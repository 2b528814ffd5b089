"""Slack formatting: a rendered digest as Block Kit messages, for the bot and for incoming webhooks alike.

Built from the ``slack.mrkdwn.j2`` template's blocks (see the convention at the top of that template): a
header, then a section (mrkdwn) and a context block per paper, and for the bot an actions block with 👍 /
👎 (:data:`LIKE_ACTION`, :data:`DISLIKE_ACTION`) that the Slack app (notifiers/slack/chat.py) answers.
Limits: 50 blocks per message, 3,000 characters per section, 150 per header; a longer digest becomes several
messages, split only between papers (with the buttons, 16 papers a message instead of 24).

:func:`build_payloads` is the one place that turns a :class:`Message` into Block Kit;
notifiers/slack/notifier.py and notifiers/slack/webhook.py send what it builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.channel import pack_blocks
from core.delivery.chat_buttons import DISLIKE_LABEL, LIKE_LABEL, SLACK_DISLIKE_ACTION, SLACK_LIKE_ACTION
from core.delivery.render import PART, escape_mrkdwn
from core.languages import translator
from core.values import DigestItem, Message

# Slack's Block Kit limits.
MAX_BLOCKS = 50
MAX_HEADER_CHARS = 150
MAX_SECTION_CHARS = 3000
# A template block that is exactly this becomes a divider.
DIVIDER = "---"
# The vote buttons under a paper (bot form only): action ids the Slack app handles
# (notifiers/slack/chat_format.py names them too), the value is the versioned id, ``2306.03564v2``.
# Labels are the same in every language.
LIKE_ACTION, DISLIKE_ACTION = SLACK_LIKE_ACTION, SLACK_DISLIKE_ACTION


Block = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SlackPayload:
    """One Slack message of a digest: Block Kit blocks and the notification fallback text."""

    text: str
    blocks: tuple[Block, ...]

    def body(self) -> dict[str, Any]:
        """The JSON body for an incoming webhook (chat.postMessage takes the same fields)."""
        return {"text": self.text, "blocks": list(self.blocks), "unfurl_links": False, "unfurl_media": False}


def _unescape(text: str) -> str:
    """Undo :func:`core.delivery.render.escape_mrkdwn` for plain_text fields, which Slack shows verbatim."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def clip_mrkdwn(text: str, limit: int) -> str:
    """Cut mrkdwn to at most ``limit`` characters with an ellipsis, never inside ``<…>`` or ``&…;``.

    The template keeps sections short; this is the safety net for pathological input (a title made of
    ampersands grows fivefold when escaped).
    """
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    # A link or mention cut in half would swallow the rest of the text or show raw syntax.
    if cut.rfind("<") > cut.rfind(">"):
        cut = cut[: cut.rfind("<")]
    # Likewise half an entity (&am…).
    if cut.rfind("&") > cut.rfind(";"):
        cut = cut[: cut.rfind("&")]
    return cut.rstrip() + "…"


def _plain(text: str, limit: int, suffix: str = "") -> Block:
    text = " ".join(text.split())
    room = limit - len(suffix)
    if len(text) > room:
        text = text[: room - 1].rstrip() + "…"
    return {"type": "plain_text", "text": (text or "PaperTrail") + suffix, "emoji": True}


def _mrkdwn(text: str) -> Block:
    # verbatim: Slack must not turn "@channel" or "#general" in a title into a mention or a channel link;
    # only the explicit <url|text> links the template writes are links.
    return {"type": "mrkdwn", "text": clip_mrkdwn(text, MAX_SECTION_CHARS), "verbatim": True}


def header_block(text: str, suffix: str = "") -> Block:
    """A header block: plain text cut to fit 150 characters with ``suffix`` (e.g. " (2/3)") kept whole."""
    return {"type": "header", "text": _plain(text, MAX_HEADER_CHARS, suffix)}


def _units(template_blocks: Iterable[str]) -> list[list[Block]]:
    """Map template blocks (after the header) to Block Kit, grouped into units a split never cuts.

    A block with a context part (an item, the footer) closes a unit; headings and dividers stay with the
    block that follows them, so a message never ends on a lone "New papers" heading.
    """
    units: list[list[Block]] = []
    pending: list[Block] = []
    for raw in template_blocks:
        section, part, context = raw.partition(PART)
        section, context, has_part = section.strip(), context.strip(), bool(part)
        if not has_part and section == DIVIDER:
            pending.append({"type": "divider"})
            continue
        if section:
            pending.append({"type": "section", "text": _mrkdwn(section)})
        if context:
            pending.append({"type": "context", "elements": [_mrkdwn(context)]})
        if has_part and pending:
            units.append(pending)
            pending = []
    if pending:
        units.append(pending)
    return units


def _vote_block(paper: str) -> Block:
    """The actions block of 👍 / 👎 for one paper version (``2306.03564v2``)."""
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": label, "emoji": True},
                "action_id": action,
                "value": paper,
            }
            for label, action in ((LIKE_LABEL, LIKE_ACTION), (DISLIKE_LABEL, DISLIKE_ACTION))
        ],
    }


def _with_votes(units: list[list[Block]], items: Sequence[DigestItem]) -> list[list[Block]]:
    """Each paper's unit with its vote buttons after the context block; the footer's unit as it is.

    The template's layout says which unit shows which paper: one unit per item, in ``message.items``
    order (a heading or divider rides with the item after it), then the footer's.
    """
    if len(units) != len(items) + 1:
        raise ValueError(
            f"slack.mrkdwn.j2 rendered {len(units)} units for {len(items)} items; it must render one unit "
            "per item and a footer"
        )
    papers = [f"{item.arxiv_id}v{item.version}" for item in items]
    return [[*unit, _vote_block(paper)] for unit, paper in zip(units[:-1], papers, strict=True)] + units[-1:]


def _fallback_units(message: Message) -> list[list[Block]]:
    """Sections of the plain-text digest, for a message rendered without the Slack template."""
    lines = [escape_mrkdwn(line) + "\n" for line in message.text.splitlines()]
    chunks = [packed.text for packed in pack_blocks(lines, MAX_SECTION_CHARS, shorten=clip_mrkdwn)]
    return [[{"type": "section", "text": _mrkdwn(chunk)}] for chunk in chunks if chunk.strip()]


def _pack(units: Sequence[list[Block]], budget: int) -> list[list[Block]]:
    """Greedily fill messages of at most ``budget`` blocks with whole units, in order."""
    messages: list[list[Block]] = []
    current: list[Block] = []
    for unit in units:
        if current and len(current) + len(unit) > budget:
            messages.append(current)
            current = []
        current.extend(unit)
    if current or not messages:
        messages.append(current)
    return messages


def build_payloads(message: Message, *, vote_buttons: bool = False) -> list[SlackPayload]:
    """The Slack messages for one digest: at most 50 blocks each, split only between items.

    Each message starts with a header (the digest's first template block, numbered "(2/3)" when the
    digest takes several messages) and carries a ``text`` fallback for notifications and screen readers,
    worded in the message's language. ``vote_buttons`` puts 👍 / 👎 under each paper: only for the bot
    (:class:`SlackNotifier`), whose app receives the clicks; an incoming webhook's channel is no
    ``slack:`` subscriber a click could vote for.
    """
    t = translator(message.language)
    if message.mrkdwn_blocks:
        title = _unescape(message.mrkdwn_blocks[0].strip()) or message.subject
        units = _units(message.mrkdwn_blocks[1:])
        if vote_buttons:
            units = _with_votes(units, message.items)
    else:
        title = message.subject
        units = _fallback_units(message)
    messages = _pack(units, MAX_BLOCKS - 1)
    total = len(messages)
    payloads = []
    for number, blocks in enumerate(messages, start=1):
        suffix = f" ({number}/{total})" if total > 1 else ""
        header = header_block(title, suffix)
        numbered = t.gettext(" (part {number} of {total})", number=number, total=total) if total > 1 else ""
        text = escape_mrkdwn(message.subject + numbered)
        payloads.append(SlackPayload(text=text, blocks=(header, *blocks)))
    return payloads
