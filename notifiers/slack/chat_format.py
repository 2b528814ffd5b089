"""How the Slack app shows things: chat replies and the App Home tab as Block Kit with escaped mrkdwn.

The grammar's replies are plain text (``bot.commands``); here every block is escaped for mrkdwn (``&``,
``<``, ``>``: so ``<!channel>`` or ``<https://evil|click>`` typed into a query is shown, never obeyed),
monospace blocks go into ```` ``` ```` fences, and sections carry ``verbatim: true`` so that Slack does not
turn ``#general`` or a bare URL in a query into a link either. Nothing here touches the network or the
store: :mod:`notifiers.slack.chat` fetches, these functions only lay out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.chunking import pack_lines
from bot.commands_base import Block, FollowItem, Reply, cut
from bot.commands_follows import FOLLOWS_PER_PAGE
from bot.commands_table import command_list
from core.delivery.chat_buttons import SLACK_VOTE_ACTIONS
from core.delivery.render import escape_mrkdwn
from core.languages import Translator, translator

# Slack's Block Kit limits.
MAX_SECTION_CHARS = 3000
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_BUTTONS = 5
# The App Home lists this many follows with an Unfollow button each (a home view holds 100 blocks).
HOME_FOLLOWS = 40

RUN_ACTION = "papertrail_run"
"""Action ids ``papertrail_run_0`` … of the suggestion buttons under a reply; the value is a command line."""
UNFOLLOW_ACTION = "papertrail_unfollow"
"""Action ids ``papertrail_unfollow_<number>`` of the App Home's buttons; the value is ``unfollow QUERY``."""
VOTE_ACTIONS = SLACK_VOTE_ACTIONS
"""The 👍 / 👎 buttons under a paper in a digest (notifiers/slack/blocks.py writes them): action id -> the
command it runs; the value is the paper's versioned id, ``2306.03564v2``."""

Json = dict[str, Any]
_FENCE = "```"


def _chunks(text: str, limit: int) -> list[str]:
    """Escaped ``text`` in pieces of at most ``limit`` characters, broken at newlines when possible."""
    pieces = pack_lines(text, limit, measure=len, cut_line=_cut_line)
    return [piece for piece in pieces if piece.strip()]


def _cut_line(line: str, limit: int) -> list[str]:
    """A line longer than ``limit`` in pieces, never cut inside an entity (half of ``&amp;`` shows)."""
    parts: list[str] = []
    while len(line) > limit:
        head = line[:limit]
        amp = head.rfind("&")
        if amp > max(head.rfind(";"), 0):
            head = head[:amp]
        parts.append(head)
        line = line[len(head) :]
    parts.append(line)
    return parts


def _unfenced(text: str) -> str:
    # A ``` inside the text would end the fence early: a zero-width space after each backtick breaks
    # every run without moving the caret under a query error.
    return text.replace("`", "`\u200b")


def block_sections(block: Block) -> list[str]:
    """One reply block as mrkdwn, split into pieces that fit a section (3,000 characters)."""
    if not block.monospace:
        return _chunks(escape_mrkdwn(block.text), MAX_SECTION_CHARS)
    inner = _chunks(_unfenced(escape_mrkdwn(block.text)), MAX_SECTION_CHARS - 2 * len(_FENCE))
    return [f"{_FENCE}{piece}{_FENCE}" for piece in inner]


def reply_mrkdwn(reply: Reply) -> str:
    """The whole reply as one mrkdwn text: the ``text`` of the message (notifications, screen readers)."""
    return "\n".join(piece for block in reply.blocks for piece in block_sections(block))


def section(mrkdwn: str, accessory: Json | None = None) -> Json:
    """A section block of escaped mrkdwn (verbatim: no automatic links or mentions)."""
    block: Json = {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn, "verbatim": True}}
    if accessory is not None:
        block["accessory"] = accessory
    return block


def context(mrkdwn: str) -> Json:
    """A context block (small grey text) of escaped mrkdwn."""
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn, "verbatim": True}]}


def button(label: str, action_id: str, value: str) -> Json:
    """A button; its label is plain text (shown as is, so not escaped) cut to Slack's 75 characters."""
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": cut(label, MAX_BUTTON_TEXT), "emoji": False},
        "action_id": action_id,
        "value": value,
    }


def suggestion_buttons(suggestions: Sequence[str], prefix: str) -> Json | None:
    """An actions block with one button per suggested command line, or None when there are none."""
    usable = [line for line in suggestions if 0 < len(line) <= MAX_BUTTON_VALUE][:MAX_BUTTONS]
    if not usable:
        return None
    elements = [button(f"{prefix}{line}", f"{RUN_ACTION}_{index}", line) for index, line in enumerate(usable)]
    return {"type": "actions", "elements": elements}


def reply_message(
    reply: Reply,
    prefix: str,
    *,
    response_type: str,
    notes: Sequence[str] = (),
    buttons: bool = True,
) -> Json:
    """The slash-command response for ``reply``: text, blocks and ``response_type``.

    ``notes`` are extra mrkdwn paragraphs the Slack app adds (already escaped, they may hold a mention
    the app made itself); ``buttons`` adds the reply's suggestions as buttons.
    """
    pieces = [piece for block in reply.blocks for piece in block_sections(block)] + list(notes)
    blocks = [section(piece) for piece in pieces]
    actions = suggestion_buttons(reply.suggestions, prefix) if buttons else None
    if actions is not None:
        blocks.append(actions)
    return {
        "response_type": response_type,
        "text": "\n".join(pieces),
        "blocks": blocks,
        "unfurl_links": False,
        "unfurl_media": False,
    }


def home_view(
    items: Sequence[FollowItem],
    *,
    summary: str,
    prefix: str,
    notice: str = "",
    t: Translator | None = None,
) -> Json:
    """The App Home tab: the user's own follows with Unfollow buttons, how digests go out, short help.

    ``summary`` (plain text) says how and when digests go out; ``notice`` (plain text) is the answer to
    the button just pressed. Both are escaped here, as is every query. ``t`` is the person's language
    (English by default); the translated sentences carry mrkdwn (``*bold*``) and every value put into
    them is escaped first.
    """
    t = t or translator(None)
    blocks: list[Json] = [{"type": "header", "text": {"type": "plain_text", "text": "PaperTrail"}}]
    if notice:
        blocks.append(context(_chunks(escape_mrkdwn(notice), MAX_SECTION_CHARS)[0]))
    if items:
        blocks.append(
            section(
                t.gettext(
                    "*Your follows* ({count}). {summary}", count=len(items), summary=escape_mrkdwn(summary)
                )
            )
        )
    else:
        blocks.append(
            section(
                t.gettext(
                    "*You follow nothing yet.* Send {p}follow QUERY in the Messages tab, e.g. "
                    "{p}follow cat:cs.DC. {summary}",
                    p=escape_mrkdwn(prefix),
                    summary=escape_mrkdwn(summary),
                )
            )
        )
    for item in items[:HOME_FOLLOWS]:
        shown = f"*{item.number}.* {escape_mrkdwn(cut(item.query))}"
        if options := item.options(t):
            shown += f" · _{escape_mrkdwn(options)}_"
        value = f"unfollow {item.query}"
        accessory = (
            button(t.gettext("Unfollow"), f"{UNFOLLOW_ACTION}_{item.number}", value)
            if len(value) <= MAX_BUTTON_VALUE
            else None
        )
        blocks.append(section(shown, accessory))
    if len(items) > HOME_FOLLOWS:
        page = HOME_FOLLOWS // FOLLOWS_PER_PAGE + 1
        more = len(items) - HOME_FOLLOWS
        blocks.append(
            context(
                escape_mrkdwn(
                    t.gettext(
                        "…and {more} more; {p}follows {page} lists them.", more=more, p=prefix, page=page
                    )
                )
            )
        )
    blocks.append({"type": "divider"})
    blocks.append(
        section(
            t.gettext(
                "*Commands.* In a direct message with PaperTrail they manage your own follows; "
                "in a channel, the channel's."
            )
            + "\n"
            + escape_mrkdwn(command_list(prefix, t))
        )
    )
    blocks.append(
        context(
            escape_mrkdwn(t.gettext("{p}help follow explains the query language, with examples.", p=prefix))
        )
    )
    return {"type": "home", "blocks": blocks}


__all__ = [
    "HOME_FOLLOWS",
    "MAX_SECTION_CHARS",
    "RUN_ACTION",
    "UNFOLLOW_ACTION",
    "VOTE_ACTIONS",
    "block_sections",
    "button",
    "context",
    "home_view",
    "reply_message",
    "reply_mrkdwn",
    "section",
    "suggestion_buttons",
]
