"""A digest's scan receipt (core.delivery.receipts) in the reader's language and timezone.

Pure wording, used by the renderer: "Since Mon 08:00 CET: arXiv: 3 announcements, 4512 new versions
scanned; 12 matched your follows." and one line per outage, "arXiv failing from Tue 02:05 to Wed 04:00
CET; papers from that window arrive as it catches up." Times are the reader's local weekday and time
within the week before the digest, ISO dates before that; the zone is named by its abbreviation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.languages import N_, Translator, listing
from core.papers.health import Health
from core.values import Outage, Receipt, SourceScan

# How sources are named in a receipt (proper names: not translated); others by their stored name.
SOURCE_NAMES = {
    "arxiv-rss": "arXiv",
    "arxiv-oai": "arXiv OAI-PMH",
    "arxiv-api": "arXiv API",
    "hf-daily": "Hugging Face",
}
_DAYS = (N_("Mon"), N_("Tue"), N_("Wed"), N_("Thu"), N_("Fri"), N_("Sat"), N_("Sun"))
# Times within this span before the window's end are shown as weekday and time, older ones with the date.
_SAME_WEEK = timedelta(days=6)


@dataclass(frozen=True, slots=True)
class ReceiptText:
    """A receipt in one language: a summary line and one line per outage."""

    summary: str
    warnings: tuple[str, ...] = ()


def source_name(source: str) -> str:
    """How a receipt names a stored source: ``arXiv`` for ``arxiv-rss``; an unknown one as stored."""
    return SOURCE_NAMES.get(source, source)


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def _moment(when: datetime, zone: tzinfo, until: datetime, t: Translator) -> str:
    """``Tue 20:05`` within the week before ``until``; ``2026-11-17 20:05`` before that."""
    local = when.astimezone(zone)
    if until - when <= _SAME_WEEK:
        return t.gettext("{weekday} {time}", weekday=t.gettext(_DAYS[local.weekday()]), time=f"{local:%H:%M}")
    return f"{local:%Y-%m-%d %H:%M}"


def _counts(scan: SourceScan, t: Translator) -> str:
    parts = []
    if scan.announcements is not None:
        parts.append(t.ngettext("{n} announcement", "{n} announcements", scan.announcements))
    parts.append(t.ngettext("{n} new version scanned", "{n} new versions scanned", scan.new_versions))
    return t.gettext("{source}: {counts}", source=source_name(scan.source), counts=listing(t, parts))


def _warning(outage: Outage, zone: tzinfo, until: datetime, t: Translator) -> str:
    name = source_name(outage.source)
    start = _moment(outage.start, zone, until, t)
    zone_name = (outage.end or until).astimezone(zone).tzname() or "UTC"
    failing = outage.state == Health.FAILING
    if outage.end is None:
        message = (
            N_(
                "{source} failing since {start} {zone}, and still failing; papers from that window will "
                "arrive when it recovers."
            )
            if failing
            else N_(
                "{source} behind the announcements since {start} {zone}, and still behind; papers from that "
                "window will arrive when it catches up."
            )
        )
        return t.gettext(message, source=name, start=start, zone=zone_name)
    message = (
        N_("{source} failing from {start} to {end} {zone}; papers from that window arrive as it catches up.")
        if failing
        else N_(
            "{source} behind the announcements from {start} to {end} {zone}; papers from that window "
            "arrive as it catches up."
        )
    )
    end = _moment(outage.end, zone, until, t)
    return t.gettext(message, source=name, start=start, end=end, zone=zone_name)


def word_receipt(receipt: Receipt, t: Translator, *, heartbeat: bool = False) -> ReceiptText:
    """The receipt in ``t``'s language, its times in the reader's timezone.

    A heartbeat's summary is its whole message: "Nothing new matched your follows. Since …: arXiv: 1
    announcement, 1504 new versions scanned."
    """
    zone = _zone(receipt.timezone)
    local_until = receipt.until.astimezone(zone)
    since = t.gettext(
        "{moment} {zone}",
        moment=_moment(receipt.since, zone, receipt.until, t),
        zone=local_until.tzname() or "UTC",
    )
    scanned = (
        t.gettext("; ").join(_counts(scan, t) for scan in receipt.sources)
        if receipt.sources
        else t.gettext("no source was checked")
    )
    if heartbeat:
        summary = t.gettext(
            "Nothing new matched your follows. Since {since}: {scanned}.", since=since, scanned=scanned
        )
    else:
        summary = t.gettext(
            "Since {since}: {scanned}; {matched}.",
            since=since,
            scanned=scanned,
            matched=t.ngettext("{n} matched your follows", "{n} matched your follows", receipt.matched),
        )
    warnings = tuple(_warning(outage, zone, receipt.until, t) for outage in receipt.outages)
    return ReceiptText(summary, warnings)


__all__ = ["SOURCE_NAMES", "ReceiptText", "source_name", "word_receipt"]
