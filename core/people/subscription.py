"""Moving one reader's subscription to another PaperTrail: ``export subscription`` (and the manage page's
download) writes the subscription file (core.people.subscription_file); ``import subscription`` checks it
whole
and restores it in one transaction (core.people.subscription_records).

What an import does with an address the server has already (:class:`Mode`):

* REFUSE, the default: a subscriber with the file's settings, follows and newsletters is accepted (importing
  a file twice changes nothing); any other is refused, nothing stored, the differences named;
* MERGE: the file's schedule, timezone, language (unless the file has none), heartbeat and recommendations
  (unless the file has them off) replace the stored ones; its follows are added or get its options, as
  ``import follows`` does; its newsletters are joined; its votes are added, and a version voted on both
  here and in the file keeps the newer vote; its library seeds are added by key; nothing is removed;
* REPLACE: the settings, follows, newsletters, votes and library seeds become exactly the file's.

Votes and seeds count as part of the subscription in REFUSE's comparison, so a re-import is accepted and a
reader who voted here since is not overwritten silently. A version-1 file has no votes, seeds or
recommendations: they are left as they are in every mode, REPLACE too (the file cannot say they are gone).
A vote on a version this library does not have is skipped and counted (:attr:`Restored.votes_missing`).

An existing subscriber keeps its status whatever the mode: a reader who unsubscribed or paused here is not
re-activated by a file (``papertrail resume`` and the manage page do that), and an active one is not
stopped by one. A new subscriber gets the file's status.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.channel import channel_of, normalise_address
from core.db import Database
from core.models import utcnow
from core.people import subscription_records
from core.people.subscription_file import Mode, Subscription, document, read_document
from core.people.subscription_records import Restored

__all__ = ["Exported", "after_import", "export_subscription", "exported", "import_subscription"]


@dataclass(frozen=True, slots=True)
class Exported:
    """A subscription file's document and what it left out: the oldest votes and seeds beyond
    core.people.subscription_file's MAX_VOTES and MAX_LIBRARY (a model learns from far fewer)."""

    document: dict[str, Any]
    votes_left_out: int
    library_left_out: int


def export_subscription(db: Database, address: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The subscription file's document of ``address``, whatever its status (see :func:`exported`)."""
    return exported(db, address, now=now).document


def exported(db: Database, address: str, *, now: datetime | None = None) -> Exported:
    """The subscription file's document of ``address``, whatever its status, and what it left out.

    Raises ValueError for a malformed address or a newsletter's (its definition is not a subscription) and
    LookupError when there is no such subscriber.
    """
    address = normalise_address(address)
    if not channel_of(address).delivers:
        raise ValueError(f"{address} is a newsletter, not a reader's subscription")
    stored = subscription_records.read(db, address)
    if stored is None:
        raise LookupError(f"no subscriber {address}")
    who = stored.subscriber
    doc = document(
        exported_at=now or utcnow(),
        address=who.address,
        status=who.status,
        schedule=who.schedule,
        timezone=who.timezone,
        language=who.language,
        heartbeat=who.heartbeat,
        newsletters=stored.newsletters,
        follows=[(f.query, f.revisions, f.instant) for f in stored.follows],
        received=stored.received,
        learned=stored.learned,
    )
    return Exported(
        doc,
        votes_left_out=stored.votes_total - len(stored.learned.votes),
        library_left_out=stored.library_total - len(stored.learned.library),
    )


def import_subscription(
    db: Database,
    data: bytes,
    *,
    mode: Mode = Mode.REFUSE,
    now: datetime | None = None,
    refuse_address: Callable[[str], str | None] | None = None,
) -> tuple[Subscription, Restored]:
    """Check the document ``data`` whole, then store it in one transaction; the checked document and what
    was stored.

    Raises core.people.subscription_file.DocumentError for a document that cannot be read whole (nothing
    stored)
    and :class:`SubscriptionExists` when the address is a subscriber with other settings and ``mode`` is
    REFUSE (nothing stored). ``refuse_address``: the delivery's own refusal of an address, as for
    ``import follows``. :func:`after_import` has run when it returns.
    """
    wanted = read_document(data, refuse_address)
    restored = subscription_records.restore(db, wanted, mode=mode, now=now or utcnow())
    after_import(db, restored)
    return wanted, restored


def after_import(db: Database, restored: Restored) -> None:
    """What follows an import once its transaction has committed: the one place for work on the imported
    subscriber that must not be part of, or hold up, that transaction.

    The subscriber's model learns from its votes and seeds: when the import changed them
    (:attr:`Restored.learned_changed`) it is retrained here, so recommendations follow the
    imported votes from the next pass on.
    """
    if not restored.learned_changed or restored.subscriber_id is None:
        return
    # Imported here: scikit-learn takes a second to load, and only an import that changed votes needs it.
    from core.taste.training import retrain

    retrain(db, restored.subscriber_id)
