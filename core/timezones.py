"""Reading a timezone people type in a chat: IANA names in any case, bare city names, and suggestions.

``lookup("europe/berlin")`` and ``lookup("Berlin")`` both find ``Europe/Berlin``; ``lookup("Europe/Berln")``
finds nothing but suggests ``Europe/Berlin``. Abbreviations (``PST``, ``CEST``) are never accepted, because
most are ambiguous or lose daylight saving (``IST`` is India, Israel and Ireland); they get suggestions.
Fixed offsets written ``UTC+2`` are accepted as the IANA zone ``Etc/GMT-2`` (whose sign is inverted, as
POSIX wants), with a note. The list of names comes from the system's tz database (``zoneinfo``).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import cache
from pathlib import Path
from zoneinfo import TZPATH, ZoneInfo, ZoneInfoNotFoundError, available_timezones

from core.languages import N_, Phrase

# The areas of the current tz database. Names outside them (US/Eastern, Etc/GMT+3, CET) are accepted when
# typed exactly but never suggested: they are legacy links or fixed offsets.
_AREAS = (
    "Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian",
    "Pacific",
)  # fmt: skip

# Common abbreviations and what people who type them usually mean. Not accepted, only suggested.
_ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "pst": ("America/Los_Angeles",), "pdt": ("America/Los_Angeles",),
    "mst": ("America/Denver", "America/Phoenix"), "mdt": ("America/Denver",),
    "cst": ("America/Chicago", "Asia/Shanghai"), "cdt": ("America/Chicago",),
    "est": ("America/New_York",), "edt": ("America/New_York",),
    "akst": ("America/Anchorage",), "hst": ("Pacific/Honolulu",),
    "gmt": ("Europe/London", "UTC"), "bst": ("Europe/London",), "wet": ("Europe/Lisbon",),
    "cet": ("Europe/Berlin", "Europe/Paris"), "cest": ("Europe/Berlin", "Europe/Paris"),
    "met": ("Europe/Berlin",), "eet": ("Europe/Athens", "Europe/Helsinki"), "eest": ("Europe/Athens",),
    "msk": ("Europe/Moscow",), "ist": ("Asia/Kolkata", "Europe/Dublin", "Asia/Jerusalem"),
    "jst": ("Asia/Tokyo",), "kst": ("Asia/Seoul",), "hkt": ("Asia/Hong_Kong",), "sgt": ("Asia/Singapore",),
    "aest": ("Australia/Sydney", "Australia/Brisbane"), "aedt": ("Australia/Sydney",),
    "acst": ("Australia/Adelaide",), "awst": ("Australia/Perth",), "nzst": ("Pacific/Auckland",),
    "nzdt": ("Pacific/Auckland",), "brt": ("America/Sao_Paulo",), "art": ("America/Argentina/Buenos_Aires",),
    "sast": ("Africa/Johannesburg",), "cat": ("Africa/Maputo",), "eat": ("Africa/Nairobi",),
    "wat": ("Africa/Lagos",), "pkt": ("Asia/Karachi",), "ict": ("Asia/Bangkok",),
}  # fmt: skip
_OFFSET = re.compile(r"^(?:utc|gmt|z)?\s*([+\-−])\s*(\d{1,2})(?::?(\d{2}))?$")
_MAX_TYPED = 80
"""Longer input is not a timezone; compare no more than this many characters (difflib is quadratic)."""


# The notes a lookup may carry (see TimezoneLookup.note).
_ABBREVIATION = N_(
    "{abbreviation} is an abbreviation; write the zone of your city so daylight saving is right"
)
_FIXED_OFFSET = N_(
    "{zone} is {offset} all year, without daylight saving; a city name follows daylight saving"
)


@dataclass(frozen=True, slots=True)
class TimezoneLookup:
    """What a typed timezone resolved to.

    ``zone`` is the IANA name to store, or None. ``suggestions`` are IANA names to offer instead (also set
    beside a ``zone`` when the input was ambiguous). ``note`` says something the user should know, in one
    sentence (a fixed offset has no daylight saving, an abbreviation is ambiguous), or is None; a phrase,
    so that each reader gets it in their language (``str()`` is the English).
    """

    zone: str | None
    suggestions: tuple[str, ...] = ()
    note: Phrase | None = None


@cache
def _links() -> frozenset[str]:
    """Names the tz database keeps only as links to another zone (``Asia/Calcutta``), when it says so.

    Read from ``tzdata.zi`` on the zoneinfo search path; empty when the system has none (then links are
    simply not told apart, which only makes suggestions a little longer).
    """
    for folder in TZPATH:
        path = Path(folder) / "tzdata.zi"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        return frozenset(line.split()[2] for line in text.splitlines() if line.startswith("L "))
    return frozenset()


@cache
def _zones() -> tuple[dict[str, str], dict[str, tuple[str, ...]], tuple[str, ...]]:
    """(folded name -> name for every zone, folded city -> names, names to suggest), built once."""
    every = available_timezones()
    by_fold = {name.casefold(): name for name in every}
    links = _links()
    regional = sorted(n for n in every if "/" in n and n.split("/", 1)[0] in _AREAS)
    cities: dict[str, list[str]] = {}
    for name in regional:
        cities.setdefault(name.rsplit("/", 1)[-1].casefold(), []).append(name)
    # A city with several names (Indianapolis) is found by its real zone when only one is not a link.
    by_city = {
        city: tuple(n for n in names if n not in links) if len([n for n in names if n not in links]) == 1
        else tuple(names)
        for city, names in cities.items()
    }  # fmt: skip
    suggestible = tuple(n for n in regional if n not in links)
    return by_fold, by_city, (*suggestible, "UTC")


def _fold(text: str) -> str:
    """Case- and accent-folded, spaces as underscores as in IANA names (``São Paulo`` -> ``sao_paulo``)."""
    decomposed = unicodedata.normalize("NFKD", text.strip())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return re.sub(r"\s+", "_", plain).casefold()


def lookup(text: str) -> TimezoneLookup:
    """Resolve a typed timezone: an IANA name (any case), a city, ``UTC+2``; else suggest the closest."""
    typed = text.strip()[:_MAX_TYPED]
    folded = _fold(typed)
    by_fold, cities, suggestible = _zones()
    if not folded:
        return TimezoneLookup(None, ("Europe/Berlin", "America/New_York", "UTC"))
    if folded in ("utc", "z", "utc0", "utc+0", "utc-0"):
        return TimezoneLookup("UTC")
    # Before the exact names: EST, MST, HST, CET, GMT ... exist in the database as fixed or legacy zones,
    # but whoever types one almost always means a place, with its daylight saving.
    if folded in _ABBREVIATIONS:
        return TimezoneLookup(
            None,
            _ABBREVIATIONS[folded],
            Phrase(_ABBREVIATION, abbreviation=typed.upper()),
        )
    if folded in by_fold:
        return TimezoneLookup(by_fold[folded])
    if folded in cities:
        found = cities[folded]
        if len(found) == 1:
            return TimezoneLookup(found[0])
        return TimezoneLookup(
            None, found[:3], Phrase(N_("several zones have a city called {city}"), city=typed)
        )
    offset = _OFFSET.match(folded.replace("_", ""))
    if offset:
        return _offset_zone(offset, by_fold)
    return TimezoneLookup(None, closest(folded, cities, suggestible))


def _offset_zone(offset: re.Match[str], by_fold: dict[str, str]) -> TimezoneLookup:
    sign = 1 if offset[1] == "+" else -1  # "-" or the minus sign phones type
    hours, minutes = int(offset[2]), int(offset[3] or 0)
    # IANA's Etc/GMT zones invert the sign (POSIX): UTC+2 is Etc/GMT-2. Only whole hours exist.
    name = "UTC" if hours == 0 else f"Etc/GMT{'-' if sign > 0 else '+'}{hours}"
    if minutes == 0 and name.casefold() in by_fold:
        shown = f"UTC{'+' if sign > 0 else '-'}{hours:02d}:00"
        return TimezoneLookup(
            by_fold[name.casefold()],
            note=Phrase(_FIXED_OFFSET, zone=name, offset=shown),
        )
    return TimezoneLookup(
        None,
        ("Asia/Kolkata", "Asia/Kathmandu", "Australia/Adelaide"),
        Phrase(
            N_("there is no zone for that offset; write the zone of your city, such as {example}"),
            example="Asia/Kolkata",
        ),
    )


def closest(folded: str, cities: dict[str, tuple[str, ...]], names: tuple[str, ...]) -> tuple[str, ...]:
    """Up to three of ``names`` closest to ``folded``: by the whole name, then by the city alone."""
    by_fold = {name.casefold(): name for name in names}
    found: list[str] = [by_fold[n] for n in difflib.get_close_matches(folded, by_fold, n=3, cutoff=0.75)]
    # "Berln" or "europe/berln": compare the last part with the city names too.
    city = folded.rsplit("/", 1)[-1]
    for match in difflib.get_close_matches(city, cities, n=3, cutoff=0.75):
        found.extend(cities[match])
    return tuple(dict.fromkeys(found))[:3]


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone called exactly ``name`` (``Asia/Shanghai``, ``UTC``), for a setting.

    ValueError naming the value when the tz database has no such zone, with the zones a chat's
    :func:`lookup` would have found for it (``asia/shanghai``, ``Shanghai``, ``UTC+8``) as suggestions: a
    setting is read by a program, so it must be the exact name, but the error may say which one was meant.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ValueError: not a relative path (``../x``, empty); OSError: a folder of the database (``Asia``).
        pass
    found = lookup(name)
    meant = tuple(dict.fromkeys(z for z in (found.zone, *found.suggestions) if z))
    hint = f" (did you mean {' or '.join(meant)}?)" if meant else ""
    raise ValueError(
        f"{name!r} is not a timezone of the tz database{hint}; give an IANA name such as Asia/Shanghai, "
        "Europe/Berlin or UTC"
    )


def abbreviation(zone: tzinfo, at: datetime) -> str:
    """What ``zone`` calls itself at the instant ``at``: ``CET`` or ``CEST``, ``UTC``; ``UTC+08:00`` where the
    tz database has no letters for it (it writes ``+08``, ``-03``), ``UTC`` for a zero offset of any name."""
    local = at.astimezone(zone)
    name = local.tzname() or ""
    if name and not name.startswith(("+", "-")):
        return name
    offset = local.utcoffset() or timedelta(0)
    if not offset:
        return "UTC"
    sign = "+" if offset > timedelta(0) else "-"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def day_starts(first: date, count: int, zone: tzinfo) -> list[datetime]:
    """The UTC instants at which ``count`` consecutive calendar days of ``zone`` begin, from ``first``.

    A day of ``zone`` runs from one of these to the next: 24 hours, or 23 and 25 across a daylight-saving
    change. Each is the zone's midnight read with ``fold=0`` (PEP 495): where a change skips midnight
    (clocks going from 00:00 to 01:00), that is the instant of the change, the day's first real moment;
    where midnight happens twice, the first of the two.
    """
    return [
        datetime.combine(first + timedelta(days=offset), time(0, 0), tzinfo=zone).astimezone(UTC)
        for offset in range(count)
    ]


__all__ = ["TimezoneLookup", "abbreviation", "closest", "day_starts", "lookup", "zone_named"]
