"""Byte-level reading of an arXiv RSS body chunk by chunk, so that no step needs the whole body in memory.

``ingest.arxiv_rss_parse.parse_feed`` reads a feed from a file (the HTTP client spools the body to a
temporary file) in chunks of ``CHUNK`` bytes. The XML itself goes to an incremental parser; this module
does what used to be done on the whole ``bytes``:

- ``opening``: refuse an empty, blank or obviously HTML body before parsing;
- ``repair_utf8``: a copy of the body, spooled to a temporary file, with each invalid UTF-8 sequence
  replaced by U+FFFD, and the note naming the items that were hit.

Each gives the same answer whatever the chunk boundaries; the tests run them with tiny chunks to cross
every boundary.
"""

from __future__ import annotations

import codecs
import re
import tempfile
from collections import deque
from collections.abc import Iterable, Iterator
from typing import BinaryIO

# Bytes read (and fed to the XML parser) at a time. Large enough that the per-chunk work is negligible,
# small enough that the elements parsed from one chunk and not yet handled stay a few MB.
CHUNK = 256 * 1024

UTF8_BOM = b"\xef\xbb\xbf"
XML_DECLARATION_RE = re.compile(rb"<\?xml\s[^>]*?(?:encoding\s*=\s*[\"'](?P<encoding>[^\"']*)[\"'][^>]*)?\?>")
ITEM_START_RE = re.compile(rb"<item[\s>]")
ITEM_GUID_RE = re.compile(rb"<guid[^>]*>([^<]{1,200})</guid>")
# Items named in the repair note at most (the count is always whole).
REPAIRED_SHOWN = 5
# What bytes.strip() removes (ASCII whitespace), and what the HTML sniffing skips before looking.
_WHITESPACE = b" \t\n\r\x0b\x0c"
_LEADING = b"\xef\xbb\xbf \t\r\n"
_OPENING_SHOWN = 14
_REPLACEMENT = "\ufffd".encode()


def read_chunks(stream: BinaryIO, start: int = 0) -> Iterator[bytes]:
    """The bytes of ``stream`` from ``start`` on, ``CHUNK`` at a time."""
    stream.seek(start)
    while chunk := stream.read(CHUNK):
        yield chunk


def opening(stream: BinaryIO) -> bytes | None:
    """How the body opens: None for a blank body (empty or ASCII whitespace only), else its first bytes.

    The bytes returned are the first 14 after any leading byte-order-mark bytes and whitespace, for the
    caller to compare with ``<!doctype html`` and ``<html``. The body is read only as far as needed to
    know both: one chunk for any real document.
    """
    blank = True
    stripping = True
    first = b""
    for chunk in read_chunks(stream):
        if blank and chunk.strip(_WHITESPACE):
            blank = False
        if stripping:
            rest = chunk.lstrip(_LEADING)
            if rest:
                stripping = False
                first = rest[:_OPENING_SHOWN]
        elif len(first) < _OPENING_SHOWN:
            first += chunk[: _OPENING_SHOWN - len(first)]
        if not blank and not stripping and len(first) >= _OPENING_SHOWN:
            break
    return None if blank else first


def repair_utf8(stream: BinaryIO) -> tuple[BinaryIO, str] | None:
    """A temporary file holding the body with each invalid UTF-8 sequence replaced by U+FFFD, and the note.

    The body is the stream without a leading UTF-8 byte-order mark; the copy is written chunk by chunk,
    the caller closes it (which deletes it). None when there is nothing to repair this way: the document
    declares another encoding (or starts with a UTF-16/32 byte-order mark) or is valid UTF-8.
    """
    stream.seek(0)
    head = stream.read(len(UTF8_BOM) + 1024)
    skip = len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0
    body_head = head[skip:]
    if body_head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00")):
        return None
    # The declaration opens the document: look at its first bytes only.
    declaration = XML_DECLARATION_RE.match(body_head[:1024].lstrip())
    encoding = (declaration.group("encoding") or b"utf-8") if declaration else b"utf-8"
    if encoding.lower() not in (b"utf-8", b"utf8"):
        return None
    # Handed to the caller open, or closed here on every other way out.
    fixed = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        note = _copy_repaired(stream, skip, fixed)
        if note is None:
            fixed.close()
            return None
        fixed.seek(0)
    except BaseException:
        fixed.close()
        raise
    return fixed, note


def _copy_repaired(stream: BinaryIO, skip: int, out: BinaryIO) -> str | None:
    """Copy the body (from ``skip``) to ``out`` with bad sequences replaced; the note, None if none was bad.

    Decoding resumes after each bad sequence, so a body full of bad bytes costs linear time; an incomplete
    sequence at the end of a chunk waits for the next one, so the replacements are those of decoding the
    whole body at once.
    """
    hits = _RepairHits()
    pending = b""
    offset = 0  # position in the body of pending[0]
    tail = b""  # the last bytes of the previous chunk, for an "<item" cut by the boundary
    tail_at = 0
    chunks = read_chunks(stream, skip)
    while True:
        chunk = next(chunks, b"")
        final = not chunk
        if chunk:
            window = tail + chunk
            hits.item_starts(tail_at + match.start() for match in ITEM_START_RE.finditer(window))
            tail_at += len(window) - min(len(window), 5)
            tail = window[-5:]
        data = pending + chunk
        view = memoryview(data)
        position = 0
        while True:
            try:
                consumed = codecs.utf_8_decode(view[position:], "strict", final)[1]
            except UnicodeDecodeError as exc:
                start = position + exc.start
                out.write(view[position:start])
                out.write(_REPLACEMENT)
                hits.bad_at(offset + start)
                position += exc.end
                continue
            out.write(view[position : position + consumed])
            position += consumed
            break
        # Every later bad sequence lies after the item starts found so far.
        hits.item_starts_passed()
        pending = bytes(view[position:])
        offset += position
        if final:
            break
    if not hits.bad:
        return None
    size = offset
    named = []
    for position, start, end in hits.named:
        stream.seek(skip + start)
        region = stream.read((size if end < 0 else end) - start)
        guid = ITEM_GUID_RE.search(region)
        named.append((position, guid.group(1).decode("utf-8", "replace").strip() if guid else ""))
    return format_repair_note(hits.items, named, hits.outside, hits.bad)


class _RepairHits:
    """Which items the bad sequences fall in, counted as the body streams past (item starts and bad
    offsets arrive in ascending order; an item is numbered by how many starts lie at or before it)."""

    def __init__(self) -> None:
        self.bad = 0
        self.outside = False
        self.items = 0
        # (1-based position, start, end or -1 while the next start is not known) of the first items hit.
        self.named: list[tuple[int, int, int]] = []
        self._pending: deque[int] = deque()
        self._starts = 0
        self._last_start = -1
        self._last_hit = 0

    def item_starts(self, starts: Iterable[int]) -> None:
        self._pending.extend(starts)

    def item_starts_passed(self) -> None:
        while self._pending:
            self._pass(self._pending.popleft())

    def bad_at(self, offset: int) -> None:
        while self._pending and self._pending[0] <= offset:
            self._pass(self._pending.popleft())
        self.bad += 1
        if not self._starts:
            self.outside = True
        elif self._starts != self._last_hit:
            self._last_hit = self._starts
            self.items += 1
            if len(self.named) < REPAIRED_SHOWN:
                self.named.append((self._starts, self._last_start, -1))

    def _pass(self, start: int) -> None:
        self._starts += 1
        if self.named and self.named[-1][2] < 0:
            position, begin, _ = self.named[-1]
            self.named[-1] = (position, begin, start)
        self._last_start = start


def format_repair_note(items: int, named: list[tuple[int, str]], outside: bool, bad: int) -> str:
    """ "1 item had invalid UTF-8 (item 2 (oai:...)); 1 bad byte sequence replaced by U+FFFD ...".

    ``items`` is how many items held a bad sequence, ``named`` the first few as (position, guid or "").
    """
    shown = [f"item {position}" + (f" ({label})" if label else "") for position, label in named]
    more = f" and {items - REPAIRED_SHOWN} more" if items > REPAIRED_SHOWN else ""
    parts = []
    if items:
        noun = "item" if items == 1 else "items"
        parts.append(f"{items} {noun} had invalid UTF-8 ({', '.join(shown)}{more})")
    if outside:
        parts.append("the channel header had invalid UTF-8")
    sequences = "sequence" if bad == 1 else "sequences"
    return f"{'; '.join(parts)}; {bad} bad byte {sequences} replaced by U+FFFD and the items kept"
