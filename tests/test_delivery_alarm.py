"""A server-wide refusal is an alarm for the operator, not N paused subscribers.

A real SMTP server (aiosmtpd) plays a misconfigured relay: it answers 550 to every RCPT (or refuses the
sender, or the login) until it is "fixed". The delivery pass must pause nobody, hold the digests for a
retry without counting the attempts, raise one alarm (logged once, shown on the status page, /metrics and
the CLI), and deliver everything once the server accepts again, clearing the alarm. A single recipient
refused among accepted ones is still paused, and a subscriber paused by a refusal is matched while
paused: what arrived meanwhile reaches it after ``resume``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from core.channel import DeliveryError, Notifier
from core.config import Settings
from core.db import Database, make_engine
from core.db_migrate import alembic_config
from core.delivery import alarm_records
from core.delivery.alarm import HOLD_WAIT_MIN, Refused, judge
from core.delivery.digests import DeliveryPolicy, DigestReport, resume, send_due_digests
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.follows.fanout import HOLD_MATCHES_FOR
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import DigestState, SubscriberStatus, utcnow
from core.overview import dashboard_records
from core.papers import paper_records
from papertrail.cli.app import app
from papertrail.service.channels import CHANNELS
from tests.servers import LoopbackController
from tests.support.ledger import ScriptedNotifier, paper
from tests.support.smtp_server import authenticate, smtp_server
from tests.support.web import client_for

RELAY_DENIED = "550 5.7.1 <{address}>: Relay access denied"


@dataclass
class Relay:
    """aiosmtpd handler of a relay that refuses every recipient (``refuse_all``), some of them, or the
    sender, until the test fixes it; keeps every message it accepts."""

    refuse_all: str | None = RELAY_DENIED
    refuse: dict[str, str] = field(default_factory=dict)
    refuse_sender: str | None = None
    rcpts: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, mail_options: Any
    ) -> str:
        if self.refuse_sender:
            return self.refuse_sender
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: Any
    ) -> str:
        self.rcpts.append(address)
        reply = self.refuse.get(address) or self.refuse_all
        if reply:
            return reply.format(address=address)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content, policy=policy.default)
        self.received.extend(envelope.rcpt_tos)
        assert message["To"]
        return "250 Message accepted"


@contextmanager
def relay(**options: Any) -> Iterator[tuple[Relay, Settings]]:
    """A real SMTP relay on 127.0.0.1 and the settings that point PaperTrail at it."""
    handler = Relay(**options)
    controller = LoopbackController(handler)
    controller.start()
    try:
        yield handler, Settings(smtp_host="127.0.0.1", smtp_port=controller.port, smtp_timeout=5)
    finally:
        controller.stop()


def readers(db: Database, count: int, *, papers: int = 1) -> list[str]:
    """``count`` email subscribers following cs.DC with instant digests and ``papers`` matched papers."""
    addresses = [f"email:reader{n:03d}@example.org" for n in range(count)]
    for address in addresses:
        follow(db, address, "cat:cs.DC", schedule="instant")
    paper_records.save_versions(db, [paper(f"2611.{n:05d}") for n in range(papers)])
    match_new(db)
    return addresses


async def one_pass(db: Database, settings: Settings, **options: Any) -> list[DigestReport]:
    notifiers = CHANNELS.build_notifiers(settings)
    try:
        return await send_due_digests(db, notifiers, Renderer(), **options)
    finally:
        for notifier in notifiers.values():
            await notifier.aclose()


def paused(db: Database, addresses: list[str]) -> list[str]:
    found = [subscriber_records.get_subscriber(db, a) for a in addresses]
    return [s.address for s in found if s is not None and s.status == SubscriberStatus.PAUSED]


# -- the server's refusal ---------------------------------------------------------------------------------


async def test_a_relay_refusing_every_recipient_pauses_nobody_and_alarms_once(
    sqlite_store: Database, caplog: pytest.LogCaptureFixture
) -> None:
    db = sqlite_store
    addresses = readers(db, 200)
    with relay() as (server, settings):
        start = utcnow()
        with caplog.at_level(logging.WARNING):
            reports = await one_pass(db, settings)
        # One pass: every digest tried once, nobody paused, nothing dead, everything held for a retry.
        assert len(reports) == 200 and len(set(server.rcpts)) == 200
        assert not any(r.sent or r.paused or r.dead for r in reports)
        assert paused(db, addresses) == [] and dashboard_records.status(db).paused_subscribers == 0
        (alarm,) = alarm_records.delivery_alarms(db)
        assert (alarm.channel, alarm.kind) == ("email", "rcpt 550 5.7.1")
        assert alarm.recipients == DeliveryPolicy().batch and alarm.held == 200
        assert "Relay access denied" in alarm.sample and "<recipient>" in alarm.sample
        assert "example.org" not in alarm.sample  # the status page never names a subscriber
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and "delivery alarm on email" in errors[0].getMessage()
        with db.engine.connect() as conn:
            rows = conn.execute(sa.text("select state, attempts, next_attempt_at from digest")).all()
        assert Counter((state, attempts) for state, attempts, _ in rows) == {(DigestState.PENDING, 0): 200}
        assert dashboard_records.status(db).dead_digests == 0
        # Held, not hammered: nothing is due again straight away.
        assert await one_pass(db, settings) == []

        # The operator fixes the relay: the next pass after the hold delivers everything and clears it.
        server.refuse_all = None
        later = start + HOLD_WAIT_MIN + timedelta(minutes=1)
        again = await one_pass(db, settings, now=later)
    assert len(again) == 200 and all(r.sent for r in again)
    assert sorted(server.received) == sorted(a.removeprefix("email:") for a in addresses)
    assert alarm_records.delivery_alarms(db) == []
    (cleared,) = alarm_records.delivery_alarms(db, raised_only=False)
    assert cleared.cleared_at is not None
    assert "cleared" in caplog.text


async def test_one_refused_recipient_among_accepted_ones_is_still_paused(sqlite_store: Database) -> None:
    addresses = readers(sqlite_store, 6)
    gone = addresses[3]
    refusal = {gone.removeprefix("email:"): "550 5.1.1 mailbox unavailable"}
    with relay(refuse_all=None, refuse=refusal) as (server, settings):
        reports = await one_pass(sqlite_store, settings)
    by_address = {r.address: r for r in reports}
    assert by_address[gone].paused and not by_address[gone].sent
    assert paused(sqlite_store, addresses) == [gone]
    assert sum(r.sent for r in reports) == 5 and len(server.received) == 5
    assert alarm_records.delivery_alarms(sqlite_store) == []


async def test_three_subscribers_all_refused_is_the_servers_refusal_one_alone_is_paused(
    sqlite_store: Database,
) -> None:
    # Fewer than PAPERTRAIL_DELIVERY_ALARM_RECIPIENTS on the channel: every one of them refused the same
    # way is server-wide too. A lone subscriber cannot tell the two apart and is paused, as before.
    three = readers(sqlite_store, 3)
    with relay() as (_, settings):
        reports = await one_pass(sqlite_store, settings)
    assert len(reports) == 3 and not any(r.paused for r in reports)
    assert paused(sqlite_store, three) == []
    assert [(a.channel, a.recipients) for a in alarm_records.delivery_alarms(sqlite_store)] == [("email", 3)]


async def test_a_lone_subscriber_refused_is_paused(sqlite_store: Database) -> None:
    (only,) = readers(sqlite_store, 1)
    with relay() as (_, settings):
        (report,) = await one_pass(sqlite_store, settings)
    assert report.paused and paused(sqlite_store, [only]) == [only]
    assert alarm_records.delivery_alarms(sqlite_store) == []


async def test_while_the_alarm_is_raised_a_small_batch_is_held_not_paused(sqlite_store: Database) -> None:
    db = sqlite_store
    addresses = readers(db, 6)
    alarm_records.raise_alarm(
        db, "email", "rcpt 550 5.7.1", recipients=40, held=40, sample="550 5.7.1", now=utcnow()
    )
    # One refused recipient next to five delivered would be paused; the raised alarm holds it instead.
    refusal = {addresses[0].removeprefix("email:"): RELAY_DENIED}
    with relay(refuse_all=None, refuse=refusal) as (_, settings):
        reports = await one_pass(db, settings)
    assert sum(r.sent for r in reports) == 5 and not any(r.paused for r in reports)
    assert paused(db, addresses) == []
    (alarm,) = alarm_records.delivery_alarms(db)
    assert alarm.held == 41  # the batch refused that way again: the alarm stays raised


async def test_a_refused_sender_raises_the_alarm_at_once_and_never_dead_letters(
    sqlite_store: Database,
) -> None:
    (only,) = readers(sqlite_store, 1)
    policy = DeliveryPolicy(max_attempts=2)
    with relay(refuse_all=None, refuse_sender="550 5.7.1 Sender address rejected: not owned by user") as (
        server,
        settings,
    ):
        for _ in range(4):  # twice max_attempts: an outage of the sender's setup dead-letters nothing
            (report,) = await one_pass(sqlite_store, settings, policy=policy, force=True)
            assert not (report.sent or report.paused or report.dead)
        (alarm,) = alarm_records.delivery_alarms(sqlite_store)
        assert (alarm.kind, alarm.held) == ("sender 550 5.7.1", 4)
        assert dashboard_records.status(sqlite_store).dead_digests == 0 and paused(sqlite_store, [only]) == []
        server.refuse_sender = None
        (report,) = await one_pass(sqlite_store, settings, policy=policy, force=True)
    assert report.sent and alarm_records.delivery_alarms(sqlite_store) == []


async def test_a_refused_login_is_the_operators_alarm(sqlite_store: Database) -> None:
    readers(sqlite_store, 1)
    with smtp_server(authenticator=authenticate, auth_require_tls=False) as (_, controller):
        settings = Settings(
            smtp_host="127.0.0.1",
            smtp_port=controller.port,
            smtp_user="ada",
            smtp_password="wrong-password-xyzzy",
            smtp_timeout=5,
        )
        (report,) = await one_pass(sqlite_store, settings, policy=DeliveryPolicy(max_attempts=1))
    assert not (report.sent or report.paused or report.dead)
    (alarm,) = alarm_records.delivery_alarms(sqlite_store)
    assert alarm.kind.startswith("login 535") and "xyzzy" not in alarm.sample


async def test_a_revoked_chat_token_pauses_nobody(db: Database) -> None:
    # The Slack adapter marks its token's errors as the operator's (tests/test_notifier_slack.py); the
    # ledger then holds the digest and raises the alarm, whatever the number of subscribers.
    follow(db, "console:team", "cat:cs.DC", schedule="instant")
    paper_records.save_versions(db, [paper("2611.00001")])
    match_new(db)
    revoked = DeliveryError(
        "Slack refused the digest (token_revoked)", retryable=False, kind="token_revoked", operator=True
    )
    (report,) = await send_due_digests(db, {"console": ScriptedNotifier([revoked])}, Renderer())
    assert not (report.sent or report.paused or report.dead)
    assert [(a.channel, a.kind) for a in alarm_records.delivery_alarms(db)] == [("console", "token_revoked")]
    (again,) = await send_due_digests(db, {"console": ScriptedNotifier()}, Renderer(), force=True)
    assert again.sent and alarm_records.delivery_alarms(db) == []


# -- the verdict's rules ----------------------------------------------------------------------------------


def refused(channel: str, n: int, kind: str = "rcpt 550 5.7.1", *, operator: bool = False) -> list[Refused]:
    error = DeliveryError("refused", retryable=False, kind=kind, operator=operator)
    return [Refused(i, f"{channel}:r{i}@example.org", 1, 1, error) for i in range(n)]


@pytest.mark.parametrize(
    ("refusals", "accepted", "population", "held"),
    [
        (5, 0, 10_000, True),  # the threshold, nobody delivered
        (4, 0, 10_000, False),  # below it, on a big channel: the recipients'
        (5, 6, 10_000, False),  # more delivered than refused: the recipients'
        (45, 5, 10_000, True),  # a relay that delivers only to its own domain
        (3, 0, 3, True),  # every subscriber of a small channel
        (2, 0, 2, True),  # both subscribers of a two-subscriber channel
        (1, 0, 1, False),  # one alone cannot tell
    ],
)
def test_the_verdict(refusals: int, accepted: int, population: int, held: bool) -> None:
    verdict = judge(
        refused("email", refusals),
        Counter({"email": accepted}),
        (),
        threshold=5,
        population=lambda channel: population,
    )
    assert bool(verdict.held) == held and len(verdict.paused) == (0 if held else refusals)


def test_the_verdict_holds_operator_failures_and_raised_kinds_and_clears_disproved_alarms() -> None:
    raised = {("email", "rcpt 550 5.7.1"), ("email", "data 554 5.7.1"), ("telegram", "refused")}
    group = refused("email", 1) + refused("email", 1, "sender 553", operator=True)
    verdict = judge(group, Counter({"email": 9}), raised, threshold=5, population=lambda channel: 100)
    assert set(verdict.held) == {("email", "rcpt 550 5.7.1"), ("email", "sender 553")}
    assert verdict.paused == []
    # email delivered and refused nobody with 554: that alarm is disproved; telegram delivered nothing.
    assert verdict.cleared == [("email", "data 554 5.7.1")]


# -- held matches and resume ------------------------------------------------------------------------------


async def test_papers_ingested_while_paused_arrive_after_resume(db: Database) -> None:
    follow(db, "console:ada", "cat:cs.DC", schedule="instant")
    paper_records.save_versions(db, [paper("2611.00001"), paper("2611.00002")])
    match_new(db)
    notifier = ScriptedNotifier([DeliveryError("Forbidden: bot was blocked by the user", retryable=False)])
    notifiers: dict[str, Notifier] = {"console": notifier}
    (report,) = await send_due_digests(db, notifiers, Renderer())
    assert report.paused
    # A reader's own pause collects nothing, as the chat bots tell them.
    chat = follow(db, "console:away", "cat:cs.DC", schedule="instant").subscriber
    subscriber_records.update_subscriber(
        db, chat.id or 0, status=SubscriberStatus.PAUSED, status_reason="paused from the chat"
    )

    paper_records.save_versions(db, [paper("2611.00003"), paper("2611.00004", version=2)])
    match_new(db)
    ada = subscriber_records.get_subscriber(db, "console:ada")
    assert ada is not None and ada.id is not None and ada.status == SubscriberStatus.PAUSED
    assert len(ledger_records.pending_matches(db, ada.id)) == 4  # matched while paused, held
    assert ledger_records.pending_matches(db, chat.id or 0) == []
    assert await send_due_digests(db, notifiers, Renderer(), force=True) == []  # still paused

    resume(db, "console:ada")
    (again,) = await send_due_digests(db, notifiers, Renderer())
    assert again.sent and again.items == 4
    shown = notifier.sent[-1][1].text
    assert "2611.00003" in shown and "2611.00004v2" in shown


async def test_a_pause_nobody_resumes_stops_collecting_after_the_hold(db: Database) -> None:
    subscriber = follow(db, "console:gone", "cat:cs.DC", schedule="instant").subscriber
    long_ago = utcnow() - HOLD_MATCHES_FOR - timedelta(hours=1)
    subscriber_records.update_subscriber(
        db, subscriber.id or 0, status=SubscriberStatus.PAUSED, status_reason="410 Gone", refused_at=long_ago
    )
    paper_records.save_versions(db, [paper("2611.00001")])
    match_new(db)
    assert ledger_records.pending_matches(db, subscriber.id or 0) == []


def test_resume_refused_picks_refusal_pauses_only(db: Database) -> None:
    now = utcnow()
    cases = {
        "console:a": ("550 5.7.1 Relay_access 100% denied", now),
        "console:b": ("550 5.7.1 Relay_access 100% denied", None),  # the reader's own pause
        "console:c": ("550 5.1.1 no such user", now),
    }
    for address, (reason, refused_at) in cases.items():
        subscriber = follow(db, address, "cat:cs.DC").subscriber
        subscriber_records.update_subscriber(
            db,
            subscriber.id or 0,
            status=SubscriberStatus.PAUSED,
            status_reason=reason,
            refused_at=refused_at,
        )
    # LIKE's wildcards in the text are literal: "_" and "%" match only themselves.
    assert alarm_records.refused_subscribers(db, reason="relay_access 100%") == (1, ["console:a"])
    assert alarm_records.refused_subscribers(db, reason="relay access") == (0, [])
    assert alarm_records.refused_subscribers(db, since=now + timedelta(seconds=1)) == (0, [])
    assert alarm_records.resume_refused(db, reason="5.7.1", now=now) == 1
    statuses = {a: (s.status if (s := subscriber_records.get_subscriber(db, a)) else None) for a in cases}
    assert statuses == {"console:a": "active", "console:b": "paused", "console:c": "paused"}


# -- operators: resume by cause, the CLI, the status page, /metrics, the migration -------------------------

runner = CliRunner()


@pytest.mark.db
def test_resume_by_reason_and_since_resumes_exactly_those_a_refusal_paused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", url)
    assert runner.invoke(app, ["follow", "console:seed", "cat:cs.DC"]).exit_code == 0  # migrates the file
    db = Database(make_engine(url))
    now = utcnow()
    relay_denied = "SMTP server refused recipient {}: 550 5.7.1 Relay access denied"
    setup = {
        "email:a@example.org": (relay_denied, now - timedelta(hours=1)),
        "email:b@example.org": (relay_denied, now - timedelta(hours=2)),
        "email:c@example.org": (relay_denied, now - timedelta(days=3)),
        "email:d@example.org": ("SMTP server refused recipient {}: 550 5.1.1 no such user", now),
        "email:e@example.org": ("550 5.7.1 Relay access denied, typed by the reader", None),  # own pause
    }
    for address, (reason, refused_at) in setup.items():
        subscriber = follow(db, address, "cat:cs.DC").subscriber
        subscriber_records.update_subscriber(
            db,
            subscriber.id or 0,
            status=SubscriberStatus.PAUSED,
            status_reason=reason.format(address),
            refused_at=refused_at,
        )

    def status_of(address: str) -> str:
        found = subscriber_records.get_subscriber(db, address)
        assert found is not None
        return found.status

    result = runner.invoke(app, ["resume"])
    assert result.exit_code == 2 and "--reason" in result.stderr
    result = runner.invoke(app, ["resume", "--reason", "no such reason"])
    assert result.exit_code == 1 and "no subscriber paused by a delivery refusal" in result.stderr
    result = runner.invoke(app, ["resume", "--reason", "relay ACCESS denied", "--since", "1d", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert "would resume 2 subscribers" in result.stdout
    assert "a@example.org" in result.stdout and "b@example.org" in result.stdout
    assert status_of("email:a@example.org") == SubscriberStatus.PAUSED  # a dry run changes nothing

    result = runner.invoke(app, ["resume", "--reason", "relay access denied", "--since", "1d"])
    assert result.exit_code == 0 and "resumed 2 subscribers" in result.stdout
    assert [status_of(a) for a in setup] == ["active", "active", "paused", "paused", "paused"]
    result = runner.invoke(app, ["resume", "--since", (now - timedelta(days=4)).date().isoformat()])
    assert result.exit_code == 0 and "resumed 2 subscribers" in result.stdout
    assert [status_of(a) for a in setup] == ["active", "active", "active", "active", "paused"]
    result = runner.invoke(app, ["resume", "email:a@example.org", "--reason", "550"])
    assert result.exit_code == 2 and "not both" in result.stderr
    db.engine.dispose()


@pytest.mark.db
def test_status_and_alarms_commands_show_and_clear_the_alarm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", url)
    assert runner.invoke(app, ["alarms"]).stdout.strip() == "no delivery alarm is raised"
    db = Database(make_engine(url))
    alarm_records.raise_alarm(
        db, "email", "rcpt 550 5.7.1", recipients=50, held=200, sample="550 5.7.1", now=utcnow()
    )
    status = runner.invoke(app, ["status"])
    assert "delivery alarm on email: 50 recipients refused the same way (rcpt 550 5.7.1)" in status.stderr
    data = runner.invoke(app, ["status", "--json"]).stdout
    assert '"kind": "rcpt 550 5.7.1"' in data and '"held": 200' in data
    assert "delivery alarm on email" in runner.invoke(app, ["alarms"]).stdout
    cleared = runner.invoke(app, ["alarms", "clear", "email"])
    assert cleared.exit_code == 0 and "cleared the delivery alarm on email" in cleared.stdout
    assert alarm_records.delivery_alarms(db) == []
    assert runner.invoke(app, ["alarms", "clear"]).exit_code == 1
    db.engine.dispose()


@pytest.mark.parametrize(("lang", "headline"), [("en", "Delivery alarm: email"), ("zh", "投递告警：email")])
def test_the_status_page_and_metrics_show_the_alarm(db: Database, lang: str, headline: str) -> None:
    hostile = "550 5.7.1 <script>alert(1)</script> & <b>denied</b>"
    alarm_records.raise_alarm(
        db, "email", "rcpt 550 5.7.1", recipients=50, held=200, sample=hostile, now=utcnow()
    )
    client = client_for(db)
    page = client.get(f"/?lang={lang}").text
    assert headline in page and 'data-alarm="email"' in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    samples = {
        (sample.name, sample.labels.get("channel")): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
        if sample.name == "papertrail_delivery_alarm"
    }
    assert samples[("papertrail_delivery_alarm", "email")] == 1
    assert samples[("papertrail_delivery_alarm", "telegram")] == 0
    alarm_records.clear_alarms(db, "email", now=utcnow())
    assert 'data-alarm="email"' not in client.get("/").text


def test_0015_marks_the_subscribers_the_ledger_paused(db_url: str) -> None:
    engine = make_engine(db_url)
    config = alembic_config(engine)
    t = "2026-12-01 10:00:00"
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0014")
        for n, (status, reason) in enumerate(
            [("paused", "SMTP refused: 550 5.7.1"), ("paused", "paused from the chat"), ("active", None)], 1
        ):
            conn.execute(
                sa.text(
                    "insert into subscriber (id, address, timezone, schedule, status, status_reason, "
                    "created_at, failures) values (:n, :a, 'UTC', 'daily 08:00', :s, :r, :t, 0)"
                ),
                {"n": n, "a": f"console:s{n}", "s": status, "r": reason, "t": t},
            )
        conn.execute(
            sa.text(
                "insert into digest (subscriber_id, created_at, state, item_count, channel, error, attempts,"
                " parts_sent) values (1, :t, 'failed', 1, 'email', 'SMTP refused: 550 5.7.1', 1, 0)"
            ),
            {"t": t},
        )
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        marked = {
            int(n): refused is not None
            for n, refused in conn.execute(sa.text("select id, refused_at from subscriber"))
        }
    engine.dispose()
    assert marked == {1: True, 2: False, 3: False}
