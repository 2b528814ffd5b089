"""Stream the Kaggle/Cornell ``arxiv-metadata-oai-snapshot`` (JSON Lines) into ``PaperIn`` values.

The snapshot is the bulk backfill: about 2.7 million lines, one paper per line, with the paper's whole
version history (``versions``: ``[{"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}, ...]``).
The format is described in ``shared/corpus/SOURCES.md``. Each good line becomes a ``SnapshotRecord`` holding
one ``PaperIn`` per version:

- ``version`` from ``"vN"``; ``announced_at`` from ``created`` (RFC-822, GMT) as an aware UTC datetime. That
  is when the version was submitted, the closest to an announcement time the snapshot has;
- ``announce_type`` NEW for v1 and REPLACE for later versions (the snapshot does not record cross-lists);
- title and abstract with the hard wraps (``\\n  ``) and leading spaces collapsed and TeX escapes decoded;
- authors from ``authors_parsed`` (``[last, first, suffix, affiliation...]`` becomes ``"First Last
  Suffix"``), falling back to splitting the ``authors`` string when ``authors_parsed`` is missing or broken;
- categories split on spaces (primary first); comments, journal-ref, doi and license as given.

Memory stays bounded: the stream is read one line at a time and a line longer than ``max_line_bytes`` is
skipped without being held. A line that cannot be used (invalid JSON, no id, no versions, ...) becomes a
``SnapshotSkip`` with its line number, and the stream continues.
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from typing import IO, Any, cast

from core.json_input import JSONReader
from core.tex_accents import decode_tex
from core.values import AnnounceType, PaperIn
from ingest.arxiv_rss_parse import split_authors

__all__ = [
    "MAX_LINE_BYTES",
    "SOURCE",
    "SnapshotRecord",
    "SnapshotSkip",
    "iter_snapshot",
    "open_snapshot",
]

SOURCE = "snapshot"

# The largest real records (big collaborations with thousands of authors, each also in authors_parsed) are
# a few hundred kilobytes; a "line" far beyond that means the file has no line structure (wrong file, or
# one pretty-printed JSON document) and must not be read into memory whole.
MAX_LINE_BYTES = 16 * 1024 * 1024

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
# Decoding the UTF-8 line ourselves and calling the reader with text skips json.loads' encoding sniffing:
# a few percent over millions of lines. The snapshot is UTF-8 by specification. The reader applies the
# shared rules of untrusted JSON (core.json_input): a line nested too deeply is skipped like invalid JSON.
_decode_json = JSONReader(unique_keys=False).loads
_ID_RE = re.compile(r"\A(?:\d{2}(?:0[1-9]|1[0-2])\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})\Z")
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1
    )
}
_ET_AL = frozenset({"et al", "et al.", "et. al.", "et.al."})


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    """One snapshot line: a paper with every version as a ``PaperIn`` (v1 first)."""

    line: int
    arxiv_id: str
    versions: tuple[PaperIn, ...]
    update_date: date | None = None
    submitter: str | None = None
    report_no: str | None = None


@dataclass(frozen=True, slots=True)
class SnapshotSkip:
    """One snapshot line that was not used, with the 1-based line number and why."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}; skipped"


def open_snapshot(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open a snapshot file for ``iter_snapshot``, plain (``.json``/``.jsonl``) or gzip-compressed.

    Compression is recognised by the gzip magic bytes, not the file name, so ``.jsonl.gz``, ``.json.gz`` and
    a renamed file all work. The caller closes the returned stream (``with open_snapshot(p) as f: ...``).
    """
    raw = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    try:
        magic = raw.peek(len(_GZIP_MAGIC))[: len(_GZIP_MAGIC)]
    except BaseException:
        raw.close()
        raise
    if magic != _GZIP_MAGIC:
        return raw
    # Reopened by name so that closing the GzipFile closes the file too (with fileobj= it would not).
    raw.close()
    # GzipFile decompresses lazily as lines are read and implements every IO[bytes] method, but typeshed
    # declares it as a BufferedIOBase only.
    return cast(IO[bytes], gzip.open(path, "rb"))


def iter_snapshot(
    stream: IO[bytes], *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[SnapshotRecord | SnapshotSkip]:
    """Yield a ``SnapshotRecord`` or a ``SnapshotSkip`` for every non-blank line of ``stream``, in order.

    Reads one line at a time, so memory use is bounded by ``max_line_bytes`` whatever the file size. Blank
    lines are not records and yield nothing (they still count for line numbers). Never raises for bad
    content; I/O errors from the stream (a corrupt gzip member, say) propagate.
    """
    readline = stream.readline
    number = 0
    while True:
        raw = readline(max_line_bytes)
        if not raw:
            return
        number += 1
        if len(raw) >= max_line_bytes and not raw.endswith(b"\n"):
            size = len(raw) + _discard_rest_of_line(readline, max_line_bytes)
            yield SnapshotSkip(
                number,
                f"line is {size} bytes, longer than the {max_line_bytes}-byte limit; the file may not be "
                "JSON Lines (check it is arxiv-metadata-oai-snapshot.json), or raise max_line_bytes",
            )
            continue
        if raw.isspace():
            continue
        if number == 1 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :]  # written by some Windows tools; not part of the JSON
        try:
            obj = _decode_json(raw.decode("utf-8"))
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, nested too deeply
            cut = "" if raw.endswith(b"\n") else " (the last line has no newline: the file may be cut short)"
            yield SnapshotSkip(number, f"invalid JSON ({exc}){cut}: {_preview(raw)}")
            continue
        yield _record(obj, number)


def _discard_rest_of_line(readline: Any, limit: int) -> int:
    """Read and drop the rest of an over-long line; return how many bytes that was."""
    size = 0
    while True:
        chunk = readline(limit)
        size += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return size


def _record(obj: Any, line: int) -> SnapshotRecord | SnapshotSkip:
    """Turn one decoded line into a record, or a skip that says which field was wrong."""
    if not isinstance(obj, dict):
        return SnapshotSkip(line, f"a JSON {_json_type(obj)}, not an object: {_preview(obj)}")
    arxiv_id = obj.get("id")
    if "id" not in obj:
        return SnapshotSkip(line, f"no 'id' (keys: {sorted(obj)[:8]})")
    if not isinstance(arxiv_id, str):
        # {"id": 5} has an id, of the wrong type: "no 'id' (keys: ['id'])" contradicted itself.
        return SnapshotSkip(
            line, f"'id' is a JSON {_json_type(arxiv_id)}, not a string: {_preview(arxiv_id)}"
        )
    if not arxiv_id.strip():
        return SnapshotSkip(line, "'id' is empty")
    arxiv_id = arxiv_id.strip()
    if _ID_RE.match(arxiv_id) is None:
        return SnapshotSkip(line, f"id {arxiv_id!r} is not a bare arXiv id (2411.17700, hep-th/9901001)")

    versions = _versions(obj.get("versions"))
    if isinstance(versions, str):
        return SnapshotSkip(line, f"{arxiv_id}: {versions}")
    title = obj.get("title")
    if not isinstance(title, str) or not title.strip():
        return SnapshotSkip(line, f"{arxiv_id}: no title")

    # Shared by every version: the snapshot only holds the latest metadata, not each version's own.
    title = decode_tex(" ".join(title.split()))
    abstract = _decoded(obj.get("abstract"))
    authors = _authors(obj.get("authors_parsed"), obj.get("authors"))
    categories = _categories(obj.get("categories"))
    comment = _optional(obj.get("comments"))
    journal_ref = _optional(obj.get("journal-ref"))
    doi = _optional(obj.get("doi"))
    license_ = _optional(obj.get("license"))

    papers = tuple(
        PaperIn(
            arxiv_id=arxiv_id,
            version=number,
            title=title,
            abstract=abstract,
            authors=authors,
            categories=categories,
            announce_type=AnnounceType.NEW if number == 1 else AnnounceType.REPLACE,
            announced_at=created,
            comment=comment,
            journal_ref=journal_ref,
            doi=doi,
            license=license_,
            source=SOURCE,
        )
        for number, created in versions
    )
    return SnapshotRecord(
        line=line,
        arxiv_id=arxiv_id,
        versions=papers,
        update_date=_date(obj.get("update_date")),
        submitter=_optional(obj.get("submitter")),
        report_no=_optional(obj.get("report-no")),
    )


def _versions(value: object) -> list[tuple[int, datetime]] | str:
    """``[(number, created), ...]`` sorted by number, or a message saying what is wrong with the list.

    A record with a bad version entry is skipped whole: emitting the others would mislabel which version is
    new, and a guessed date would be stored as fact.
    """
    if not isinstance(value, list) or not value:
        return f"'versions' is {_preview(value)}, expected a non-empty list of {{version, created}}"
    out: dict[int, datetime] = {}
    for entry in value:
        if not isinstance(entry, dict):
            return f"version entry {_preview(entry)} is not an object"
        label = entry.get("version")
        digits = label[1:] if isinstance(label, str) and label[:1] == "v" else ""
        if not digits.isdigit() or not digits.isascii() or int(digits) < 1:
            return f"version label {label!r} is not vN"
        number = int(digits)
        if number in out:
            return f"version v{number} is listed twice"
        created = _created(entry.get("created"))
        if created is None:
            return f"v{number} has created {entry.get('created')!r}, not an RFC-822 date"
        out[number] = created
    return sorted(out.items())


def _created(value: object) -> datetime | None:
    """``Mon, 2 Apr 2007 19:18:42 GMT`` as an aware UTC datetime; None when it is not a date."""
    if not isinstance(value, str):
        return None
    # A fast path for the one layout the snapshot uses: email.utils costs several times more, and this
    # runs once per version over millions of lines.
    parts = value.split()
    if len(parts) == 6 and parts[5] == "GMT" and parts[2] in _MONTHS:
        clock = parts[4].split(":")
        if len(clock) == 3:
            try:
                return datetime(
                    int(parts[3]),
                    _MONTHS[parts[2]],
                    int(parts[1]),
                    int(clock[0]),
                    int(clock[1]),
                    int(clock[2]),
                    tzinfo=UTC,
                )
            except ValueError:
                return None
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    # "-0000" or no zone means UTC with no local offset known; Python returns those naive.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _authors(parsed: object, joined: object) -> tuple[str, ...]:
    """Display names from ``authors_parsed``, or from the ``authors`` string when that is unusable."""
    if isinstance(parsed, list) and parsed:
        names: list[str] = []
        for entry in parsed:
            # [last, first, suffix] plus, in some records, an affiliation as a fourth item, which is dropped.
            if not isinstance(entry, list) or not entry or not all(isinstance(p, str) for p in entry[:3]):
                names = []
                break
            last, first, suffix = [*entry, "", ""][:3]
            name = " ".join(f"{first} {last} {suffix}".split())
            if name:
                names.append(decode_tex(name))
        if names:
            return tuple(names)
    if isinstance(joined, str):
        # split_authors decodes TeX; "et al" is how long lists end in the string, and is nobody's name.
        return tuple(name for name in split_authors(joined) if name.lower() not in _ET_AL)
    return ()


def _categories(value: object) -> tuple[str, ...]:
    """Space-separated categories in order (primary first), without repeats."""
    if not isinstance(value, str):
        return ()
    return tuple(dict.fromkeys(value.split()))


def _decoded(value: object) -> str:
    """A hard-wrapped TeX text field de-wrapped and decoded; "" when absent."""
    return decode_tex(" ".join(value.split())) if isinstance(value, str) else ""


def _optional(value: object) -> str | None:
    """A text field with whitespace collapsed; None when absent, null or blank."""
    if not isinstance(value, str):
        return None
    return " ".join(value.split()) or None


def _date(value: object) -> date | None:
    """``update_date`` (YYYY-MM-DD); None when absent or malformed, since no ``PaperIn`` depends on it."""
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type (a Python ``int`` is a JSON number)."""
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "boolean"
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number"}
    return names.get(type(value), "null" if value is None else type(value).__name__)


def _preview(value: object, limit: int = 80) -> str:
    """A short rendering of a bad line or value for a skip message."""
    if isinstance(value, bytes):
        text = repr(value[:limit].decode("utf-8", errors="replace").rstrip("\n"))
        return text + ("..." if len(value) > limit else "")
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
