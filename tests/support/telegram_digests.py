"""Digests for the Telegram notifier, and the check that its HTML is well formed."""

from __future__ import annotations

import functools
from html.parser import HTMLParser

from core.delivery.render import Renderer
from core.reasons import AUTHOR, TITLE, Reason
from core.values import DigestItem, Message, Receipt
from tests.fakes.telegram_api import (
    parse_html,
)

TOKEN = "123456:TEST-secret-token"


# Telegram's HTML tags; the digest template uses a subset.
TELEGRAM_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "blockquote"}
    | {"tg-spoiler", "span", "tg-emoji"}
)


def two_items() -> list[DigestItem]:
    return [
        DigestItem(
            "2611.08864",
            1,
            "Policy lag in asynchronous rollouts",
            ("Zeng Li", "Ada Lovelace"),
            ("cs.LG", "cs.DC"),
            (Reason(AUTHOR, "Zeng Li"),),
            "We measure policy lag.",
        ),
        DigestItem(
            "2611.01234",
            2,
            "Mixture of experts, revisited",
            ("Grace Hopper",),
            ("cs.CL",),
            (Reason(TITLE, "experts"),),
            "A revision.",
            changes=("title", "comment"),
        ),
    ]


@functools.cache
def renderer(max_items: int = 50, public_url: str = "") -> Renderer:
    """One Renderer per cap: compiling the templates again for every digest would slow the tests down."""
    return Renderer(max_items=max_items, public_url=public_url)


def digest(
    items: list[DigestItem],
    *,
    max_items: int = 50,
    chat: str = "777",
    public_url: str = "",
    receipt: Receipt | None = None,
) -> Message:
    return renderer(max_items, public_url).render("telegram", items, chat, receipt=receipt)


class _TagChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TELEGRAM_TAGS:
            self.errors.append(f"<{tag}> is not a Telegram tag")
        self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.errors.append(f"</{tag}> closes nothing open")


def assert_well_formed(part: str) -> None:
    """Only Telegram's tags, balanced (html.parser), and Telegram's own parser rules (the fake's)."""
    checker = _TagChecker()
    checker.feed(part)
    checker.close()
    assert not checker.errors and not checker.open, (checker.errors, checker.open)
    parse_html(part)
