"""Credentials inside subscriber addresses reach no log line, CLI output or page.

A ``webhook:`` address may carry ``?token=…`` or a password, an ``apprise:`` one ``user:pass@``; a failed
delivery logs the address, stores the adapter's error (which may quote the URL) and lists both later.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from core.channel import DeliveryError, Notifier
from core.config import Settings
from core.db import Database
from core.delivery.digests import DeliveryPolicy, send_due_digests
from core.delivery.render import Renderer
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import Digest
from core.papers import paper_records
from core.people.masking import mask_address, mask_text
from core.values import Message, PaperIn, SendResult
from papertrail.cli.app import app
from papertrail.service.logs import NOISY_LOGGERS, configure_logging

WEBHOOK_SECRET = "WebhookSecret123"
APPRISE_PASSWORD = "ApprisePass99"
BASIC_PASSWORD = "BasicPw77"
SLACK_SECRET = "abcdefghijklmnopqrstuvwx"
WEBHOOK = f"webhook:https://hooks.example/papertrail?token={WEBHOOK_SECRET}"
APPRISE = f"apprise:mailto://ada:{APPRISE_PASSWORD}@mail.example"
BASIC = f"webhook:https://bob:{BASIC_PASSWORD}@hooks.example/refused"
SECRETS = (WEBHOOK_SECRET, APPRISE_PASSWORD, BASIC_PASSWORD)


def test_mask_address_keeps_channel_scheme_and_host() -> None:
    assert mask_address(WEBHOOK) == "webhook:https://hooks.example/papertrail?token=****"
    assert mask_address(APPRISE) == "apprise:mailto://ada:****@mail.example"
    assert mask_address(BASIC) == "webhook:https://bob:****@hooks.example/refused"
    slack = f"slack-webhook:https://hooks.slack.com/services/T0123ABCD/B0123ABCD/{SLACK_SECRET}"
    assert mask_address(slack) == "slack-webhook:https://hooks.slack.com/services/****/****/****"
    assert (
        mask_address("apprise:tgram://123456:AAHsecret_token-1/-1001") == "apprise:tgram://123456:****/-1001"
    )
    for plain in ("email:ada@example.org", "telegram:-1001", "slack:C0123ABC", "console:me"):
        assert mask_address(plain) == plain
    # In free text: fully after a channel prefix, credential-named parameters elsewhere.
    line = f"POST https://h.example/x?page=2&api_key=K3y9secretvalue failed for {WEBHOOK}"
    assert mask_text(line) == (
        "POST https://h.example/x?page=2&api_key=**** failed for "
        "webhook:https://hooks.example/papertrail?token=****"
    )


@dataclass
class FailingNotifier:
    """Fails every send the way real adapters can: quoting the target URL in the error."""

    channel: ClassVar[str] = "webhook"
    max_length: ClassVar[int | None] = None

    async def send(self, address: str, message: Message) -> SendResult:
        if "refused" in address:
            raise DeliveryError(f"{address} answered 410 Gone", retryable=False)
        if address.startswith("mailto:"):
            raise RuntimeError(f"cannot connect to {address}")  # an adapter bug: the crash path
        raise DeliveryError(f"POST {address} timed out", retryable=True)

    async def aclose(self) -> None:
        pass


def seed(db: Database) -> None:
    for address in (WEBHOOK, APPRISE, BASIC):
        follow(db, address, "cat:cs.DC", schedule="instant")
    paper_records.save_versions(
        db, [PaperIn("2611.00001", 1, "Rollouts", "An abstract.", ("Ada",), ("cs.DC",))]
    )
    assert match_new(db) == 1  # one paper, matched for all three


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the root logger's level, handlers and filters back as they were."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    filters = {h: list(h.filters) for h in handlers}
    noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield
    for name, noisy_level in noisy.items():
        logging.getLogger(name).setLevel(noisy_level)
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler, kept in filters.items():
        handler.filters[:] = kept
    root.setLevel(level)


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_failed_deliveries_leave_no_credential_in_logs(
    sqlite_store: Database, log_format: str, caplog: pytest.LogCaptureFixture, restore_logging: None
) -> None:
    seed(sqlite_store)
    stream = io.StringIO()
    caplog.set_level(logging.INFO)
    configure_logging(Settings(log_format=log_format), stream=stream)
    notifier = FailingNotifier()
    notifiers: dict[str, Notifier] = {"webhook": notifier, "apprise": notifier}
    reports = await send_due_digests(
        sqlite_store, notifiers, Renderer(), policy=DeliveryPolicy(max_attempts=1), force=True
    )
    assert len(reports) == 3 and not any(r.sent for r in reports)
    assert {r.paused for r in reports} == {True, False}
    written = stream.getvalue()
    assert "hooks.example" in written and "mail.example" in written  # the host stays readable
    if log_format == "json":
        entries = [json.loads(line) for line in written.splitlines()]
        assert any("subscriber" in entry for entry in entries)
    assert_clean(written)
    assert_clean(caplog.text)
    for record in caplog.records:  # what any other handler would write: message, traceback, extras
        assert_clean(record.getMessage() + str(record.exc_text))
        assert_clean(" ".join(v for v in vars(record).values() if isinstance(v, str)))
    for report in reports:
        assert_clean(report.error or "")
    for digest, _address in ledger_records.dead_digests(sqlite_store):
        assert_clean(digest.error or "")  # stored masked: `status` and the pages list it later


def test_cli_output_masks_addresses(
    sqlite_store: Database, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    seed(sqlite_store)
    notifier = FailingNotifier()
    asyncio.run(
        send_due_digests(
            sqlite_store,
            {"webhook": notifier, "apprise": notifier},
            Renderer(),
            policy=DeliveryPolicy(max_attempts=1),
            force=True,
        )
    )
    # An old row written before masking (or by a hand): the listing masks it on the way out too.
    (dead, _address) = ledger_records.dead_digests(sqlite_store)[0]
    with sqlite_store.session() as session:
        row = session.get(Digest, dead.id)
        assert row is not None
        row.error = f"POST {WEBHOOK.removeprefix('webhook:')} timed out"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", sqlite_url)
    runner = CliRunner()
    outputs = []
    for args in (
        ["status"],
        ["status", "--json"],
        ["follows", WEBHOOK],
        ["follows", APPRISE],
        ["follows", BASIC],
        ["follow", WEBHOOK, "cat:cs.LG"],
        ["schedule", APPRISE, "daily"],
        ["resume", BASIC],
        ["follow", "webhook:ftp://nope?token=" + WEBHOOK_SECRET, "cat:cs.LG"],
    ):
        result = runner.invoke(app, args)
        outputs.append(result.stdout + result.stderr)
    text = "\n".join(outputs)
    assert "hooks.example" in text and "dead digest" in text
    assert_clean(text)


def test_pages_show_the_address_masked(sqlite_store: Database) -> None:
    from core.people import tokens
    from tests.support.token_clients import KEY, client_for

    seed(sqlite_store)
    client = client_for(sqlite_store)
    for address in (WEBHOOK, APPRISE):
        manage = client.get(f"/manage/{tokens.sign(KEY, tokens.MANAGE, address)}")
        unsubscribe = client.get(f"/unsubscribe/{tokens.sign(KEY, tokens.UNSUBSCRIBE, address)}")
        for page in (manage, unsubscribe):
            assert page.status_code == 200
            assert (
                mask_address(address) in page.text or mask_address(address).replace("&", "&amp;") in page.text
            )
            assert_clean(page.text)
    gone = client.get(
        f"/manage/{tokens.sign(KEY, tokens.MANAGE, 'webhook:https://h.example/?token=' + WEBHOOK_SECRET)}"
    )
    assert gone.status_code == 404
    assert_clean(gone.text)
