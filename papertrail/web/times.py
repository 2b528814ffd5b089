"""Times on the web pages, in the operator's display zone (``PAPERTRAIL_DISPLAY_TIMEZONE``) and named.

Every instant a page shows is converted to the display zone and followed by the zone's name in the page's
language: a friendly name for a few common zones (``Beijing time`` / ``北京时间`` for Asia/Shanghai), else
what the tz database calls the zone at that instant (``CET`` in winter, ``CEST`` in summer, ``UTC``), or
``UTC+08:00`` where it has no letters for it. The default zone, UTC, shows ``2026-11-09 10:53 UTC`` as the
pages always did. Subscribers' digests keep their own zones (core.delivery.render); this is the pages' only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from core.languages import N_, Translator
from core.timezones import abbreviation

# Zones whose letters are ambiguous or missing (Asia/Shanghai and Asia/Taipei both say CST, Singapore
# says +08), named as their readers name them. Keyed by the name the operator wrote, so the tz
# database's old links to the same zone (PRC, Asia/Chongqing) are listed too. A short list by choice:
# every other zone is named by its abbreviation, which is never wrong.
_BEIJING = N_("Beijing time")
FRIENDLY_NAMES = {
    "Asia/Shanghai": _BEIJING,
    "Asia/Chongqing": _BEIJING,
    "Asia/Chungking": _BEIJING,
    "Asia/Harbin": _BEIJING,
    "PRC": _BEIJING,
    "Asia/Hong_Kong": N_("Hong Kong time"),
    "Hongkong": N_("Hong Kong time"),
    "Asia/Taipei": N_("Taipei time"),
    "ROC": N_("Taipei time"),
    "Asia/Singapore": N_("Singapore time"),
    "Singapore": N_("Singapore time"),
    "Asia/Tokyo": N_("Japan time"),
    "Japan": N_("Japan time"),
}


@dataclass(frozen=True, slots=True)
class DisplayZone:
    """The display zone as one page's language shows it: local times and the zone's name."""

    zone: ZoneInfo
    t: Translator

    def local(self, value: datetime) -> datetime:
        """``value`` in the display zone (a naive value is taken as UTC, as the store means it)."""
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.astimezone(self.zone)

    def name_at(self, value: datetime) -> str:
        """The zone's name at the instant ``value``: friendly, else its abbreviation then (CET, CEST)."""
        friendly = FRIENDLY_NAMES.get(self.zone.key)
        return self.t.gettext(friendly) if friendly else abbreviation(self.zone, value)

    def clock(self, value: datetime) -> str:
        """``2026-11-09 10:53``: the local date and time, without the zone's name."""
        return f"{self.local(value):%Y-%m-%d %H:%M}"

    def when(self, value: datetime | None) -> str:
        """``2026-11-09 10:53 Beijing time``, or a dash when unknown."""
        if value is None:
            return "—"
        return f"{self.clock(value)} {self.name_at(value)}"

    def span_name(self, start: datetime, end: datetime) -> str:
        """The zone's name for a period: one name, or ``CEST → CET`` when it changed in between."""
        first, last = self.name_at(start), self.name_at(end)
        return first if first == last else f"{first} → {last}"

    def day_name(self, at: datetime) -> str:
        """The zone's name for calendar days around ``at`` (the chart's): a friendly name, else the
        abbreviation of a zone without daylight saving (``UTC``, ``IST``, ``UTC+08:00``), else the IANA
        name (``Europe/Berlin``), since its days are neither CET nor CEST but both."""
        friendly = FRIENDLY_NAMES.get(self.zone.key)
        if friendly:
            return self.t.gettext(friendly)
        local = self.local(at)
        winter, summer = (datetime(local.year, month, 1, tzinfo=UTC) for month in (1, 7))
        if abbreviation(self.zone, winter) == abbreviation(self.zone, summer):
            return abbreviation(self.zone, at)
        return self.zone.key


def display_zone(key: str, t: Translator) -> DisplayZone:
    """The zone called ``key`` (validated by the settings) as ``t``'s language shows it."""
    return DisplayZone(ZoneInfo(key), t)


__all__ = ["FRIENDLY_NAMES", "DisplayZone", "display_zone"]
