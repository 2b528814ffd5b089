"""A digest's output in every channel, and the words a translated digest may keep."""

from __future__ import annotations

import html
import io
import json
import re
from datetime import UTC, datetime

from core.values import DigestItem, Message, Receipt
from notifiers.console.notifier import ConsoleNotifier
from notifiers.slack.blocks import build_payloads
from notifiers.webhook.payload import digest_payload
from tests.hostile import sample_receipt

FIXED = datetime(2026, 11, 17, 8, 0, 5, tzinfo=UTC)


NEWSLETTERS = {"dc-weekly": "Distributed weekly"}


# The fixed English wording of the digest templates and adapters: none of it may reach a Chinese reader.
ENGLISH_PHRASES = (
    "New papers",
    "Revisions",
    "Why:",
    "changed:",
    "AI guide",
    "machine-generated",
    "TL;DR",
    "What changed",
    "et al.",
    "authors)",
    "more not shown",
    "PaperTrail digest for",
    "matched your",
    "Manage",
    "Unsubscribe",
    "Leave ",
    "new paper",
    "revision",
    "title:",
    "abstract:",
    "author ",
    "category ",
    "paper 2611",
    "newsletter dc-weekly",
    "Watch",
    "Unfollow",
    "part 1 of",
    "Since",
    "scanned",
    "announcement",
    "failing",
    "behind",
    "catches up",
)


# Latin words a Chinese digest may show besides the papers' own data: names and abbreviations.
# Also the receipt's source names and the reader's timezone abbreviation (Asia/Shanghai's CST).
ALLOWED_WORDS = {"PaperTrail", "arXiv", "AI", "DOI", "GPU", "rollout", "OAI", "PMH", "CST", "BibTeX"}


def receipt_for(language: str, matched: int) -> Receipt:
    """The golden receipt in a reader's zone: Berlin for English, Beijing for Chinese."""
    return sample_receipt(matched, "Europe/Berlin" if language == "en" else "Asia/Shanghai")


async def console_output(message: Message) -> str:
    out = io.StringIO()
    await ConsoleNotifier(out).send("12345", message)
    return out.getvalue()


def webhook_json(message: Message) -> str:
    return json.dumps(digest_payload(message, FIXED), indent=2) + "\n"


def slack_webhook_json(message: Message) -> str:
    bodies = [payload.body() for payload in build_payloads(message)]
    return json.dumps(bodies, indent=2, ensure_ascii=False) + "\n"


def _values(items: list[DigestItem]) -> list[str]:
    """Every piece of paper data a digest shows: the render may show these in any language."""
    values = ["ada@example.org", "12345", "Distributed weekly", "dc-weekly", "https://papertrail.example"]
    for item in items:
        values += [item.title, item.abstract, item.url, f"{item.arxiv_id}v{item.version}", item.arxiv_id]
        values += [*item.authors, *item.categories, " ".join(item.categories)]
        values += [reason.split(" ", 1)[-1].removeprefix("dc-weekly: ") for reason in item.reasons]
        values += [value.split(" ", 1)[-1] for value in item.reasons if " " in value]
    return sorted(set(values), key=len, reverse=True)


def _readable(message: Message) -> list[str]:
    """What a reader of each format sees: tags dropped, entities decoded, Slack's JSON unpacked."""
    texts = [message.subject, message.text]
    if message.html:
        shown = re.sub(r"<style>.*?</style>", " ", message.html, flags=re.S)
        texts.append(html.unescape(re.sub(r"<[^>]+>", " ", shown)))
    if message.mrkdwn:
        for payload in build_payloads(message):
            texts.append(html.unescape(payload.text))
            texts += [html.unescape(text) for text in _block_texts(payload.body()["blocks"])]
    return texts


def _block_texts(node: object) -> list[str]:
    """Every ``text`` string in Block Kit blocks."""
    if isinstance(node, dict):
        found = [node["text"]] if isinstance(node.get("text"), str) else []
        return found + [t for value in node.values() for t in _block_texts(value)]
    if isinstance(node, list):
        return [t for value in node for t in _block_texts(value)]
    return []
