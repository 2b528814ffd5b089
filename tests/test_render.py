"""Rendered digests: golden files for each channel, the cap, and escaping of untrusted text."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from core.config import Settings
from core.render import Renderer, digest_subject
from core.values import DigestItem, Message
from ingest.arxiv_rss_parse import parse_feed
from notifiers.console import ConsoleNotifier
from notifiers.email import EmailNotifier
from tests.conftest import BIG_FEED

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("PAPERTRAIL_UPDATE_GOLDEN") == "1"


def real_items() -> list[DigestItem]:
    """Three new cs.DC papers and two revisions from the recorded feed, as a digest would list them."""
    papers = parse_feed(BIG_FEED.read_bytes()).items
    new = [p for p in papers if p.version == 1 and "cs.DC" in p.categories][:3]
    revised = [p for p in papers if p.version > 1 and "cs.DC" in p.categories][:2]
    return [
        DigestItem(p.arxiv_id, p.version, p.title, p.authors, p.categories, ("category cs.DC",), p.abstract)
        for p in new + revised
    ]


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == actual, (
        f"{name} changed; PAPERTRAIL_UPDATE_GOLDEN=1 rewrites it"
    )


@pytest.mark.parametrize("channel", ["email", "console"])
def test_golden_digests(channel: str) -> None:
    message = Renderer(max_items=50).render(channel, real_items(), "ada@example.org")
    assert message.subject == "PaperTrail: 3 new papers, 2 revisions"
    check_golden(f"{channel}.txt", message.text)
    if channel == "email":
        assert message.html is not None
        check_golden("email.html", message.html)
    else:
        assert message.html is None


def test_unknown_channel_gets_the_plain_digest() -> None:
    items = real_items()
    plain = Renderer().render("webhook", items, "12345")
    assert plain.text == Renderer().render("console", items, "12345").text


def test_cap_counts_the_rest() -> None:
    view = Renderer(max_items=4).view(real_items(), "x")
    assert (len(view.new), len(view.revisions), view.more, view.total) == (3, 1, 1, 5)


def test_subject_counts() -> None:
    assert digest_subject(1, 0) == "PaperTrail: 1 new paper"
    assert digest_subject(0, 1) == "PaperTrail: 1 revision"
    assert digest_subject(2, 3) == "PaperTrail: 2 new papers, 3 revisions"


HOSTILE = DigestItem(
    "2411.99999",
    1,
    'Robust <script>alert("x")</script> \x1b[31mred\x1b[0m & "quoted"',
    ("Eve <eve@evil.example>",),
    ("cs.CR",),
    ('title: "<b>"',),
)


def test_html_escapes_untrusted_text() -> None:
    html = Renderer().render("email", [HOSTILE], "ada@example.org").html or ""
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<eve@evil.example>" not in html and "&lt;eve@evil.example&gt;" in html
    assert "<b>" not in html


async def test_console_strips_terminal_escapes() -> None:
    out = io.StringIO()
    await ConsoleNotifier(out).send("me", Renderer().render("console", [HOSTILE], "me"))
    assert "\x1b" not in out.getvalue() and "[31mred" in out.getvalue()


def test_email_subject_cannot_inject_headers() -> None:
    message = Message(subject="Hello\r\nBcc: victim@example.org", text="x")
    mail = EmailNotifier(Settings()).build("ada@example.org", message)
    assert mail["Subject"] == "Hello Bcc: victim@example.org"
    assert mail["Bcc"] is None
