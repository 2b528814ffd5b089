"""Apprise notifier: the real Apprise library posting to a loopback receiver with its json:// service."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from core.channel import DeliveryError
from core.config import Settings
from core.delivery.render import Renderer
from core.values import Message
from notifiers.apprise.notifier import INSTALL_HINT, AppriseNotifier
from tests.fakes.webhook_receiver import WebhookReceiver, webhook_receiver
from tests.hostile import hostile_items
from tests.servers import Answer

ALLOW_LOOPBACK = Settings(webhook_allow_hosts="127.0.0.1")


def digest() -> Message:
    return Renderer(max_items=4).render("apprise", hostile_items(), "ntfy://topic", key="digest-9")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with webhook_receiver() as rx:
        yield rx


def apprise_url(receiver: WebhookReceiver, path: str = "/hook") -> str:
    return receiver.base_url.replace("http://", "json://") + path


async def test_json_service_delivers_title_and_body(receiver: WebhookReceiver) -> None:
    message = digest()
    result = await AppriseNotifier(ALLOW_LOOPBACK.apprise()).send(apprise_url(receiver), message)

    assert result.parts == 1
    [got] = receiver.deliveries
    assert got.path == "/hook"
    assert got.json["title"] == "PaperTrail: 3 new papers, 2 revisions"
    assert got.json["message"] == message.text.rstrip()  # Apprise trims trailing whitespace
    assert "2611.00004v3" in got.json["message"] and "\x1b" not in got.json["message"]
    assert "PaperTrail" in (got.header("User-Agent") or "")


async def test_failing_service_is_retryable_and_keeps_tokens_out(receiver: WebhookReceiver) -> None:
    receiver.script(Answer(500))
    url = apprise_url(receiver, "/hook/tok-PATHSECRET?key=QUERYSECRET").replace(
        "json://", "json://alice:PASSWORDSECRET@"
    )
    with pytest.raises(DeliveryError) as caught:
        await AppriseNotifier(ALLOW_LOOPBACK.apprise()).send(url, digest())

    text = str(caught.value)
    assert caught.value.retryable
    assert "500" in text and "json://127.0.0.1" in text  # Apprise's own reason, and where
    for secret in ("PATHSECRET", "QUERYSECRET", "PASSWORDSECRET", "alice"):
        assert secret not in text
    assert len(receiver.deliveries) == 1


async def test_redirects_are_not_followed_even_when_the_url_asks(receiver: WebhookReceiver) -> None:
    receiver.script(Answer(307, headers={"Location": receiver.base_url + "/elsewhere"}))
    with pytest.raises(DeliveryError) as caught:
        await AppriseNotifier(ALLOW_LOOPBACK.apprise()).send(
            apprise_url(receiver, "/hook?redirect=yes"), digest()
        )
    assert caught.value.retryable
    assert [d.path.split("?")[0] for d in receiver.deliveries] == ["/hook"]


@pytest.mark.parametrize("address", ["notaservice://x", "json://", "garbage", "tgram://"])
async def test_unusable_url_is_permanent(address: str) -> None:
    with pytest.raises(DeliveryError) as caught:
        await AppriseNotifier(ALLOW_LOOPBACK.apprise()).send(address, digest())
    assert not caught.value.retryable and "Apprise URL" in str(caught.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "169.254.169.254", "[::1]", "10.0.0.7"])
async def test_generic_http_services_get_the_address_check(receiver: WebhookReceiver, host: str) -> None:
    port = receiver.base_url.rsplit(":", 1)[1]
    with pytest.raises(DeliveryError) as caught:
        await AppriseNotifier(Settings().apprise()).send(f"json://{host}:{port}/hook", digest())
    assert not caught.value.retryable and "PAPERTRAIL_WEBHOOK_ALLOW_HOSTS" in str(caught.value)
    assert receiver.deliveries == []


async def test_missing_library_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "apprise", None)  # what `import apprise` sees when it is absent
    with pytest.raises(DeliveryError) as caught:
        await AppriseNotifier(ALLOW_LOOPBACK.apprise()).send("ntfy://topic", digest())
    assert not caught.value.retryable and INSTALL_HINT in str(caught.value)
