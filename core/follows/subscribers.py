"""One subscriber's row, the steps the shell calls: find it, create it, change its settings, pause or
unsubscribe it, move it to a new address, and its follows as a list.

Adding and removing a follow by what a reader typed is ``core.follows.manage``'s; re-activating a paused
subscriber (which re-queues its dead digests) is ``core.delivery.digests.resume``'s. Each step here is one
unit of work: a read that decides a write runs in the write's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from core.db import Db
from core.follows import subscriber_records
from core.models import Follow, Subscriber, SubscriberStatus


@dataclass(frozen=True, slots=True)
class SubscriberSettings:
    """Settings a command sets on a subscriber; a field left None stays as it is."""

    schedule: str | None = None
    """A schedule already checked (``core.schedule.parse_schedule(...).text``)."""
    timezone: str | None = None
    """An IANA zone already checked (``core.schedule.zone``)."""
    heartbeat: bool | None = None
    language: str | None = None
    """A language PaperTrail speaks (``core.languages.LANGUAGES``)."""

    def changes(self, subscriber: Subscriber) -> dict[str, object]:
        """The fields given that differ from ``subscriber``'s."""
        wanted = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in wanted.items() if v is not None and getattr(subscriber, k) != v}


def subscriber_by_address(db: Db, address: str) -> Subscriber | None:
    """The stored subscriber at ``address`` (already normalised), None when there is none."""
    found = subscriber_records.get_subscriber(db, address)
    return found if found is not None and found.id is not None else None


def ensure_subscriber(
    db: Db, address: str, *, timezone: str, schedule: str, language: str | None = None
) -> Subscriber:
    """The subscriber at ``address``, created with ``timezone`` and ``schedule`` when new.

    ``language`` (a chat platform's language of the sender) is stored when the subscriber has none yet,
    never over one chosen. Creating the subscriber and storing its language are one unit of work: a
    failure leaves no subscriber without the language it was created with.
    """
    with db.transaction() as tx:
        subscriber, _ = subscriber_records.ensure_subscriber(
            tx, address, timezone=timezone, schedule=schedule
        )
        return _adopt(tx, subscriber, language)


def adopt_language(db: Db, subscriber_id: int, language: str) -> Subscriber:
    """Store ``language`` as the subscriber's when it has none; the subscriber as it is now."""
    with db.transaction() as tx:
        subscriber = _known(tx, subscriber_id)
        return _adopt(tx, subscriber, language)


def change_settings(db: Db, subscriber_id: int, settings: SubscriberSettings) -> Subscriber:
    """Set the settings given (schedule, timezone, heartbeat, language); the subscriber as it is now.

    Raises LookupError for an unknown subscriber.
    """
    with db.transaction() as tx:
        subscriber = _known(tx, subscriber_id)
        changes = settings.changes(subscriber)
        return subscriber_records.update_subscriber(tx, subscriber_id, **changes) if changes else subscriber


def set_schedule(db: Db, subscriber_id: int, schedule: str, *, lift_pause: str) -> Subscriber:
    """Store ``schedule`` (already checked); a subscriber paused with the reason ``lift_pause`` is active
    again (choosing a time after the chat's own ``digest off`` means "on again, at this time")."""
    with db.transaction() as tx:
        subscriber = _known(tx, subscriber_id)
        fields_: dict[str, object] = {"schedule": schedule}
        if subscriber.status == SubscriberStatus.PAUSED and subscriber.status_reason == lift_pause:
            fields_.update(status=SubscriberStatus.ACTIVE, status_reason=None)
        return subscriber_records.update_subscriber(tx, subscriber_id, **fields_)


def pause(db: Db, subscriber_id: int, reason: str) -> bool:
    """Pause an active subscriber with ``reason``: no digests and no matching until it is resumed.

    False (and nothing changed) when the subscriber is not active: a pause already there keeps its reason.
    """
    with db.transaction() as tx:
        subscriber = _known(tx, subscriber_id)
        if subscriber.status != SubscriberStatus.ACTIVE:
            return False
        subscriber_records.update_subscriber(
            tx, subscriber_id, status=SubscriberStatus.PAUSED, status_reason=reason
        )
        return True


def unsubscribe(db: Db, subscriber_id: int, *, reason: str) -> Subscriber:
    """Stop digests to the subscriber (its follows and matches stay; planned digests are withdrawn,
    ``subscriber_records.unsubscribe``); the subscriber as it is now."""
    with db.transaction() as tx:
        subscriber_records.unsubscribe(tx, subscriber_id, reason=reason)
        return _known(tx, subscriber_id)


def move_address(db: Db, old: str, new: str) -> bool:
    """Move the subscription at ``old`` to the address ``new`` (a Telegram group that became a supergroup).

    False (nothing moved) when ``old`` has no subscriber or ``new`` has one already.
    """
    with db.transaction() as tx:
        subscriber = subscriber_records.get_subscriber(tx, old)
        if subscriber is None or subscriber.id is None or subscriber_records.get_subscriber(tx, new):
            return False
        subscriber_records.update_subscriber(tx, subscriber.id, address=new)
        return True


def follows_of(db: Db, subscriber_id: int) -> list[Follow]:
    """The subscriber's follows in the order they were added: the numbering readers see."""
    return subscriber_records.follows_of(db, subscriber_id)


def follows_at(db: Db, address: str) -> list[Follow]:
    """The follows of the subscriber at ``address`` (already normalised), numbered as readers see them;
    empty for an address without a subscriber."""
    with db.transaction() as tx:
        subscriber = subscriber_records.get_subscriber(tx, address)
        if subscriber is None or subscriber.id is None:
            return []
        return subscriber_records.follows_of(tx, subscriber.id)


def remove_follow(db: Db, follow_id: int) -> None:
    """Delete one follow, chosen from :func:`follows_of`; the matches it produced stay in the ledger."""
    subscriber_records.remove_follow(db, follow_id)


def _known(db: Db, subscriber_id: int) -> Subscriber:
    found = subscriber_records.subscriber_by_id(db, subscriber_id)
    if found is None:
        raise LookupError(f"subscriber {subscriber_id} does not exist")
    return found


def _adopt(db: Db, subscriber: Subscriber, language: str | None) -> Subscriber:
    if language is None or subscriber.language is not None or subscriber.id is None:
        return subscriber
    return subscriber_records.update_subscriber(db, subscriber.id, language=language)
