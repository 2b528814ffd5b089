"""The subscription file: one reader's whole subscription as one JSON document, written by ``export
subscription`` (and the manage page's download) and read, strictly, by ``import subscription``.

A document of format ``papertrail-subscription``, version 2::

    {"format": "papertrail-subscription", "version": 2, "exported_at": "2026-12-01T08:00:00Z",
     "address": "email:ada@example.org", "status": "active", "schedule": "daily 08:00",
     "timezone": "Europe/Berlin", "language": "zh", "heartbeat": false, "recommend": 5,
     "newsletters": ["ml-weekly"],
     "follows": [{"query": "cat:cs.DC", "new_only": false, "instant": false}],
     "received": [{"arxiv_id": "2611.08864", "version": 2, "title": "...",
                   "sent_at": "2026-11-30T07:00:02Z", "digest": 17}],
     "votes": [{"arxiv_id": "2611.08864", "version": 2, "value": 1, "voted_at": "2026-11-30T09:12:00Z"}],
     "library": [{"key": "2306.03564", "arxiv_id": "2306.03564", "version": 2, "title": "...",
                  "abstract": "..."},
                 {"key": "doi:10.1103/physrevb.108.125437", "arxiv_id": null, "version": null,
                  "title": "...", "abstract": "..."}]}

Every key is required and no other key is accepted: a document this version cannot read whole is refused
with the key named, never read in part. A follow is a line of the follows file (core.follows.file) without
the subscriber's keys, checked by the same code, so a query is refused or normalised exactly as ``import
follows`` does. ``received`` is the ledger: the papers sent to the reader in delivered digests, with the
digest's time and its number on the exporting server.

Version 2 adds the learned follows: ``recommend`` (null: off, else recommendations per digest,
1 to :data:`MAX_RECOMMEND`), ``votes`` (👍 ``1`` / 👎 ``-1`` per paper version, oldest first, at most
:data:`MAX_VOTES`) and ``library`` (the seeds of imported reference libraries, in the order they were
added, at most :data:`MAX_LIBRARY`): a seed that named a stored paper has its arXiv id and version, and
that version's title and abstract so that a server without the paper can still learn from its text; a
seed known only by its text has null for both. Version 1 (no such keys) is still read: its
:attr:`Subscription.learned` is None, and an import leaves the votes, seeds and ``recommend`` as they are.

Pure: no store, no I/O beyond the bytes it is given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from core.channel import NEWSLETTER_NAME
from core.follows.file import FollowLine, check_lines, check_value
from core.json_input import JSONLimitError, JSONReader, RepeatedKey
from core.models import SubscriberStatus
from core.values import ARXIV_ID_PATTERN

FORMAT = "papertrail-subscription"
VERSION = 2
"""The version an export writes; every version from 1 up to it is read."""
# A reader with ten years of daily digests of 50 papers has about 180,000 received papers, some 35 MB of
# JSON: the limit leaves room for that and refuses a runaway file before it is parsed whole.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
# Recommendations per digest a reader can ask for (`recommend on N`), votes and library seeds per document.
# The model trains on the newest 100 likes, 100 dislikes and 100 seeds (core.taste.model.MAX_POSITIVES,
# MAX_NEGATIVES), so an export keeps everything a model uses, with room to spare; a library file holds at
# most 5,000 entries (core.taste.library_file.MAX_ENTRIES). An export of a subscriber with more writes the
# newest and says how many it left out (:class:`core.people.subscription.Exported`).
MAX_RECOMMEND = 20
MAX_VOTES = 10_000
MAX_LIBRARY = 5_000
# Entries no real subscription reaches, checked before any entry is (a list past its limit is refused by
# its count alone): 27 years of daily 50-paper digests received; follows and newsletters far past what a
# reader manages by hand.
MAX_RECEIVED = 500_000
MAX_FOLLOWS = 100_000
MAX_NEWSLETTERS = 1_000
# The width of library_seed.key.
SEED_KEY_CHARS = 300
# The keys of each version, in the order an export writes them.
KEYS_V1 = (
    "format",
    "version",
    "exported_at",
    "address",
    "status",
    "schedule",
    "timezone",
    "language",
    "heartbeat",
    "newsletters",
    "follows",
    "received",
)
KEYS = (*KEYS_V1[:9], "recommend", *KEYS_V1[9:], "votes", "library")
KEYS_OF = {1: KEYS_V1, 2: KEYS}
FOLLOW_KEYS = ("query", "new_only", "instant")
RECEIVED_KEYS = ("arxiv_id", "version", "title", "sent_at", "digest")
VOTE_KEYS = ("arxiv_id", "version", "value", "voted_at")
LIBRARY_KEYS = ("key", "arxiv_id", "version", "title", "abstract")
STATUSES = tuple(status.value for status in SubscriberStatus)
# Where a document's own problem is (not one key): its bytes, its JSON, its top level.
WHOLE = "document"

_FOLLOWS_FILE = "a follows file, one JSON object per line, is imported with `papertrail import follows`"
_ARXIV_ID = re.compile(ARXIV_ID_PATTERN)
# "line N" in a follows-file reason is the follows list's entry N-1 here.
_LINE = re.compile(r"\bline (\d+)\b")


class DocumentError(ValueError):
    """A document that cannot be imported: the key it is about (``follows[2].query``) and why."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Received:
    """One paper sent to the reader: the version, its title, when and in which digest (the exporting
    server's number; digests of one export with the same number went out as one message)."""

    arxiv_id: str
    version: int
    title: str
    sent_at: datetime
    digest: int


@dataclass(frozen=True, slots=True)
class VoteLine:
    """One vote of the reader: 1 (👍) or -1 (👎) on one version, and when it was cast."""

    arxiv_id: str
    version: int
    value: int
    voted_at: datetime


@dataclass(frozen=True, slots=True)
class LibraryLine:
    """One library seed: its key (the arXiv id, ``doi:…`` or ``title:…``), the stored version it named
    (both None for a seed known only by its text), and the text."""

    key: str
    arxiv_id: str | None
    version: int | None
    title: str
    abstract: str


@dataclass(frozen=True, slots=True)
class Learned:
    """The learned follows of a version-2 document: recommendations per digest (None: off), the votes
    (oldest first) and the library seeds."""

    recommend: int | None
    votes: tuple[VoteLine, ...]
    library: tuple[LibraryLine, ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    """A checked document: every value in the spelling the store keeps (a schedule's normal form, a
    follow's canonical query), ready to be stored."""

    exported_at: datetime
    address: str
    status: str
    schedule: str
    timezone: str
    language: str | None
    heartbeat: bool
    newsletters: tuple[str, ...]
    follows: tuple[FollowLine, ...]
    received: tuple[Received, ...]
    version: int
    learned: Learned | None
    """None for a version-1 document, which has no votes, library or ``recommend``: an import leaves them."""


def iso(value: datetime) -> str:
    """``value`` in UTC as ISO 8601 with a ``Z``: the spelling of every time in the document."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def document(
    *,
    exported_at: datetime,
    address: str,
    status: str,
    schedule: str,
    timezone: str,
    language: str | None,
    heartbeat: bool,
    newsletters: Sequence[str],
    follows: Sequence[tuple[str, bool, bool]],
    received: Sequence[Received],
    learned: Learned,
) -> dict[str, Any]:
    """The document of one subscription. ``follows`` are (query as written, revisions, instant), in the
    reader's order; ``received`` in the order the papers were sent; ``learned`` its votes (oldest first),
    library seeds and ``recommend``."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": iso(exported_at),
        "address": address,
        "status": status,
        "schedule": schedule,
        "timezone": timezone,
        "language": language,
        "heartbeat": heartbeat,
        "recommend": learned.recommend,
        "newsletters": list(newsletters),
        "follows": [
            {"query": query, "new_only": not revisions, "instant": instant}
            for query, revisions, instant in follows
        ],
        "received": [
            {
                "arxiv_id": item.arxiv_id,
                "version": item.version,
                "title": item.title,
                "sent_at": iso(item.sent_at),
                "digest": item.digest,
            }
            for item in received
        ],
        "votes": [
            {"arxiv_id": v.arxiv_id, "version": v.version, "value": v.value, "voted_at": iso(v.voted_at)}
            for v in learned.votes
        ],
        "library": [
            {
                "key": seed.key,
                "arxiv_id": seed.arxiv_id,
                "version": seed.version,
                "title": seed.title,
                "abstract": seed.abstract,
            }
            for seed in learned.library
        ],
    }


def dumps(doc: dict[str, Any]) -> str:
    """The document as the file holds it: UTF-8 JSON, indented, ending with a newline."""
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def read_document(data: bytes, refuse_address: Callable[[str], str | None] | None = None) -> Subscription:
    """Check a whole document and return it; raise :class:`DocumentError` naming the first bad key.

    ``refuse_address`` says why delivery would refuse a well-formed address (a webhook to a private host),
    or None, as for ``import follows``.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DocumentError(
            WHOLE, f"larger than {MAX_DOCUMENT_BYTES:,} bytes; this is not a subscription file"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(WHOLE, f"not UTF-8 (byte {exc.start + 1})") from None
    try:
        record = _READER.loads(text)
    except json.JSONDecodeError as exc:
        # A follows file is JSON Lines: its second line is the "extra data" after a first document.
        hint = f"; {_FOLLOWS_FILE}" if exc.msg == "Extra data" else ""
        raise DocumentError(
            WHOLE, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}{hint}"
        ) from None
    except RepeatedKey as exc:  # JSON keeps the last value silently: a hand edit gone wrong
        raise DocumentError(WHOLE, str(exc)) from None
    except JSONLimitError as exc:  # nested too deeply, an object with more keys than any of the format
        raise DocumentError(WHOLE, f"{exc}; this is not a subscription file") from None
    if not isinstance(record, dict):
        raise DocumentError(WHOLE, f"not a JSON object but {_kind(record)}")
    version = _check_format(record)
    keys = KEYS_OF[version]
    _check_keys(record, keys, WHOLE, f"the keys of version {version} are: {', '.join(keys)}")
    _check_sizes(record)
    address = _string(record, "address")
    try:
        address = check_value("address", address)
    except ValueError as exc:
        raise DocumentError("address", str(exc)) from None
    if refuse_address is not None and (why := refuse_address(address)):
        raise DocumentError("address", f"this address cannot receive digests here: {why}")
    status = _string(record, "status")
    if status not in STATUSES:
        raise DocumentError("status", f"{status!r} is not one of: {', '.join(STATUSES)}")
    language = record["language"]
    if language is not None:
        language = _option(record, "language")
    heartbeat = record["heartbeat"]
    if type(heartbeat) is not bool:
        raise DocumentError("heartbeat", f"must be true or false, not {_shown(heartbeat)}")
    return Subscription(
        exported_at=_time(record["exported_at"], "exported_at"),
        address=address,
        status=status,
        schedule=_option(record, "schedule"),
        timezone=_option(record, "timezone"),
        language=language,
        heartbeat=heartbeat,
        newsletters=_newsletters(record["newsletters"]),
        follows=_follows(address, record["follows"]),
        received=_received(record["received"]),
        version=version,
        learned=_learned(record) if version >= 2 else None,
    )


# Every object of a document has at most 13 keys (the top level of version 2); a few more leave room
# for the message that names an unknown key. An object with more is no subscription: refused as soon as it
# is read, before its keys are checked.
MAX_OBJECT_KEYS = 32
_READER = JSONReader(max_keys=MAX_OBJECT_KEYS)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), "a value")


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)[:40]


def _check_format(record: dict[str, Any]) -> int:
    """The format and version first: another kind of file is named as such, not by its first odd key.
    Returns the version, one this PaperTrail reads."""
    if record.get("format") != FORMAT:
        given = f"is {_shown(record['format'])}" if "format" in record else "is missing"
        raise DocumentError(
            "format",
            f"{given}, not {FORMAT!r}: this is not a PaperTrail subscription file ({_FOLLOWS_FILE})",
        )
    version = record.get("version")
    if type(version) is not int:
        given = _shown(version) if "version" in record else "missing"
        raise DocumentError("version", f"must be a whole number such as {VERSION}, not {given}")
    if version > VERSION:
        raise DocumentError(
            "version",
            f"{version} is newer than {VERSION}, the newest version this PaperTrail reads; upgrade "
            "PaperTrail here to read it",
        )
    if version not in KEYS_OF:
        raise DocumentError(
            "version", f"{version} is no version of this format (1 to {VERSION}); export it again"
        )
    return version


# The most entries each list of a document holds, and what its entries are called in a refusal.
_SIZES = {
    "newsletters": (MAX_NEWSLETTERS, "newsletters"),
    "follows": (MAX_FOLLOWS, "follows"),
    "received": (MAX_RECEIVED, "received papers"),
    "votes": (MAX_VOTES, "votes"),
    "library": (MAX_LIBRARY, "entries"),
}


def _check_sizes(record: dict[str, Any]) -> None:
    """Refuse a list longer than any subscription holds by its length alone, before any entry is checked."""
    for key, (limit, what) in _SIZES.items():
        value = record.get(key)
        if isinstance(value, list) and len(value) > limit:
            note = " (an export writes the newest)" if key in ("votes", "library") else ""
            raise DocumentError(key, f"{len(value):,} {what}; a file holds at most {limit:,}{note}")


def _check_keys(record: dict[str, Any], keys: Sequence[str], where: str, listing: str) -> None:
    unknown = sorted(set(record) - set(keys))
    if unknown:
        raise DocumentError(
            f"{where}.{unknown[0]}" if where != WHOLE else unknown[0], f"unknown key; {listing}"
        )
    for key in keys:
        if key not in record:
            raise DocumentError(f"{where}.{key}" if where != WHOLE else key, f"missing; {listing}")


def _string(record: dict[str, Any], key: str, where: str | None = None) -> str:
    value = record[key]
    if not isinstance(value, str):
        raise DocumentError(where or key, f"must be a string, not {_shown(value)}")
    return value


def _option(record: dict[str, Any], key: str) -> str:
    """A subscriber option (schedule, timezone, language) checked as the follows file checks it."""
    try:
        return check_value(key, _string(record, key))
    except ValueError as exc:
        raise DocumentError(key, str(exc)) from None


def _time(value: object, where: str) -> datetime:
    if not isinstance(value, str):
        raise DocumentError(where, f"must be a time as a string, not {_shown(value)}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise DocumentError(
            where, f"{value[:40]!r} is not an ISO 8601 time with its offset, such as 2026-12-01T08:00:00Z"
        )
    return parsed.astimezone(UTC)


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise DocumentError(where, f"must be an array, not {_kind(value)}")
    return value


def _newsletters(value: object) -> tuple[str, ...]:
    names: dict[str, int] = {}
    for index, name in enumerate(_list(value, "newsletters")):
        where = f"newsletters[{index}]"
        if not isinstance(name, str):
            raise DocumentError(where, f"must be a newsletter's name as a string, not {_shown(name)}")
        if not NEWSLETTER_NAME.match(name):
            raise DocumentError(
                where, f"{name[:70]!r} is not a newsletter name (lowercase letters, digits and dashes)"
            )
        if name in names:
            raise DocumentError(where, f"{name!r} is listed twice (also newsletters[{names[name]}])")
        names[name] = index
    return tuple(names)


def _follows(address: str, value: object) -> tuple[FollowLine, ...]:
    """The follows checked as follows-file lines of ``address``: the same parser, canonical forms and
    duplicate rules as ``import follows``."""
    lines: list[bytes] = []
    for index, item in enumerate(_list(value, "follows")):
        where = f"follows[{index}]"
        if not isinstance(item, dict):
            raise DocumentError(where, f"must be an object, not {_kind(item)}")
        unknown = sorted(set(item) - set(FOLLOW_KEYS))
        if unknown:
            raise DocumentError(
                f"{where}.{unknown[0]}",
                f"unknown key; a follow has {', '.join(FOLLOW_KEYS)} (the subscriber's options are the "
                "document's own keys)",
            )
        lines.append(json.dumps({"address": address, **item}, ensure_ascii=False).encode())
    checked = check_lines(lines)
    if checked.bad:
        bad = checked.bad[0]
        reason = _LINE.sub(lambda m: f"follows[{int(m[1]) - 1}]", bad.reason)
        raise DocumentError(f"follows[{bad.line - 1}]", reason)
    return tuple(checked.follows)


def _received(value: object) -> tuple[Received, ...]:
    items: list[Received] = []
    seen: dict[tuple[str, int], int] = {}
    for index, item in enumerate(_list(value, "received")):
        where = f"received[{index}]"
        if not isinstance(item, dict):
            raise DocumentError(where, f"must be an object, not {_kind(item)}")
        _check_keys(item, RECEIVED_KEYS, where, f"a received paper has {', '.join(RECEIVED_KEYS)}")
        arxiv_id, number = _arxiv_id(item, where), _version(item, where)
        digest = item["digest"]
        if type(digest) is not int or digest < 1:
            raise DocumentError(f"{where}.digest", f"must be a digest number from 1, not {_shown(digest)}")
        title = _string(item, "title", f"{where}.title")
        if (arxiv_id, number) in seen:
            raise DocumentError(
                where, f"{arxiv_id}v{number} is listed twice (also received[{seen[(arxiv_id, number)]}])"
            )
        seen[(arxiv_id, number)] = index
        items.append(Received(arxiv_id, number, title, _time(item["sent_at"], f"{where}.sent_at"), digest))
    return tuple(items)


def _arxiv_id(item: dict[str, Any], where: str) -> str:
    arxiv_id = _string(item, "arxiv_id", f"{where}.arxiv_id")
    if not _ARXIV_ID.fullmatch(arxiv_id):
        raise DocumentError(
            f"{where}.arxiv_id", f"{arxiv_id[:40]!r} is not an arXiv id without version, such as 2611.08864"
        )
    return arxiv_id


def _version(item: dict[str, Any], where: str) -> int:
    number = item["version"]
    if type(number) is not int or number < 1:
        raise DocumentError(f"{where}.version", f"must be a version number from 1, not {_shown(number)}")
    return number


def _learned(record: dict[str, Any]) -> Learned:
    """Version 2's keys: ``recommend``, ``votes`` and ``library``."""
    recommend = record["recommend"]
    if recommend is not None and (type(recommend) is not int or not 1 <= recommend <= MAX_RECOMMEND):
        raise DocumentError(
            "recommend",
            f"must be null (off) or the recommendations per digest, 1 to {MAX_RECOMMEND}, "
            f"not {_shown(recommend)}",
        )
    return Learned(recommend, _votes(record["votes"]), _library(record["library"]))


def _votes(value: object) -> tuple[VoteLine, ...]:
    listed = _list(value, "votes")  # its length was checked first (_check_sizes)
    items: list[VoteLine] = []
    seen: dict[tuple[str, int], int] = {}
    for index, item in enumerate(listed):
        where = f"votes[{index}]"
        if not isinstance(item, dict):
            raise DocumentError(where, f"must be an object, not {_kind(item)}")
        _check_keys(item, VOTE_KEYS, where, f"a vote has {', '.join(VOTE_KEYS)}")
        arxiv_id, number = _arxiv_id(item, where), _version(item, where)
        vote = item["value"]
        if type(vote) is not int or vote not in (1, -1):
            raise DocumentError(f"{where}.value", f"must be 1 (liked) or -1 (disliked), not {_shown(vote)}")
        if (arxiv_id, number) in seen:
            raise DocumentError(
                where, f"{arxiv_id}v{number} is voted on twice (also votes[{seen[(arxiv_id, number)]}])"
            )
        seen[(arxiv_id, number)] = index
        items.append(VoteLine(arxiv_id, number, vote, _time(item["voted_at"], f"{where}.voted_at")))
    return tuple(items)


def _library(value: object) -> tuple[LibraryLine, ...]:
    listed = _list(value, "library")  # its length was checked first (_check_sizes)
    items: list[LibraryLine] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(listed):
        where = f"library[{index}]"
        if not isinstance(item, dict):
            raise DocumentError(where, f"must be an object, not {_kind(item)}")
        _check_keys(item, LIBRARY_KEYS, where, f"a library entry has {', '.join(LIBRARY_KEYS)}")
        key = _string(item, "key", f"{where}.key")
        if not key.strip():
            raise DocumentError(f"{where}.key", "must not be empty")
        if len(key) > SEED_KEY_CHARS:
            raise DocumentError(f"{where}.key", f"{len(key)} characters; a key has at most {SEED_KEY_CHARS}")
        if key in seen:
            raise DocumentError(f"{where}.key", f"{key[:70]!r} is listed twice (also library[{seen[key]}])")
        seen[key] = index
        title = _string(item, "title", f"{where}.title")
        abstract = _string(item, "abstract", f"{where}.abstract")
        if item["arxiv_id"] is None and item["version"] is None:
            items.append(LibraryLine(key, None, None, title, abstract))
            continue
        for name, other in (("arxiv_id", "version"), ("version", "arxiv_id")):
            if item[name] is None:
                raise DocumentError(
                    f"{where}.{name}",
                    f"is null but {other} is not: a seed has both (a stored paper) or neither",
                )
        items.append(LibraryLine(key, _arxiv_id(item, where), _version(item, where), title, abstract))
    return tuple(items)


class Mode(StrEnum):
    """What an import does with an address the server has already."""

    REFUSE = "refuse"  # the default: only a subscriber equal to the file's is accepted (a re-import)
    MERGE = "merge"  # the file's settings, follows, newsletters, votes and seeds are added to what is there
    REPLACE = "replace"  # settings, follows, newsletters, votes and seeds become exactly the file's


class SubscriptionExists(Exception):
    """The address is a subscriber here already, with other settings than the file's; nothing stored."""

    def __init__(self, address: str, differences: Sequence[str]) -> None:
        super().__init__(f"{address} is a subscriber here already, with other settings")
        self.address = address
        self.differences = tuple(differences)
