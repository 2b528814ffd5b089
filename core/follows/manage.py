"""Managing follows: add (with options), remove by number or text, and import or export them in bulk
(the follows file of core.follows.file)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from core.channel import normalise_address
from core.db import Database
from core.follows import follow_file_records, match_records, subscriber_records, subscribers
from core.follows.file import BadLine, FollowsFile, check_lines, export_line
from core.follows.follow_file_records import ImportCounts
from core.follows.query import parse
from core.follows.subscribers import SubscriberSettings
from core.models import Follow, Subscriber, SubscriberStatus, utcnow
from core.schedule import parse_schedule, zone

# Who `export follows` writes out: those whose follows are in use (matched, or matched again after
# `papertrail resume`). Unsubscribed readers and unconfirmed sign-ups are not the operator's to move.
EXPORTED_STATUSES = (SubscriberStatus.ACTIVE, SubscriberStatus.PAUSED)


@dataclass(frozen=True, slots=True)
class FollowResult:
    """The outcome of ``follow``: the stored follow and whether it (and its subscriber) were new."""

    subscriber: Subscriber
    follow: Follow
    outcome: str
    """``added``, ``updated`` (same query, new options) or ``unchanged``."""
    subscriber_created: bool
    before: SubscriberSettings | None = None
    """The existing subscriber's settings before ``settings`` changed them; None when nothing changed."""


def follow(
    db: Database,
    address: str,
    text: str,
    *,
    timezone: str = "UTC",
    schedule: str = "daily 08:00",
    revisions: bool = True,
    instant: bool = False,
    language: str | None = None,
    settings: SubscriberSettings | None = None,
) -> FollowResult:
    """Validate and store a follow, creating the subscriber when the address is new.

    ``revisions=False`` follows new papers only; ``instant=True`` sends its matches as soon as they are
    found instead of with the scheduled digest. Following the same query again updates these options.
    ``timezone`` and ``schedule`` are a new subscriber's; ``language`` is stored when the subscriber has
    none yet (a chat platform's language, or a new subscriber's); ``settings`` are set on an existing
    subscriber (the command line's ``--schedule``, ``--timezone``, ``--language``, checked by the caller).
    The subscriber, its follow and its settings are one unit of work: all are stored, or none.

    Raises ValueError (bad address, timezone or schedule) or QueryError (bad query) with a hint.
    """
    address = normalise_address(address)
    query = parse(text)
    zone(timezone)
    parse_schedule(schedule)
    # One step: the subscriber and its first follow are stored together, so that concurrent first
    # commands of a new chat neither fail on each other nor leave a subscriber without its follow.
    with db.transaction() as tx:
        subscriber, created, stored, outcome = subscriber_records.follow(
            tx,
            address,
            text.strip(),
            query.canonical(),
            timezone=timezone,
            schedule=schedule,
            revisions=revisions,
            instant=instant,
        )
        if language is not None:
            subscriber = subscribers.adopt_language(tx, subscriber.id or 0, language)
        before = None
        if settings is not None and not created and settings.changes(subscriber):
            before = SubscriberSettings(
                subscriber.schedule, subscriber.timezone, subscriber.heartbeat, subscriber.language
            )
            subscriber = subscribers.change_settings(tx, subscriber.id or 0, settings)
    return FollowResult(subscriber, stored, outcome, created, before)


def unfollow(db: Database, address: str, which: str) -> Follow:
    """Remove a follow by its number in ``follows`` (1-based) or by its query text.

    Raises LookupError naming the subscriber's follows when nothing fits.
    """
    address = normalise_address(address)
    subscriber = subscriber_records.get_subscriber(db, address)
    if subscriber is None or subscriber.id is None:
        raise LookupError(f"{address} has no follows; add one with: papertrail follow {address} QUERY")
    follows = subscriber_records.follows_of(db, subscriber.id)
    target: Follow | None = None
    if which.strip().isdigit():
        number = int(which)
        if not 1 <= number <= len(follows):
            raise LookupError(
                f"{address} has 1 follow; pick number 1"
                if len(follows) == 1
                else f"{address} has {len(follows)} follows; pick a number from 1 to {len(follows)}"
            )
        target = follows[number - 1]
    else:
        canonical = parse(which).canonical()
        target = next((f for f in follows if f.canonical == canonical), None)
        if target is None:
            listing = "; ".join(f"{i}. {f.query}" for i, f in enumerate(follows, 1)) or "none"
            raise LookupError(f"{address} does not follow {which!r}; its follows are: {listing}")
    assert target.id is not None
    subscriber_records.remove_follow(db, target.id)
    return target


@dataclass(frozen=True, slots=True)
class ImportReport:
    """The outcome of ``import_follows``: the checked file, and what was stored (None: nothing)."""

    checked: FollowsFile
    counts: ImportCounts | None

    @property
    def bad(self) -> list[BadLine]:
        """The refused lines, in file order."""
        return self.checked.bad


def import_follows(
    db: Database,
    lines: Iterable[bytes],
    *,
    skip_invalid: bool,
    timezone: str,
    schedule: str,
    now: datetime | None = None,
    refuse_address: Callable[[str], str | None] | None = None,
) -> ImportReport:
    """Check every line of a follows file, then store the follows in one transaction.

    With a bad line nothing is stored unless ``skip_invalid``, when the good lines are. ``timezone`` and
    ``schedule`` are for subscribers created without them (the settings' defaults, as for ``follow``).
    ``refuse_address``: the delivery's own refusal of an address (core.follows.file.check_lines).
    Importing the same file again changes nothing.
    """
    checked = check_lines(lines, refuse_address)
    if (checked.bad and not skip_invalid) or not checked.follows:
        return ImportReport(checked, None)
    counts = follow_file_records.import_follows(
        db,
        checked.subscribers.values(),
        checked.follows,
        timezone=timezone,
        schedule=schedule,
        now=now or utcnow(),
    )
    return ImportReport(checked, counts)


def export_follows(db: Database, address: str | None, *, timezone: str, schedule: str) -> Iterator[str]:
    """The follows file (lines without newlines) of every active and paused subscriber, or of ``address``.

    Ordered by address, then by follow number; options equal to the defaults ``timezone`` and
    ``schedule`` are left out, so importing the lines into an empty store gives the same follows.
    Raises ValueError for a malformed address and LookupError for one that has nothing to export.
    """
    if address is not None:
        address = normalise_address(address)
        subscriber = subscriber_records.get_subscriber(db, address)
        if subscriber is None:
            raise LookupError(f"no subscriber {address}")
        if subscriber.status not in EXPORTED_STATUSES:
            raise LookupError(
                f"{address} is {subscriber.status}: only active and paused subscribers are exported"
            )
    # Checked above, read lazily below: a generator body would raise the LookupError only when iterated.
    rows = follow_file_records.export_rows(db, EXPORTED_STATUSES, address)
    return (export_line(row, default_schedule=schedule, default_timezone=timezone) for row in rows)


def fan_out(db: Database, *, now: datetime | None = None) -> int:
    """Fan the waiting query matches out to their followers' Match rows now rather than at the next digest
    planning, so that a one-shot command leaves the ledger complete, or before a planner reads it; how
    many rows were written."""
    return match_records.expand_matches(db, now=now)
