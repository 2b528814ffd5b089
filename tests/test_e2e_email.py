"""End to end: recorded feed over HTTP -> store -> match -> digests over real SMTP (aiosmtpd)."""

from __future__ import annotations

import re
from datetime import timedelta
from email.message import EmailMessage

from core.config import Settings
from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import match_records, subscriber_records
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import SubscriberStatus, utcnow
from core.papers.pipeline import ingest_once
from core.people import tokens
from ingest.arxiv_rss import ArxivRssSource
from ingest.http import HttpClient
from papertrail.service.channels import CHANNELS
from tests.conftest import BIG_FEED
from tests.servers import Reply, feed_server, smtp_sink

KEY = "e2e-secret"


def recorded_items() -> list[tuple[str, int, list[str]]]:
    """(id, version, categories) of every item, read with regular expressions, not with the parser."""
    items = []
    for block in re.findall(r"<item>(.*?)</item>", BIG_FEED.read_text(encoding="utf-8"), flags=re.S):
        guid = re.search(r"oai:arXiv\.org:(.+?)v(\d+)</guid>", block)
        assert guid is not None
        items.append((guid[1], int(guid[2]), re.findall(r"<category>(.*?)</category>", block)))
    return items


def parts(message: EmailMessage) -> tuple[str, str]:
    assert message.get_content_type() == "multipart/alternative"
    plain = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert plain is not None and html is not None
    # SMTP carries CRLF line ends; compare text with plain newlines.
    return plain.get_content().replace("\r\n", "\n"), html.get_content().replace("\r\n", "\n")


async def test_digests_by_email(sqlite_store: Database) -> None:
    items = recorded_items()
    want_dc = {(i, v) for i, v, cats in items if "cs.DC" in cats}
    want_cr = {(i, v) for i, v, cats in items if "cs.CR" in cats and "cs.LG" not in cats}
    assert want_dc and want_cr

    follow(sqlite_store, "email:ada@example.org", "cat:cs.DC")
    follow(sqlite_store, "email:bob@example.org", "cat:cs.CR ANDNOT cat:cs.LG")
    follow(sqlite_store, "email:gone@example.org", "cat:cs.DC")

    with (
        smtp_sink(refuse={"gone@example.org"}) as (sink, port),
        feed_server(Reply(200, BIG_FEED.read_bytes())) as feed,
    ):
        settings = Settings(
            smtp_host="127.0.0.1",
            smtp_port=port,
            smtp_from="PaperTrail <alerts@papertrail.test>",
            digest_max_items=500,
            unsubscribe_mailto="unsubscribe@papertrail.test",
        )
        async with HttpClient(settings.user_agent, timeout=10) as http:
            report = await ingest_once(sqlite_store, ArxivRssSource(http, feed.url))
        # Two subscribers share the cs.DC query: matched once per query, fanned out once per follower.
        assert report.matches == len(want_dc) + len(want_cr)
        assert match_records.expand_matches(sqlite_store) == 2 * len(want_dc) + len(want_cr)

        notifiers = CHANNELS.build_notifiers(settings)
        renderer = Renderer(
            max_items=settings.digest_max_items, secret_key=KEY, public_url="https://papertrail.test"
        )
        try:
            # Not due yet: the default schedule is daily 08:00 and the subscribers signed up just now.
            assert await send_due_digests(sqlite_store, notifiers, renderer) == []
            reports = await send_due_digests(sqlite_store, notifiers, renderer, force=True)
            assert await send_due_digests(sqlite_store, notifiers, renderer, force=True) == []
        finally:
            for notifier in notifiers.values():
                await notifier.aclose()

    by_address = {r.address: r for r in reports}
    assert by_address["email:ada@example.org"].sent and by_address["email:bob@example.org"].sent
    refused = by_address["email:gone@example.org"]
    assert not refused.sent and refused.paused and "550" in (refused.error or "")
    gone = subscriber_records.get_subscriber(sqlite_store, "email:gone@example.org")
    assert gone is not None and gone.id is not None
    assert gone.status == SubscriberStatus.PAUSED and "refused recipient" in (gone.status_reason or "")
    assert len(ledger_records.pending_matches(sqlite_store, gone.id)) == len(want_dc)  # kept, not lost

    assert len(sink.received) == 2
    for received in sink.received:
        (rcpt,) = received.rcpt_tos
        want = want_dc if rcpt == "ada@example.org" else want_cr
        message = received.message
        assert message["From"] == "PaperTrail <alerts@papertrail.test>"
        assert message["To"] == rcpt
        new = sum(1 for _, v in want if v == 1)
        revisions = len(want) - new
        assert message["Subject"].startswith(f"PaperTrail: {new} new paper")
        assert f"{revisions} revision" in message["Subject"]
        plain, html = parts(message)
        found = set(re.findall(r"^  [^\n]*· (\S+?)v(\d+)$", plain, flags=re.M))
        assert {(i, int(v)) for i, v in found} == want
        for arxiv_id, _ in want:
            assert f"https://arxiv.org/abs/{arxiv_id}" in plain
            assert f'href="https://arxiv.org/abs/{arxiv_id}"' in html
        assert "New papers" in plain and ("Revisions" in plain) == bool(revisions)
        assert "<style" not in html and 'style="' in html  # CSS inlined
        assert "Why: category cs." in plain
        # Signed one-click unsubscribe for exactly this recipient, in the headers and in the footer.
        https, mailto = re.findall(r"<([^<>]+)>", message["List-Unsubscribe"])
        token = https.rpartition("/")[2]
        assert https.startswith("https://papertrail.test/unsubscribe/")
        assert tokens.verify(KEY, tokens.UNSUBSCRIBE, token) == f"email:{rcpt}"
        assert mailto == f"mailto:unsubscribe@papertrail.test?subject=unsubscribe%20{token}"
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert f"Unsubscribe: {https}" in plain and f'href="{https}"' in html
        assert "Manage your follows: https://papertrail.test/manage/" in plain


async def test_cap_ends_with_and_n_more(sqlite_store: Database) -> None:
    follow(sqlite_store, "email:ada@example.org", "cat:cs.DC", schedule="instant")
    with smtp_sink() as (sink, port), feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        settings = Settings(smtp_host="127.0.0.1", smtp_port=port, digest_max_items=3)
        async with HttpClient(settings.user_agent, timeout=10) as http:
            report = await ingest_once(sqlite_store, ArxivRssSource(http, feed.url))
        (sent,) = await send_due_digests(
            sqlite_store, CHANNELS.build_notifiers(settings), Renderer(max_items=3)
        )
    assert sent.sent and sent.items == report.matches
    plain, html = parts(sink.received[0].message)
    assert plain.count("https://arxiv.org/abs/") == 3
    assert f"and {report.matches - 3} more" in plain and f"and {report.matches - 3} more" in html


async def test_follow_added_later_does_not_flood(sqlite_store: Database) -> None:
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        async with HttpClient("t", timeout=10) as http:
            await ingest_once(sqlite_store, ArxivRssSource(http, feed.url))
    follow(sqlite_store, "console:late", "cat:cs.DC")
    from core.follows.index import match_new

    assert match_new(sqlite_store) == 0
    assert ledger_records.subscribers_to_plan(sqlite_store, utcnow() + timedelta(days=1)) == []


async def test_unreachable_smtp_keeps_matches_pending(sqlite_store: Database) -> None:
    from tests.servers import closed_port

    follow(sqlite_store, "email:ada@example.org", "cat:cs.DC", schedule="instant")
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        async with HttpClient("t", timeout=10) as http:
            await ingest_once(sqlite_store, ArxivRssSource(http, feed.url))
    settings = Settings(smtp_host="127.0.0.1", smtp_port=closed_port(), smtp_timeout=5)
    (report,) = await send_due_digests(sqlite_store, CHANNELS.build_notifiers(settings), Renderer())
    assert not report.sent and not report.paused
    assert "cannot reach SMTP server" in (report.error or "")
    subscriber = subscriber_records.get_subscriber(sqlite_store, "email:ada@example.org")
    assert subscriber is not None and subscriber.id is not None
    assert subscriber.status == SubscriberStatus.ACTIVE and subscriber.retry_at is not None
    assert len(ledger_records.pending_matches(sqlite_store, subscriber.id)) == report.items
    # Backing off: the scheduler leaves it alone, an explicit --now tries again.
    renderer = Renderer()
    assert await send_due_digests(sqlite_store, CHANNELS.build_notifiers(settings), renderer) == []
    (again,) = await send_due_digests(sqlite_store, CHANNELS.build_notifiers(settings), renderer, force=True)
    assert not again.sent and again.items == report.items
