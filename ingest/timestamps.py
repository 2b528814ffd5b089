"""Timestamps as the sources write them, read into aware UTC datetimes (None when unreadable)."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def _utc(moment: datetime) -> datetime:
    # A value without an offset ("-0000" in RFC 822, none in ISO) means UTC at arXiv.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso_utc(text: str) -> datetime | None:
    """ISO 8601 (``2016-10-21T04:36:53Z``, ``2016-10-09T00:00:00-04:00``) as aware UTC."""
    if not text:
        return None
    try:
        return _utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def rfc822_utc(text: str) -> datetime | None:
    """RFC 822 (``Mon, 14 Apr 2008 21:02:00 GMT``) as aware UTC."""
    if not text:
        return None
    try:
        return _utc(parsedate_to_datetime(text))
    except (TypeError, ValueError):
        return None
