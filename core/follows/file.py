"""The follows file: one JSON object per line, read and checked for ``import follows``, written by ``export``.

A line is ``{"address": ..., "query": ...}`` with the optional keys ``schedule``, ``timezone``,
``language`` (the subscriber's) and ``new_only``, ``instant`` (the follow's). Every line is checked with
the validators ``papertrail follow`` uses before anything is stored, and every bad line is reported with
its number and the reason.

Rules (docs/operations.md says them to operators):

* a follow is (address, canonical query), as for ``papertrail follow``: the same query written twice with
  the same options is a duplicate, with different options a conflict;
* the subscriber options are per address: a line without one has no opinion; a later line giving another
  value than an earlier line of the same address is refused (the first one stands), so a file can never
  mean two things at once;
* blank lines are skipped; a line longer than :data:`MAX_LINE_BYTES` is refused unread, a line nested
  too deeply or with a key given twice is refused as :mod:`core.json_input` says.

Pure: no store, no I/O beyond the lines it is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

from core.channel import channel_of, normalise_address
from core.follows.query import QueryError, parse
from core.json_input import JSONLimitError, JSONReader
from core.languages import check_language, normalize_language
from core.models import Subscriber
from core.schedule import parse_schedule, zone

# A query is at most 1,000 characters and an address 512: 8 KiB leaves room for JSON escapes of both and
# refuses a runaway line (a file without newlines) before it is parsed.
MAX_LINE_BYTES = 8192
# The subscriber.address column's width: a longer address would fail the whole batch in PostgreSQL.
MAX_ADDRESS_CHARS: int = Subscriber.__table__.c.address.type.length  # type: ignore[attr-defined]

_TYPES: dict[str, type] = {
    "address": str,
    "query": str,
    "schedule": str,
    "timezone": str,
    "language": str,
    "new_only": bool,
    "instant": bool,
}
KEYS = tuple(_TYPES)
_JSON_KINDS = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
_SUBSCRIBER_KEYS = ("schedule", "timezone", "language")


@dataclass(frozen=True, slots=True)
class FollowLine:
    """One good line's follow: the normalised address, the query as written and its canonical form."""

    line: int
    address: str
    query: str
    canonical: str
    revisions: bool
    instant: bool


@dataclass(frozen=True, slots=True)
class SubscriberOptions:
    """What the file says about one subscriber; None where no line of the address gives the option."""

    address: str
    schedule: str | None = None
    timezone: str | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that cannot be imported, and why (in English, for the operator)."""

    line: int
    reason: str


@dataclass(slots=True)
class FollowsFile:
    """A checked file: its good follows (in file order), the subscribers they name, and the bad lines."""

    follows: list[FollowLine] = field(default_factory=list)
    subscribers: dict[str, SubscriberOptions] = field(default_factory=dict)
    bad: list[BadLine] = field(default_factory=list)
    lines: int = 0
    """Non-blank lines read."""
    duplicates: int = 0
    """Lines repeating an earlier line's follow with the same options (imported once)."""


class _Refused(Exception):
    """A line's reason for refusal, raised inside the checks of one line."""


class ExportedFollow(NamedTuple):
    """One stored follow with its subscriber's options, as ``export follows`` writes it."""

    address: str
    query: str
    schedule: str
    timezone: str
    language: str | None
    revisions: bool
    instant: bool


def read_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``stream``, each cut after :data:`MAX_LINE_BYTES` + 1 bytes (the rest is skipped).

    A cut line is still longer than the limit, so it is refused; memory stays bounded whatever the file.
    """
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := stream.readline(1 << 16)) and not rest.endswith(b"\n"):
                pass
        yield line


def check_lines(
    lines: Iterable[bytes], refuse_address: Callable[[str], str | None] | None = None
) -> FollowsFile:
    """Check every line (numbered from 1) and gather the good follows and the subscribers' options.

    ``refuse_address`` says why a channel would refuse a well-formed address (a webhook to a private
    host), or None; it is asked once per distinct address (as ``follow`` asks).
    """
    result = FollowsFile()
    checker = _Checker(result, refuse_address)
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        result.lines += 1
        try:
            checker.take(number, raw)
        except _Refused as exc:
            result.bad.append(BadLine(number, str(exc)))
    for address in checker.good:
        known = checker.options[address]
        result.subscribers[address] = SubscriberOptions(
            address, *(known[name][0] if name in known else None for name in _SUBSCRIBER_KEYS)
        )
    return result


class _Checker:
    """The state of one file's check: options seen per address, follows seen, values already checked."""

    def __init__(self, result: FollowsFile, refuse_address: Callable[[str], str | None] | None) -> None:
        self.result = result
        self.refuse_address = refuse_address
        # address -> option -> (value, line that gave it first)
        self.options: dict[str, dict[str, tuple[str, int]]] = {}
        # Addresses with at least one good line, in file order.
        self.good: dict[str, None] = {}
        # (address, canonical) -> (revisions, instant, line)
        self.seen: dict[tuple[str, str], tuple[bool, bool, int]] = {}
        # (key, text as written) -> its checked value or why it is refused. A file repeats addresses (one
        # per follow), queries (shared by many readers) and options, and parsing a query is most of the
        # cost of a line.
        self.checked: dict[tuple[str, str], str | _Refused] = {}

    def take(self, number: int, raw: bytes) -> None:
        """Check one non-blank line and record what it says; raise _Refused saying why it cannot be."""
        if len(raw) > MAX_LINE_BYTES:
            raise _Refused(f"line longer than {MAX_LINE_BYTES:,} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Refused(f"not UTF-8 (byte {exc.start + 1})") from None
        record = _object(text)
        for required in ("address", "query"):
            if required not in record:
                raise _Refused(f"missing key {required!r}")
        address = self.check("address", record["address"])
        query_text = record["query"].strip()
        canonical = self.check("query", query_text)
        given = {name: self.check(name, record[name]) for name in _SUBSCRIBER_KEYS if name in record}
        revisions = not record.get("new_only", False)
        instant = record.get("instant", False)
        # Conflicts last, once the line is known to be good, so only good lines set what later ones meet.
        known = self.options.setdefault(address, {})
        for name, value in given.items():
            if name in known and known[name][0] != value:
                earlier, line = known[name]
                raise _Refused(
                    f"{name} {value!r} conflicts with {earlier!r} on line {line} for the same address"
                )
        key = (address, canonical)
        if key in self.seen:
            seen_revisions, seen_instant, line = self.seen[key]
            if (seen_revisions, seen_instant) != (revisions, instant):
                raise _Refused(f"same follow as line {line} with other new_only/instant options")
            self.result.duplicates += 1
        else:
            self.seen[key] = (revisions, instant, number)
            self.result.follows.append(FollowLine(number, address, query_text, canonical, revisions, instant))
        for name, value in given.items():
            known.setdefault(name, (value, number))
        self.good[address] = None

    def check(self, key: str, text: str) -> str:
        """``text`` of ``key`` checked by its validator (once per distinct text); _Refused if bad."""
        found = self.checked.get((key, text))
        if found is None:
            try:
                found = _CHECKS[key](text)
                if key == "address" and self.refuse_address and (why := self.refuse_address(found)):
                    found = _Refused(f"this address cannot receive digests: {why}")
            except _Refused as exc:
                found = exc
            self.checked[(key, text)] = found
        if isinstance(found, _Refused):
            raise _Refused(str(found))  # a new one: re-raising one object would grow its traceback
        return found


# One reader for every line (it holds its decoder): no key twice, no nesting past the shared limit.
_READER = JSONReader()


def _object(text: str) -> dict[str, Any]:
    try:
        # Stripped: the column of an error in "{... \n" is then on the line, not after its newline.
        record = _READER.loads(text.strip())
    except json.JSONDecodeError as exc:
        raise _Refused(f"not JSON: {exc.msg} at column {exc.colno}") from None
    except JSONLimitError as exc:  # nested too deeply, a key given twice
        raise _Refused(str(exc)) from None
    if not isinstance(record, dict):
        raise _Refused(f"not a JSON object but {_JSON_KINDS.get(type(record), 'a number')}")
    unknown = sorted(set(record) - set(_TYPES))
    if unknown:
        raise _Refused(f"unknown key {unknown[0]!r}; the keys are: {', '.join(KEYS)}")
    for key, value in record.items():
        wanted = _TYPES[key]
        if type(value) is not wanted:  # not isinstance: JSON true is no string, 1 is no boolean
            kind = "true or false" if wanted is bool else "a string"
            raise _Refused(f"{key!r} must be {kind}, not {json.dumps(value)[:40]}")
    return record


def _address(text: str) -> str:
    if len(text) > MAX_ADDRESS_CHARS:
        raise _Refused(f"address longer than {MAX_ADDRESS_CHARS} characters")
    try:
        address = normalise_address(text)
    except ValueError as exc:
        raise _Refused(f"invalid address: {exc}") from None
    if not channel_of(address).delivers:
        # A newsletter's hidden subscriber belongs to its definition, not to a list of follows.
        raise _Refused("newsletter addresses are defined with `papertrail newsletter create`")
    return address


def _canonical(text: str) -> str:
    try:
        return parse(text).canonical()
    except QueryError as exc:
        raise _Refused(f"invalid query: {exc}") from None


def _schedule(text: str) -> str:
    try:
        # The normal spelling, as `papertrail schedule` stores it.
        return parse_schedule(text).text
    except ValueError as exc:
        raise _Refused(f"invalid schedule: {exc}") from None


def _timezone(text: str) -> str:
    try:
        return zone(text.strip()).key
    except ValueError as exc:
        raise _Refused(f"invalid timezone: {exc}") from None


def _language(text: str) -> str:
    # As `papertrail follow --language`: en or zh, and codes such as zh-CN read as zh.
    try:
        return check_language(normalize_language(text) or text)
    except ValueError as exc:
        raise _Refused(f"invalid language: {exc}") from None


_CHECKS: dict[str, Callable[[str], str]] = {
    "address": _address,
    "query": _canonical,
    "schedule": _schedule,
    "timezone": _timezone,
    "language": _language,
}


def check_value(key: str, text: str) -> str:
    """``text`` of ``key`` (address, query, schedule, timezone or language) checked as on a line: the
    normal spelling (the canonical form for a query); ValueError with the line's reason otherwise.

    ``import subscription`` checks a subscription's own options with it, so both files refuse alike.
    """
    try:
        return _CHECKS[key](text)
    except _Refused as exc:
        raise ValueError(str(exc)) from None


def export_line(row: ExportedFollow, *, default_schedule: str, default_timezone: str) -> str:
    """One line of the follows file for ``row``: options only where they differ from the defaults.

    Subscriber options are repeated on each line of the address, so every line stands alone (a file cut
    or sorted differently still means the same) and the conflict rule never fires on an export.
    """
    record: dict[str, Any] = {"address": row.address, "query": row.query}
    if row.schedule != default_schedule:
        record["schedule"] = row.schedule
    if row.timezone != default_timezone:
        record["timezone"] = row.timezone
    if row.language is not None:
        record["language"] = row.language
    if not row.revisions:
        record["new_only"] = True
    if row.instant:
        record["instant"] = True
    return json.dumps(record, ensure_ascii=False)
