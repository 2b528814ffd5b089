"""Rendered digests: golden files for each channel, the cap, and escaping of untrusted text."""

from __future__ import annotations

import io
import re

import css_inline
import pytest

from core.config import Settings
from core.delivery.render import CUT, Renderer, digest_subject
from core.people import tokens
from core.reasons import ABSTRACT, AUTHOR, CATEGORY, PAPER, TITLE, Reason
from core.values import DigestItem, Message, Receipt
from notifiers.console.notifier import ConsoleNotifier
from notifiers.email.notifier import EmailNotifier
from tests.goldens import check_golden
from tests.hostile import hostile_items, hostile_receipt, many_items, sample_receipt
from tests.support.real_items import real_items


@pytest.mark.parametrize("channel", ["email", "console"])
def test_golden_digests(channel: str) -> None:
    items = real_items()
    message = Renderer(max_items=50, public_url="https://papertrail.example").render(
        channel, items, "ada@example.org", receipt=sample_receipt(len(items))
    )
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
    (Reason(TITLE, '"<b>"'),),
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
    mail = EmailNotifier(Settings().smtp()).build("ada@example.org", message)
    assert mail["Subject"] == "Hello Bcc: victim@example.org"
    assert mail["Bcc"] is None


def signed_renderer() -> Renderer:
    """The renderer the golden files with links are made with."""
    return Renderer(secret_key="test-key", public_url="https://papertrail.example")


@pytest.mark.parametrize(
    ("name", "items", "receipt"),
    [
        ("email_hostile", hostile_items(), hostile_receipt(5)),
        ("email_many", many_items(500), sample_receipt(500)),
    ],
)
def test_golden_email_with_links(name: str, items: list[DigestItem], receipt: Receipt) -> None:
    message = signed_renderer().render("email", items, "ada@example.org", receipt=receipt)
    assert message.html is not None
    check_golden(f"{name}.txt", message.text)
    check_golden(f"{name}.html", message.html)
    for body in (message.text, message.html):
        assert f"/unsubscribe/{tokens.sign('test-key', tokens.UNSUBSCRIBE, 'email:ada@example.org')}" in body
        assert f"/manage/{tokens.sign('test-key', tokens.MANAGE, 'email:ada@example.org')}" in body
        assert "ada@example.org" in body
    assert "Manage your follows" in message.html and ">Unsubscribe</a>" in message.html


def test_hostile_email_is_inert() -> None:
    message = signed_renderer().render("email", hostile_items(), "ada@example.org")
    assert message.html is not None
    for html in (message.html, css_inline.inline(message.html)):
        lowered = html.lower()
        for raw in ("<script", "<b>", "<img", "<i>", "<lovelace>"):
            assert raw not in lowered, raw
        assert re.search(r"<a\b[^>]*evil", lowered) is None  # no live link to the attacker
        assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" not in html
    for text in (message.text, message.html):
        assert not any(ch in text for ch in "\x00\x1b" + CUT)
    # Revisions list what changed, new papers do not.
    assert "changed: title, comment, journal-ref" in message.text
    assert "changed: authors" in message.text and message.text.count("changed:") == 2
    assert '<p class="changed">changed: title, comment, journal-ref</p>' in message.html
    assert message.text.index("New papers (3)") < message.text.index("Revisions (2)")


def test_hostile_email_headers_are_single_lines() -> None:
    message = signed_renderer().render("email", hostile_items(), "ada@example.org")
    settings = Settings(unsubscribe_mailto="unsubscribe@papertrail.example")
    mail = EmailNotifier(settings.smtp()).build("ada@example.org", message)
    assert mail["List-Unsubscribe"] and mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    for name, value in mail.items():
        assert "\r" not in str(value) and "\n" not in str(value), name


def test_many_items_are_capped_with_a_count() -> None:
    message = signed_renderer().render("email", many_items(500), "ada@example.org")
    assert message.text.count("https://arxiv.org/abs/") == 50
    assert "…and 450 more not shown" in message.text and "…and 450 more not shown" in (message.html or "")


def test_plain_digest_blocks_cut_between_items() -> None:
    message = signed_renderer().render("email", hostile_items(), "ada@example.org")
    header, *items, footer = message.text_blocks
    assert header.startswith("PaperTrail: 3 new papers, 2 revisions") and "* " not in header
    assert [block.count("\n* ") for block in items] == [1] * 5
    assert items[0].startswith("\nNew papers (3)") and items[3].startswith("\nRevisions (2)")
    assert footer.startswith("\n--\nPaperTrail digest for ada@example.org")
    assert "".join(message.text_blocks) == message.text


def test_items_rank_by_best_reason_then_upvotes() -> None:
    def item(arxiv_id: str, reason: Reason, upvotes: int = 0) -> DigestItem:
        return DigestItem(arxiv_id, 1, "T", ("A",), ("cs.LG",), (reason,), upvotes=upvotes)

    items = [
        item("2611.00001", Reason(CATEGORY, "cs.LG"), upvotes=99),
        item("2611.00002", Reason(ABSTRACT, "rollout")),
        item("2611.00003", Reason(TITLE, "rollout")),
        item("2611.00004", Reason(AUTHOR, "Ada Lovelace")),
        item("2611.00005", Reason(PAPER, "2611.00005")),
        item("2611.00006", Reason(TITLE, "rollout"), upvotes=7),
    ]
    view = Renderer().view(items, "x")
    assert [i.arxiv_id[-1] for i in view.new] == ["4", "5", "6", "3", "2", "1"]
