"""Source health that knows arXiv's calendar: ok, quiet, stale or failing.

arXiv announces new listings Sunday to Thursday at 20:00 America/New_York; the RSS channel of the mailing
announced on Wednesday evening is dated Thursday (``pubDate: Thu, ... 00:00:00 -0500``). There is no mailing
on Friday or Saturday evenings, nor on arXiv's holidays. So at any moment the calendar says which mailing a
healthy feed serves, and a feed that still serves an older one is *stale* — never "no new papers".

States:
- ``failing``: the last check failed (its error is shown);
- ``stale``: the last good check saw an older mailing than the calendar expects, once a grace period after
  the announcement has passed (mirrors and caches take a while);
- ``quiet``: healthy, and no announcement is expected now (weekend, holiday);
- ``ok``: healthy and current;
- ``unknown``: never checked;
- ``checking``: a check is in flight; the verdict of the last finished check stays the source's standing
  (``Verdict.settled``) and is said in the reason (core.papers.status.judge).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

ARXIV_TZ = ZoneInfo("America/New_York")
ANNOUNCE_AT = time(20, 0)
# Evenings with an announcement: Sunday (6) to Thursday (3).
ANNOUNCE_WEEKDAYS = frozenset({6, 0, 1, 2, 3})


class Health(StrEnum):
    """A source's state on the status page."""

    OK = "ok"
    QUIET = "quiet"
    STALE = "stale"
    FAILING = "failing"
    UNKNOWN = "unknown"
    CHECKING = "checking"


def mailing_date(announced_evening: date) -> date:
    """The date a mailing carries: the day after the evening it is announced."""
    return announced_evening + timedelta(days=1)


def latest_mailing(now: datetime, holidays: Collection[date] = ()) -> tuple[date, datetime]:
    """The newest mailing announced at or before ``now``: (its date, its announcement time in UTC).

    ``holidays`` are mailing dates on which arXiv publishes nothing.
    """
    local = now.astimezone(ARXIV_TZ)
    for back in range(0, 30):
        evening = (local - timedelta(days=back)).date()
        announced = datetime.combine(evening, ANNOUNCE_AT, tzinfo=ARXIV_TZ)
        if announced > local or evening.weekday() not in ANNOUNCE_WEEKDAYS:
            continue
        if mailing_date(evening) in holidays:
            continue
        return mailing_date(evening), announced.astimezone(UTC)
    raise ValueError("no arXiv mailing in the last 30 days: check PAPERTRAIL_ARXIV_HOLIDAYS")


def announcement_expected_today(now: datetime, holidays: Collection[date] = ()) -> bool:
    """Whether arXiv announces a mailing this evening (America/New_York)."""
    evening = now.astimezone(ARXIV_TZ).date()
    return evening.weekday() in ANNOUNCE_WEEKDAYS and mailing_date(evening) not in holidays


def recent_announcement(
    now: datetime, holidays: Collection[date] = (), within: timedelta = timedelta(hours=24)
) -> datetime | None:
    """When arXiv announced its newest mailing (UTC), if that was within ``within`` before ``now``; else None.

    This is what makes ``now`` an announcement day for a reader anywhere: the latest mailing came out in
    the past day (a reader in Berlin at 08:00 on Saturday has Thursday evening's New York announcement,
    one in New York at 18:00 on a Friday has none). Heartbeats go out only then (core.delivery.digests).
    """
    _, announced = latest_mailing(now, holidays)
    return announced if now - announced < within else None


@dataclass(frozen=True, slots=True)
class SourceHealth:
    """The latest facts about one source for the status page."""

    source: str
    last_check: datetime | None
    last_state: str
    last_new_version: datetime | None
    last_error: str | None
    last_note: str | None
    last_success: datetime | None = None
    # The cursor of the newest good run that had one (for arXiv RSS: the mailing's pubDate).
    served_cursor: str | None = None
    # When the check in flight started, if the newest run is still running; the fields above are then
    # those of the newest finished run (a check in flight is neither a success nor a failure yet).
    checking_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """A source's health: the state, why, and how far behind the calendar it is."""

    state: Health
    reason: str
    lag: timedelta | None = None
    # While ``state`` is CHECKING: the state of the last finished check's verdict.
    settled: Health | None = None

    @property
    def standing(self) -> Health:
        """The source's health as the last finished check left it: what banners, alerts and metrics
        count (a check in flight neither fixes nor breaks a source)."""
        return self.settled or self.state


def arxiv_feed_health(
    *,
    now: datetime,
    last_check_failed: bool,
    last_error: str | None,
    served_mailing: date | None,
    holidays: Collection[date] = (),
    grace: timedelta = timedelta(hours=4),
) -> Verdict:
    """Judge an arXiv listing source from its last check and the mailing date it last served.

    ``served_mailing`` is the date of the newest mailing a good check saw (the RSS channel's pubDate),
    None when no good check has happened yet.
    """
    if last_check_failed:
        return Verdict(Health.FAILING, last_error or "the last check failed")
    if served_mailing is None:
        return Verdict(Health.UNKNOWN, "never checked successfully")
    # Judge against the mailing that should be visible by now: one announced at least `grace` ago.
    expected, announced = latest_mailing(now - grace, holidays)
    if served_mailing < expected:
        return Verdict(
            Health.STALE,
            f"serves the mailing of {served_mailing.isoformat()}; arXiv announced the one of "
            f"{expected.isoformat()} at {announced:%Y-%m-%d %H:%M} UTC",
            lag=now - (announced + grace),
        )
    if not announcement_expected_today(now, holidays):
        return Verdict(Health.QUIET, "no arXiv announcement today (weekend or holiday)")
    return Verdict(Health.OK, f"current: mailing of {served_mailing.isoformat()}")
