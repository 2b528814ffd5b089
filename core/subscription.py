"""Moving one reader's subscription to another PaperTrail: ``export subscription`` (and the manage page's
download) writes the subscription file (core.subscription_file); ``import subscription`` checks it whole
and restores it in one transaction (core.store_subscription).

What an import does with an address the server has already (:class:`Mode`):

* REFUSE, the default: a subscriber with the file's settings, follows and newsletters is accepted (importing
  a file twice changes nothing); any other is refused, nothing stored, the differences named;
* MERGE: the file's schedule, timezone, language (unless the file has none) and heartbeat replace the
  stored ones; its follows are added or get its options, as ``import follows`` does; its newsletters are
  joined; nothing is removed;
* REPLACE: the settings, follows and newsletters become exactly the file's.

An existing subscriber keeps its status whatever the mode: a reader who unsubscribed or paused here is not
re-activated by a file (``papertrail resume`` and the manage page do that), and an active one is not
stopped by one. A new subscriber gets the file's status.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from core.delivery import NEWSLETTER_CHANNEL, normalise_address, split_address
from core.models import utcnow
from core.store import Store
from core.store_subscription import Mode, Restored, SubscriptionExists, SubscriptionRecords
from core.subscription_file import Subscription, document, read_document

__all__ = ["Mode", "Restored", "SubscriptionExists", "export_subscription", "import_subscription"]


def export_subscription(store: Store, address: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The subscription file's document of ``address``, whatever its status.

    Raises ValueError for a malformed address or a newsletter's (its definition is not a subscription) and
    LookupError when there is no such subscriber.
    """
    address = normalise_address(address)
    if split_address(address)[0] == NEWSLETTER_CHANNEL:
        raise ValueError(f"{address} is a newsletter, not a reader's subscription")
    stored = SubscriptionRecords(store).read(address)
    if stored is None:
        raise LookupError(f"no subscriber {address}")
    who = stored.subscriber
    return document(
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
    )


def import_subscription(
    store: Store,
    data: bytes,
    *,
    mode: Mode = Mode.REFUSE,
    now: datetime | None = None,
    refuse_address: Callable[[str], str | None] | None = None,
) -> tuple[Subscription, Restored]:
    """Check the document ``data`` whole, then store it in one transaction; the checked document and what
    was stored.

    Raises core.subscription_file.DocumentError for a document that cannot be read whole (nothing stored)
    and :class:`SubscriptionExists` when the address is a subscriber with other settings and ``mode`` is
    REFUSE (nothing stored). ``refuse_address``: the delivery's own refusal of an address, as for
    ``import follows``.
    """
    wanted = read_document(data, refuse_address)
    return wanted, SubscriptionRecords(store).restore(wanted, mode=mode, now=now or utcnow())
