"""The steps the shell calls over a subscriber (core.follows.subscribers, core.follows.manage.follow,
core.delivery.queue.send_now): the writes of one operation are one unit of work, so a failure in the middle
leaves nothing half-done. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from core.db import Database
from core.delivery import queue
from core.follows import manage, subscriber_records, subscribers
from core.follows.subscribers import SubscriberSettings
from core.ledger import ledger_records
from core.models import SubscriberStatus
from tests.support.ledger import seed

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
ADA = "console:ada"


class Planted(Exception):
    """Raised in the middle of a step to make its unit of work roll back."""


def _planted(*_: Any, **__: Any) -> Any:
    raise Planted


def test_a_follow_with_settings_is_stored_whole(db: Database) -> None:
    created = manage.follow(
        db, ADA, "cat:cs.DC", language="de", settings=SubscriberSettings(schedule="instant")
    )
    # A new subscriber takes the schedule and timezone it is created with, and the language given.
    assert created.subscriber_created and created.before is None
    assert (created.subscriber.language, created.subscriber.schedule) == ("de", "daily 08:00")
    again = manage.follow(
        db, ADA, "cat:cs.LG", settings=SubscriberSettings(schedule="instant", heartbeat=True, language="fr")
    )
    assert again.before == SubscriberSettings("daily 08:00", "UTC", False, "de")
    stored = subscribers.subscriber_by_address(db, ADA)
    assert stored is not None
    assert (stored.language, stored.schedule, stored.heartbeat) == ("fr", "instant", True)
    assert [f.query for f in subscribers.follows_of(db, stored.id or 0)] == ["cat:cs.DC", "cat:cs.LG"]


def test_a_follow_failing_at_its_settings_stores_nothing(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The follow is written before the settings: the failure rolls it back with them.
    manage.follow(db, ADA, "cat:cs.DC")
    monkeypatch.setattr(subscribers, "change_settings", _planted)
    with pytest.raises(Planted):
        manage.follow(db, ADA, "cat:cs.LG", settings=SubscriberSettings(timezone="Europe/Berlin"))
    stored = subscriber_records.get_subscriber(db, ADA)
    assert stored is not None and stored.timezone == "UTC"
    assert [f.query for f in subscribers.follows_of(db, stored.id or 0)] == ["cat:cs.DC"]


def test_a_follow_failing_at_its_language_stores_nothing(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscribers, "adopt_language", _planted)
    with pytest.raises(Planted):
        manage.follow(db, ADA, "cat:cs.DC", language="fr")
    assert subscriber_records.get_subscriber(db, ADA) is None


def test_the_platform_language_never_overwrites_a_chosen_one(db: Database) -> None:
    first = subscribers.ensure_subscriber(db, ADA, timezone="UTC", schedule="daily 08:00", language="de")
    assert first.language == "de"
    again = subscribers.ensure_subscriber(db, ADA, timezone="UTC", schedule="daily 08:00", language="fr")
    assert again.language == "de"
    manage.follow(db, ADA, "cat:cs.DC", language="fr")
    assert (subscribers.subscriber_by_address(db, ADA) or first).language == "de"


def test_a_new_subscriber_failing_at_its_language_is_not_created(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscriber_records, "update_subscriber", _planted)
    with pytest.raises(Planted):
        subscribers.ensure_subscriber(db, ADA, timezone="UTC", schedule="daily 08:00", language="de")
    assert subscriber_records.get_subscriber(db, ADA) is None


def test_pause_keeps_a_pause_there_and_set_schedule_lifts_only_its_own(db: Database) -> None:
    ada = subscribers.ensure_subscriber(db, ADA, timezone="UTC", schedule="daily 08:00")
    assert subscribers.pause(db, ada.id or 0, "paused from the chat")
    assert not subscribers.pause(db, ada.id or 0, "the bot was blocked")
    assert (subscribers.subscriber_by_address(db, ADA) or ada).status_reason == "paused from the chat"
    other = subscribers.set_schedule(db, ada.id or 0, "instant", lift_pause="another reason")
    assert (other.status, other.schedule) == (SubscriberStatus.PAUSED, "instant")
    lifted = subscribers.set_schedule(db, ada.id or 0, "daily 09:00", lift_pause="paused from the chat")
    assert (lifted.status, lifted.status_reason, lifted.schedule) == (
        SubscriberStatus.ACTIVE,
        None,
        "daily 09:00",
    )


def test_move_address_refuses_a_taken_address(db: Database) -> None:
    subscribers.ensure_subscriber(db, "telegram:-1", timezone="UTC", schedule="daily 08:00")
    subscribers.ensure_subscriber(db, "telegram:-2", timezone="UTC", schedule="daily 08:00")
    assert not subscribers.move_address(db, "telegram:-1", "telegram:-2")
    assert not subscribers.move_address(db, "telegram:-3", "telegram:-4")
    assert subscribers.move_address(db, "telegram:-1", "telegram:-5")
    assert subscribers.subscriber_by_address(db, "telegram:-1") is None
    assert subscribers.subscriber_by_address(db, "telegram:-5") is not None


def test_send_now_failing_at_the_requeue_opens_no_digest(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = seed(db, ADA, schedule="daily 08:00")
    ada = subscribers.subscriber_by_address(db, ADA)
    assert ada is not None
    monkeypatch.setattr(ledger_records, "requeue_dead", _planted)
    with pytest.raises(Planted):
        queue.send_now(db, ada, now=NOW)
    assert ledger_records.digests_of(db, sid) == []
    monkeypatch.undo()
    assert queue.send_now(db, ada, now=NOW) == queue.SentNow(2, True)
    assert len(ledger_records.digests_of(db, sid)) == 1


def test_send_now_queues_nothing_when_nothing_waits(db: Database) -> None:
    ada = subscribers.ensure_subscriber(db, ADA, timezone="UTC", schedule="daily 08:00")
    assert queue.send_now(db, ada, now=NOW) == queue.SentNow(0, False)
    assert ledger_records.digests_of(db, ada.id or 0) == []
