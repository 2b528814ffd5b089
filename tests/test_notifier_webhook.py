"""Webhook notifier: signed JSON over real HTTP to a loopback receiver, the schema golden, retries, SSRF."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import httpx
import pytest

from core.channel import DeliveryError
from core.config import Settings
from core.delivery.render import Renderer
from core.people import tokens
from core.retry_after import retry_after_seconds
from core.values import Message
from notifiers.public_address import blocked_reason
from notifiers.webhook.notifier import DELIVERY_HEADER, SIGNATURE_HEADER, WebhookNotifier
from notifiers.webhook.payload import SCHEMA, encode_payload, sign_body, verify_signature, webhook_secret
from tests.fakes.webhook_receiver import WebhookReceiver, webhook_receiver
from tests.goldens import check_golden
from tests.hostile import hostile_items, hostile_receipt
from tests.servers import Answer, closed_port

MASTER_KEY = "master-key-never-shown-0123456789"
FIXED = datetime(2026, 11, 17, 8, 0, 5, tzinfo=UTC)


def settings(**extra: object) -> Settings:
    values: dict[str, object] = {"secret_key": MASTER_KEY, "webhook_allow_hosts": "127.0.0.1"}
    values.update(extra)
    return Settings(**values)  # type: ignore[arg-type]


def digest(url: str, key: str = "digest-42") -> Message:
    return Renderer(max_items=4).render("webhook", hostile_items(), url, key=key)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with webhook_receiver() as rx:
        rx.secret = webhook_secret(MASTER_KEY, rx.url)
        yield rx


@pytest.fixture
async def notifier() -> AsyncIterator[WebhookNotifier]:
    hook = WebhookNotifier(settings().webhook(), clock=lambda: FIXED, quick_retry_delay=0)
    yield hook
    await hook.aclose()


# --- the signature scheme ------------------------------------------------------------------------------


def test_signature_verifies_and_rejects_tampering() -> None:
    body = b'{"schema":"papertrail.digest/1"}'
    header = sign_body("s3cret", body, timestamp=1_800_000_000)
    assert header.startswith("t=1800000000,v1=")
    assert verify_signature("s3cret", header, body, now=1_800_000_100)
    assert not verify_signature("s3cret", header, body + b" ", now=1_800_000_100)  # altered body
    assert not verify_signature("other", header, body, now=1_800_000_100)  # another secret
    assert not verify_signature("s3cret", header, body, now=1_800_000_301)  # stale
    assert not verify_signature("s3cret", header, body, now=1_799_999_000)  # from the future
    assert verify_signature("s3cret", header, body, tolerance=1000, now=1_800_000_900)
    forged = header.replace("t=1800000000", "t=1800000200")  # fresh timestamp, old MAC
    assert not verify_signature("s3cret", forged, body, now=1_800_000_200)
    for broken in (None, "", "v1=abc", "t=1800000000", "t=soon,v1=00", "garbage"):
        assert not verify_signature("s3cret", broken, body, now=1_800_000_000)
    # During a rotation the sender may add a second v1; any one matching is enough.
    rotated = header.replace(",v1=", ",v1=" + "0" * 64 + ",v1=")
    assert verify_signature("s3cret", rotated, body, now=1_800_000_000)


def test_each_url_has_its_own_secret() -> None:
    one = webhook_secret(MASTER_KEY, "https://a.example/hook")
    assert one == webhook_secret(MASTER_KEY, "https://a.example/hook")
    assert one != webhook_secret(MASTER_KEY, "https://b.example/hook")
    assert one != webhook_secret("another-key", "https://a.example/hook")
    assert MASTER_KEY not in one and len(one) == 64


async def test_delivery_is_signed_and_verifiable(
    receiver: WebhookReceiver, notifier: WebhookNotifier
) -> None:
    result = await notifier.send(receiver.url, digest(receiver.url))

    assert result.platform_id == "digest-42" and result.parts == 1
    [got] = receiver.deliveries
    assert got.signature_valid is True
    assert got.key == "digest-42"
    assert got.header("Content-Type") == "application/json"
    assert "PaperTrail/" in (got.header("User-Agent") or "") and SCHEMA in (got.header("User-Agent") or "")
    assert got.json["schema"] == SCHEMA and got.json["digest"] == "digest-42"
    signature = got.header(SIGNATURE_HEADER)
    assert signature is not None and MASTER_KEY not in signature
    # The receiver's secret is derived: the master key itself does not verify (and is never needed).
    assert not verify_signature(MASTER_KEY, signature, got.body)
    assert verify_signature(webhook_secret(MASTER_KEY, receiver.url), signature, got.body)


def test_digest_key_falls_back_to_a_content_hash() -> None:
    from notifiers.webhook.payload import digest_payload

    plain = digest_payload(digest("https://h.example/", key=""), FIXED)["digest"]
    assert plain.startswith("sha256-")
    assert digest_payload(digest("https://other.example/", key=""), FIXED)["digest"] == plain  # stable
    # A key unfit for a header (line break: header injection) is replaced, not sent.
    assert digest_payload(digest("https://h.example/", key="k\r\nX-Evil: 1"), FIXED)["digest"] == plain


async def test_schema_golden(receiver: WebhookReceiver, notifier: WebhookNotifier) -> None:
    renderer = Renderer(max_items=4, public_url="https://papertrail.example")
    message = renderer.render(
        "webhook", hostile_items(), receiver.url, key="digest-golden", receipt=hostile_receipt(5)
    )
    await notifier.send(receiver.url, message)

    [got] = receiver.deliveries
    assert got.body == encode_payload(got.json)  # compact, ASCII-only wire form
    assert got.body.isascii()
    check_golden("webhook.json", json.dumps(got.json, indent=2) + "\n")
    assert got.json["generated_at"] == "2026-11-17T08:00:05Z"
    assert got.json["counts"] == {"new": 3, "revisions": 1, "more": 1}
    # Added within papertrail.digest/1 (docs/webhooks.md): the reader's language, and no guide here.
    assert got.json["language"] == "en" and all(item["guide"] is None for item in got.json["items"])
    titles = " ".join(item["title"] for item in got.json["items"])
    assert "\x1b" not in titles and "\x00" not in titles  # control characters stripped
    assert '<script>alert("x")</script>' in titles  # otherwise data, unchanged: JSON is the escaping
    revision = next(item for item in got.json["items"] if item["version"] == 3)
    assert revision["versioned_id"] == "2611.00004v3"
    assert revision["changes"] == ["title", "comment", "journal-ref"]
    assert revision["url"] == "https://arxiv.org/abs/2611.00004"
    assert all(item["vote_urls"] is None for item in got.json["items"])  # the renderer had no secret key


async def test_each_item_carries_its_signed_vote_urls(
    receiver: WebhookReceiver, notifier: WebhookNotifier
) -> None:
    """Added within papertrail.digest/1: a receiver builds 👍 / 👎 buttons from vote_urls, each
    the /vote page of this subscriber, version and value (papertrail.web.votes)."""
    renderer = Renderer(max_items=4, public_url="https://papertrail.example", secret_key=MASTER_KEY)
    await notifier.send(receiver.url, renderer.render("webhook", hostile_items(), receiver.url, key="d-1"))
    [got] = receiver.deliveries
    for item in got.json["items"]:
        for name, value in (("like", 1), ("dislike", -1)):
            url = item["vote_urls"][name]
            prefix, _, token = url.rpartition("/")
            assert prefix == "https://papertrail.example/vote"
            subject = tokens.verify(MASTER_KEY, tokens.VOTE, token)
            assert tokens.split_vote(subject) == (
                f"webhook:{receiver.url}",
                item["arxiv_id"],
                item["version"],
                value,
            )


# --- answers and retries -------------------------------------------------------------------------------


async def test_server_error_is_retryable_and_hides_the_path(
    receiver: WebhookReceiver, notifier: WebhookNotifier
) -> None:
    receiver.script(Answer(500, body=b"boom \x1b[31m" + b"x" * 5000))
    url = receiver.url + "/tok-PATHSECRET"
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(url, digest(url))

    error = caught.value
    assert error.retryable and error.retry_after is None
    assert "HTTP 500" in str(error) and "boom" in str(error)
    assert "\x1b" not in str(error) and len(str(error)) < 500  # excerpt stripped and cut
    assert "PATHSECRET" not in str(error) and MASTER_KEY not in str(error)
    assert len(receiver.deliveries) == 1  # a plain 500 waits for the ledger's back-off


async def test_gateway_error_gets_one_quick_retry(
    receiver: WebhookReceiver, notifier: WebhookNotifier
) -> None:
    receiver.script(Answer(503))
    result = await notifier.send(receiver.url, digest(receiver.url))

    assert result.parts == 1
    first, second = receiver.deliveries
    assert first.key == second.key == "digest-42"  # same key: the receiver can deduplicate
    assert second.signature_valid is True

    receiver.script(Answer(502), Answer(504))
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(receiver.url, digest(receiver.url))
    assert caught.value.retryable and "HTTP 504" in str(caught.value)
    assert len(receiver.deliveries) == 4


async def test_timeout_is_retryable(receiver: WebhookReceiver) -> None:
    receiver.script(Answer(200, delay=2.0))
    hook = WebhookNotifier(settings(webhook_timeout=0.3).webhook(), quick_retry_delay=0)
    try:
        with pytest.raises(DeliveryError) as caught:
            await hook.send(receiver.url, digest(receiver.url))
    finally:
        await hook.aclose()
    assert caught.value.retryable
    assert "PAPERTRAIL_WEBHOOK_TIMEOUT" in str(caught.value) and DELIVERY_HEADER in str(caught.value)
    assert len(receiver.deliveries) == 1  # a time-out is not retried at once: it may have been processed


@pytest.mark.net
async def test_connection_refused_is_retryable(notifier: WebhookNotifier) -> None:
    url = f"http://127.0.0.1:{closed_port()}/hook"
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(url, digest(url))
    assert caught.value.retryable and "cannot connect" in str(caught.value)


async def test_429_honours_retry_after(receiver: WebhookReceiver, notifier: WebhookNotifier) -> None:
    receiver.script(Answer(429, headers={"Retry-After": "120"}))
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(receiver.url, digest(receiver.url))
    assert caught.value.retryable and caught.value.retry_after == 120.0
    assert len(receiver.deliveries) == 1


def test_retry_after_forms() -> None:
    now = datetime(2026, 11, 17, 8, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("30") == 30.0
    assert retry_after_seconds("Tue, 17 Nov 2026 08:01:30 GMT", now=now) == 90.0
    assert retry_after_seconds("Tue, 17 Nov 2026 07:00:00 GMT", now=now) == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


async def test_410_is_permanent(receiver: WebhookReceiver, notifier: WebhookNotifier) -> None:
    receiver.script(Answer(410))
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(receiver.url, digest(receiver.url))
    assert not caught.value.retryable and "410" in str(caught.value)


async def test_other_4xx_is_permanent_with_an_escaped_excerpt(
    receiver: WebhookReceiver, notifier: WebhookNotifier
) -> None:
    receiver.script(Answer(401, body="bad signature \u202eevil\r\nX-Injected: 1".encode()))
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(receiver.url, digest(receiver.url))
    message = str(caught.value)
    assert not caught.value.retryable and "HTTP 401" in message and "bad signature" in message
    assert "\u202e" not in message  # bidi overrides removed, never passed on
    assert "\n" not in message and "\r" not in message


async def test_redirect_is_not_followed(receiver: WebhookReceiver, notifier: WebhookNotifier) -> None:
    receiver.script(Answer(307, headers={"Location": receiver.base_url + "/elsewhere"}))
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(receiver.url, digest(receiver.url))
    assert not caught.value.retryable and "redirect" in str(caught.value)
    assert [d.path for d in receiver.deliveries] == ["/hook"]


# --- configuration and addresses -----------------------------------------------------------------------


async def test_missing_secret_keeps_the_digest_pending(receiver: WebhookReceiver) -> None:
    hook = WebhookNotifier(Settings(webhook_allow_hosts="127.0.0.1").webhook())
    with pytest.raises(DeliveryError) as caught:
        await hook.send(receiver.url, digest(receiver.url))
    await hook.aclose()
    assert caught.value.retryable and "PAPERTRAIL_SECRET_KEY" in str(caught.value)
    assert receiver.deliveries == []


async def test_skip_parts_means_already_delivered(
    receiver: WebhookReceiver, notifier: WebhookNotifier
) -> None:
    message = Renderer().render("webhook", hostile_items(), receiver.url, key="digest-7")
    result = await notifier.send(receiver.url, dataclasses.replace(message, skip_parts=1))
    assert result.parts == 1 and receiver.deliveries == []


@pytest.mark.parametrize("address", ["ftp://example.org/hook", "https:///nohost", "http://exa mple.org/"])
async def test_malformed_address_is_permanent(notifier: WebhookNotifier, address: str) -> None:
    with pytest.raises(DeliveryError) as caught:
        await notifier.send(address, digest(address))
    assert not caught.value.retryable


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "10.1.2.3",
        "192.168.0.10",
        "169.254.169.254",
        "[fe80::1]",
        "0.0.0.0",
        "224.0.0.1",
        "100.64.0.1",
        "[fd00::1]",
    ],
)
async def test_private_targets_are_refused(receiver: WebhookReceiver, host: str) -> None:
    hook = WebhookNotifier(Settings(secret_key=MASTER_KEY).webhook(), quick_retry_delay=0)  # nothing allowed
    port = receiver.base_url.rsplit(":", 1)[1]
    url = f"http://{host}:{port}/hook"
    try:
        with pytest.raises(DeliveryError) as caught:
            await hook.send(url, digest(url))
    finally:
        await hook.aclose()
    assert not caught.value.retryable
    assert "PAPERTRAIL_WEBHOOK_ALLOW_HOSTS" in str(caught.value)
    assert receiver.deliveries == []


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.1.1", "link-local"),
        ("2002:c0a8:0101::1", "private"),  # 6to4 around 192.168.1.1
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 around 127.0.0.1
        ("::7f00:1", "reserved"),  # IPv4-compatible, deprecated
        ("ff02::1", "multicast"),
        ("::", "unspecified"),
        ("100.64.0.1", "not globally routable"),
        ("93.184.215.14", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_blocked_reason(address: str, reason: str | None) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) == reason


async def test_pinned_to_the_checked_address_keeps_the_host_name(receiver: WebhookReceiver) -> None:
    # Allowing the address (not the name) makes "localhost" go through the check and the pinning.
    hook = WebhookNotifier(settings(webhook_allow_hosts="127.0.0.1").webhook(), quick_retry_delay=0)
    port = receiver.base_url.rsplit(":", 1)[1]
    url = f"http://localhost:{port}/hook"
    receiver.secret = webhook_secret(MASTER_KEY, url)
    try:
        await hook.send(url, digest(url))
    finally:
        await hook.aclose()
    [got] = receiver.deliveries
    assert got.header("Host") == f"localhost:{port}"
    assert got.signature_valid is True


@pytest.fixture(scope="module")
def localhost_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for DNS:localhost only (no IP address in it)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


@pytest.mark.net
async def test_pinned_https_verifies_the_certificate_for_the_name(localhost_cert: tuple[str, str]) -> None:
    trust = ssl.create_default_context(cafile=localhost_cert[0])
    with webhook_receiver(tls=localhost_cert) as rx:
        port = rx.base_url.rsplit(":", 1)[1]
        url = f"https://localhost:{port}/hook"
        rx.secret = webhook_secret(MASTER_KEY, url)
        async with httpx.AsyncClient(verify=trust, trust_env=False) as client:
            hook = WebhookNotifier(settings(webhook_allow_hosts="127.0.0.1").webhook(), client=client)
            await hook.send(url, digest(url))
            await hook.aclose()
            assert not client.is_closed  # an injected client belongs to the caller
        [got] = rx.deliveries
    # The connection went to 127.0.0.1, but TLS checked the certificate against "localhost" (SNI).
    assert got.header("Host") == f"localhost:{port}" and got.signature_valid is True
