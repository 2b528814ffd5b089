"""EmailNotifier against a real SMTP server (aiosmtpd) on loopback: headers, one session, error mapping."""

from __future__ import annotations

import asyncio
import logging
import re
import smtplib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from typing import Any

import pytest

from core.channel import DeliveryError
from core.config import Settings
from core.delivery.render import Renderer
from core.people import tokens
from core.values import Message
from notifiers.email.message import list_unsubscribe_headers
from notifiers.email.notifier import EmailNotifier
from tests.hostile import hostile_items
from tests.servers import closed_port
from tests.support.smtp_server import authenticate, smtp_server

# Each test sends to a local SMTP server (left out of `make test-quick`).
pytestmark = pytest.mark.net

KEY = "test-key"
RENDERER = Renderer(secret_key=KEY, public_url="https://papertrail.example")
MAILTO = "unsubscribe@papertrail.example"


def settings_for(port: int, **more: Any) -> Settings:
    return Settings(
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_from="PaperTrail <alerts@papertrail.test>",
        smtp_timeout=5,
        unsubscribe_mailto=MAILTO,
        **more,
    )


@asynccontextmanager
async def notifier_for(settings: Settings, **options: Any) -> AsyncIterator[EmailNotifier]:
    notifier = EmailNotifier(settings.smtp(), **options)
    try:
        yield notifier
    finally:
        await notifier.aclose()


def digest(address: str) -> Message:
    return RENDERER.render("email", hostile_items(), address)


def unsubscribe_uris(message: EmailMessage) -> list[str]:
    return re.findall(r"<([^<>]+)>", str(message["List-Unsubscribe"]))


def token_of(url: str) -> str:
    return url.rpartition("/")[2]


async def test_headers_and_signed_unsubscribe_links() -> None:
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            sent = digest("ada@example.org")
            result = await notifier.send("ada@example.org", sent)
    (got,) = server.received
    mail = got.message
    assert got.rcpt_tos == ["ada@example.org"] and result.parts == 1
    assert mail.get_content_type() == "multipart/alternative"
    assert mail["From"] == "PaperTrail <alerts@papertrail.test>" and mail["To"] == "ada@example.org"
    assert mail["Subject"] == "PaperTrail: 3 new papers, 2 revisions"
    assert mail["Message-ID"] == result.platform_id and mail["Message-ID"].endswith("@papertrail.test>")
    assert parsedate_to_datetime(mail["Date"]).utcoffset() is not None
    assert mail["Auto-Submitted"] == "auto-generated"
    for name, value in mail.items():
        assert "\r" not in value and "\n" not in value, name

    https, mailto = unsubscribe_uris(mail)
    assert https == sent.unsubscribe_url and https.startswith("https://papertrail.example/unsubscribe/")
    assert tokens.verify(KEY, tokens.UNSUBSCRIBE, token_of(https)) == "email:ada@example.org"
    assert mailto == f"mailto:{MAILTO}?subject=unsubscribe%20{token_of(https)}"
    assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    # On the wire the URL stays literal: an RFC 2047 encoded word would break every unsubscribe button.
    (raw_line,) = [line for line in got.raw.split(b"\r\n") if line.startswith(b"List-Unsubscribe:")]
    assert raw_line.startswith(b"List-Unsubscribe: <https://papertrail.example/unsubscribe/")
    assert b"=?" not in raw_line

    html = mail.get_body(preferencelist=("html",))
    plain = mail.get_body(preferencelist=("plain",))
    assert html is not None and plain is not None
    assert f'href="{https}"' in html.get_content() and "<style" not in html.get_content()
    assert f"Unsubscribe: {https}" in plain.get_content()
    assert "<script>" not in html.get_content()


def test_forged_or_altered_tokens_are_rejected() -> None:
    token = token_of(digest("ada@example.org").unsubscribe_url)
    body, _, mac = token.partition(".")
    bob_body = token_of(digest("bob@example.org").unsubscribe_url).partition(".")[0]
    flipped = mac[:-1] + ("A" if mac[-1] != "A" else "B")
    for forged in (f"{bob_body}.{mac}", f"{body}.{flipped}", body, f"{body}."):
        with pytest.raises(tokens.InvalidToken):
            tokens.verify(KEY, tokens.UNSUBSCRIBE, forged)
    with pytest.raises(tokens.InvalidToken):
        tokens.verify(KEY, tokens.MANAGE, token)  # an unsubscribe token is not a manage token
    with pytest.raises(tokens.InvalidToken):
        tokens.verify("another-key", tokens.UNSUBSCRIBE, token)


def test_list_unsubscribe_headers_refuse_injection() -> None:
    good = "https://papertrail.example/unsubscribe/abc.def"
    assert list_unsubscribe_headers(good, "") == {
        "List-Unsubscribe": f"<{good}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }
    for bad in (
        good + "\r\nBcc: eve@evil.example",
        good + ">, <https://evil.example",
        good + ",x",
        good + " x",
    ):
        assert list_unsubscribe_headers(bad, "") == {}
    # Without an https link: the mailto alone, and no one-click (RFC 8058 needs https).
    assert list_unsubscribe_headers("", "mailto:" + MAILTO) == {
        "List-Unsubscribe": f"<mailto:{MAILTO}?subject=unsubscribe>"
    }
    http = list_unsubscribe_headers("http://localhost:8080/unsubscribe/abc.def", MAILTO)
    assert http == {"List-Unsubscribe": f"<mailto:{MAILTO}?subject=unsubscribe%20abc.def>"}
    for bad_mailto in (MAILTO + "\r\nBcc: eve@evil.example", "a@b.c>, <https://evil.example", "nobody"):
        assert list_unsubscribe_headers("", bad_mailto) == {}


async def test_twenty_recipients_share_one_connection() -> None:
    addresses = [f"reader{n}@example.org" for n in range(20)]
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            results = await asyncio.gather(*(notifier.send(a, digest(a)) for a in addresses))
    assert len(server.peers) == 1 and {got.peer for got in server.received} == {server.peers[0]}
    assert sorted(got.rcpt_tos[0] for got in server.received) == sorted(addresses)
    assert len({r.platform_id for r in results}) == 20
    for got in server.received:
        (rcpt,) = got.rcpt_tos
        assert got.message["To"] == rcpt
        https = unsubscribe_uris(got.message)[0]
        assert tokens.verify(KEY, tokens.UNSUBSCRIBE, token_of(https)) == f"email:{rcpt}"


async def test_reconnects_after_the_server_drops_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # A session that sat idle is checked with NOOP first (within a burst the check is skipped).
    monkeypatch.setattr("notifiers.email.notifier.NOOP_AFTER_IDLE_SECONDS", 0.0)
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            await notifier.send("ada@example.org", digest("ada@example.org"))
            server.drop_connections(controller)
            await notifier.send("bob@example.org", digest("bob@example.org"))
    assert [got.rcpt_tos for got in server.received] == [["ada@example.org"], ["bob@example.org"]]
    assert len(server.peers) == 2 and server.received[0].peer != server.received[1].peer


async def test_reconnects_when_noop_answers_421(monkeypatch: pytest.MonkeyPatch) -> None:
    # A session that sat idle is checked with NOOP first (within a burst the check is skipped).
    monkeypatch.setattr("notifiers.email.notifier.NOOP_AFTER_IDLE_SECONDS", 0.0)
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            await notifier.send("ada@example.org", digest("ada@example.org"))
            server.noop_reply = "421 4.4.2 closing idle connection"
            await notifier.send("bob@example.org", digest("bob@example.org"))
    assert len(server.received) == 2 and len(server.peers) == 2


@pytest.mark.parametrize(
    ("stage", "reply", "new_connection"),
    [
        ("mail", "421 4.3.2 service shutting down", True),
        ("rcpt", "451 4.7.1 greylisted, try again later", False),
        ("data", "451 4.3.0 temporary local problem", False),
    ],
)
async def test_temporary_replies_are_retryable(stage: str, reply: str, new_connection: bool) -> None:
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            if stage == "mail":
                server.mail_reply = reply
            elif stage == "rcpt":
                server.rcpt_replies["ada@example.org"] = reply
            else:
                server.data_reply = reply
            with pytest.raises(DeliveryError) as failed:
                await notifier.send("ada@example.org", digest("ada@example.org"))
            assert failed.value.retryable and reply[:3] in str(failed.value)
            server.mail_reply = server.data_reply = None
            server.rcpt_replies.clear()
            await notifier.send("ada@example.org", digest("ada@example.org"))
    assert len(server.received) == 1
    # A 421 ends the session (smtplib closes it); other refusals leave it usable.
    assert len(server.peers) == (2 if new_connection else 1)


async def test_550_on_rcpt_is_permanent_and_the_session_goes_on() -> None:
    with smtp_server() as (server, controller):
        server.rcpt_replies["gone@example.org"] = "550 5.1.1 mailbox unavailable"
        async with notifier_for(settings_for(controller.port)) as notifier:
            with pytest.raises(DeliveryError) as failed:
                await notifier.send("gone@example.org", digest("gone@example.org"))
            await notifier.send("ada@example.org", digest("ada@example.org"))
    assert not failed.value.retryable and failed.value.delivered_parts == 0
    assert "refused recipient gone@example.org: 550 5.1.1 mailbox unavailable" in str(failed.value)
    assert [got.rcpt_tos for got in server.received] == [["ada@example.org"]]
    assert len(server.peers) == 1


async def test_unreachable_server_is_retryable() -> None:
    async with notifier_for(settings_for(closed_port())) as notifier:
        with pytest.raises(DeliveryError) as failed:
            await notifier.send("ada@example.org", digest("ada@example.org"))
    message = str(failed.value)
    assert failed.value.retryable and "cannot reach SMTP server 127.0.0.1:" in message
    assert "PAPERTRAIL_SMTP_HOST" in message and "PAPERTRAIL_SMTP_PORT" in message


async def test_unconfigured_email_is_retryable() -> None:
    with pytest.raises(DeliveryError) as failed:
        await EmailNotifier(Settings().smtp()).send("ada@example.org", digest("ada@example.org"))
    assert failed.value.retryable and "PAPERTRAIL_SMTP_HOST" in str(failed.value)


async def test_auth_failure_names_the_settings_and_never_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="notifiers.email.notifier")
    with smtp_server(authenticator=authenticate, auth_require_tls=False) as (server, controller):
        wrong = settings_for(controller.port, smtp_user="ada", smtp_password="wrong-password-xyzzy")
        async with notifier_for(wrong) as notifier:
            with pytest.raises(DeliveryError) as failed:
                await notifier.send("ada@example.org", digest("ada@example.org"))
        right = settings_for(controller.port, smtp_user="ada", smtp_password="right-password")
        async with notifier_for(right) as notifier:
            await notifier.send("ada@example.org", digest("ada@example.org"))
            await notifier.send("bob@example.org", digest("bob@example.org"))
    message = str(failed.value)
    assert failed.value.retryable and "535" in message
    assert "PAPERTRAIL_SMTP_USER" in message and "PAPERTRAIL_SMTP_PASSWORD" in message
    assert "xyzzy" not in message and "xyzzy" not in caplog.text and "right-password" not in caplog.text
    # smtplib tries each offered mechanism before giving up; then one login serves both sends.
    assert {login for login, _ in server.logins} == {b"ada"}
    assert [ok for _, ok in server.logins].count(True) == 1 and not server.logins[0][1]
    assert len(server.received) == 2


async def test_starttls_not_offered_is_retryable() -> None:
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port, smtp_starttls=True)) as notifier:
            with pytest.raises(DeliveryError) as failed:
                await notifier.send("ada@example.org", digest("ada@example.org"))
    assert failed.value.retryable and "PAPERTRAIL_SMTP_STARTTLS" in str(failed.value)
    assert server.received == []


async def test_idle_session_is_closed_and_reopened() -> None:
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port), idle_close=0.05) as notifier:
            await notifier.send("ada@example.org", digest("ada@example.org"))
            assert await asyncio.to_thread(server.quit_seen.wait, 5)
            await notifier.send("bob@example.org", digest("bob@example.org"))
    assert len(server.received) == 2 and len(server.peers) == 2


async def test_aclose_says_quit() -> None:
    with smtp_server() as (server, controller):
        notifier = EmailNotifier(settings_for(controller.port).smtp())
        await notifier.send("ada@example.org", digest("ada@example.org"))
        assert server.quits == 0
        await notifier.aclose()
        assert server.quits == 1
        await notifier.aclose()  # twice is harmless


@pytest.mark.parametrize(
    "address",
    [
        "ada@example.org\r\nBcc: eve@evil.example",
        "ada@example.org, eve@evil.example",
        "Ada <ada@ex.org>",
        "ada",
    ],
)
async def test_unusable_address_is_permanent_and_sends_nothing(address: str) -> None:
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            with pytest.raises(DeliveryError) as failed:
                await notifier.send(address, digest("ada@example.org"))
    assert not failed.value.retryable and "not a usable email address" in str(failed.value)
    assert "\n" not in str(failed.value)
    assert server.received == [] and server.peers == []


async def test_already_delivered_digest_is_not_sent_again() -> None:
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            sent = digest("ada@example.org")
            again = Message(subject=sent.subject, text=sent.text, html=sent.html, skip_parts=1)
            assert (await notifier.send("ada@example.org", again)).parts == 1
    assert server.received == [] and server.peers == []


async def test_international_address_uses_smtputf8() -> None:
    with smtp_server() as (server, controller):
        async with notifier_for(settings_for(controller.port)) as notifier:
            await notifier.send("zoë@exemple.fr", digest("zoë@exemple.fr"))
    (got,) = server.received
    assert got.rcpt_tos == ["zoë@exemple.fr"] and got.message["To"] == "zoë@exemple.fr"


async def test_injected_smtp_factory_is_used() -> None:
    with smtp_server() as (server, controller):

        def factory() -> smtplib.SMTP:
            return smtplib.SMTP("127.0.0.1", controller.port, local_hostname="worker-7.papertrail.test")

        async with notifier_for(settings_for(controller.port), smtp_factory=factory) as notifier:
            await notifier.send("ada@example.org", digest("ada@example.org"))
    assert server.ehlo_names == ["worker-7.papertrail.test"] and len(server.received) == 1
