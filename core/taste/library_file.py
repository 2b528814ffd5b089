"""A reader's reference library, exported from Zotero, Mendeley or JabRef, read into entries (issue 17).

A reader seeds learned follows by uploading their library: BibTeX, RIS or CSL-JSON, the three formats
every reference manager exports. :func:`read_library` turns the file's bytes into one
:class:`LibraryEntry` per usable entry (its arXiv id, DOI, title and abstract) and one
:class:`EntryProblem` per entry it cannot use, saying why, so that the reader is told how many entries
were used and why the others were not. Nothing is dropped without a problem saying so; a file that is not
a library at all is refused whole with a :class:`LibraryFileError` that says what to do.

Rules (docs/recommendations.md, "Importing a library", says them to readers):

* the format is read from the content, the file name's extension deciding only when the content does not:
  a first character ``[`` or ``{`` is CSL-JSON; a line ``TY  - `` is RIS; a line ``@type{`` is BibTeX,
  whichever of the last two comes first;
* the text is UTF-8 (a byte-order mark is allowed, and UTF-16 with one). A BibTeX or RIS file that is not
  UTF-8 is read as its JabRef ``% Encoding:`` header says, else as Windows-1252: both formats are older
  than Unicode and old JabRef, EndNote and RefWorks exports are in that encoding; arXiv ids and DOIs are
  ASCII either way, only accented letters of titles could come out wrong. JSON is UTF-8 by its standard
  (RFC 8259), so a CSL-JSON file that is not is refused;
* arXiv ids come from every field real exports put them in (``_BIBTEX_*``, ``_RIS_*``, ``_CSL_*`` in each
  format's module, highest priority first) and DOIs from the DOI field or a ``doi.org`` link, both in the
  store's form (core.taste.library_ids);
* titles and abstracts are reduced to text: TeX markup by ``core.follows.normalise.strip_tex`` (so that they
compare
  with stored papers through ``core.follows.normalise.words`` after the same call), Zotero's rich-text tags
  removed,
  white space collapsed;
* an entry needs an arXiv id, a DOI or a title; a later entry naming the same paper as an earlier one (the
  same arXiv id; the same DOI when one of them has no arXiv id; the same title when neither has an id)
  is a duplicate of it;
* at most :data:`MAX_FILE_BYTES` bytes and :data:`MAX_ENTRIES` entries are read; a larger file is refused.

Pure: no store, no I/O beyond the bytes it is given.

This module reads the bytes, tells the format and checks the entries as a whole (counts, duplicates); each
format is read in its own module (``core.taste.library_file_bibtex``, ``core.taste.library_file_ris``,
``core.taste.library_file_csl``) into the values of ``core.taste.library_file_entries``. Import them from
here.
"""

from __future__ import annotations

import codecs
import math
import re
from dataclasses import dataclass
from typing import Literal

from core.follows.normalise import words
from core.languages import N_, Phrase
from core.taste.library_file_bibtex import BIBTEX_BLOCK, read_bibtex
from core.taste.library_file_csl import read_csl
from core.taste.library_file_entries import (
    EXPORT,
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    SMALLER,
    EntryProblem,
    LibraryEntry,
    LibraryFileError,
    refuse_if_too_many,
)
from core.taste.library_file_ris import RIS_START, read_ris

__all__ = [
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "EntryProblem",
    "LibraryEntry",
    "LibraryFileError",
    "LibraryFormat",
    "LibraryRead",
    "read_library",
]

LibraryFormat = Literal["bibtex", "ris", "csl-json"]
_EXTENSIONS: dict[str, LibraryFormat] = {
    "bib": "bibtex",
    "bibtex": "bibtex",
    "ris": "ris",
    "json": "csl-json",
    "csljson": "csl-json",
}

_JABREF_ENCODING = re.compile(rb"\A(?:\xef\xbb\xbf)?%\s*Encoding\s*:\s*([\w.:-]+)")

_NO_IDENTITY = Phrase(N_("no arXiv id, DOI or title"))


@dataclass(frozen=True, slots=True)
class LibraryRead:
    """A read file: its format, the encoding it was read in, the usable entries and the others' problems.

    Both are in file order; every entry of the file is in exactly one of them (a RIS file's lines outside
    any record add a problem of their own).
    """

    format: LibraryFormat
    encoding: str
    entries: tuple[LibraryEntry, ...]
    problems: tuple[EntryProblem, ...]


def read_library(data: bytes, filename: str | None = None) -> LibraryRead:
    """Read a BibTeX, RIS or CSL-JSON library export into entries and per-entry problems.

    ``filename`` (the upload's name) only decides the format when the content does not. Raises
    :class:`LibraryFileError` for a file that is empty, too large (:data:`MAX_FILE_BYTES`), holds more than
    :data:`MAX_ENTRIES` entries or none, is not text, is none of the three formats, or is JSON but not
    CSL-JSON.
    """
    if len(data) > MAX_FILE_BYTES:
        raise LibraryFileError(
            Phrase(
                N_("the file is {size} MB; at most {limit} MB are read"),
                size=f"{math.ceil(len(data) / 1e5) / 10:,.1f}",
                limit=f"{MAX_FILE_BYTES / 1e6:,.0f}",
            ),
            SMALLER,
        )
    text, encoding, bad_byte = _decode(data)
    if not text.strip():
        raise LibraryFileError(Phrase(N_("the file is empty")), EXPORT)
    library_format = _detect(text, filename)
    if library_format is None:
        raise LibraryFileError(Phrase(N_("this is not a BibTeX, RIS or CSL-JSON file")), EXPORT)
    if bad_byte is not None:
        if library_format == "csl-json":
            raise LibraryFileError(
                Phrase(N_("the file is not UTF-8 (byte {offset})"), offset=bad_byte + 1),
                Phrase(N_("export it again with the UTF-8 encoding")),
            )
        text, encoding = _legacy_decode(data)
    if library_format == "bibtex":
        items = read_bibtex(text)
    elif library_format == "ris":
        items = read_ris(text)
    else:
        items = read_csl(text)
    return _finish(library_format, encoding, items)


# --- bytes to text ----------------------------------------------------------------------------------------


def _decode(data: bytes) -> tuple[str, str, int | None]:
    """The text, its encoding, and the offset of the first byte that is not UTF-8 (then the text is the
    bytes read as Latin-1, enough to tell the format, whose marks are ASCII)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16"), "utf-16", None
        except UnicodeDecodeError:
            raise LibraryFileError(Phrase(N_("this is not a text file")), EXPORT) from None
    if b"\x00" in data:
        raise LibraryFileError(Phrase(N_("this is not a text file")), EXPORT)
    try:
        return data.decode("utf-8-sig"), "utf-8", None
    except UnicodeDecodeError as exc:
        return data.decode("latin-1"), "latin-1", exc.start


def _legacy_decode(data: bytes) -> tuple[str, str]:
    """A BibTeX or RIS file that is not UTF-8: in its JabRef header's encoding, else Windows-1252."""
    header = _JABREF_ENCODING.match(data)
    if header is not None:
        try:
            name = codecs.lookup(header.group(1).decode("ascii")).name
            return data.decode(name), name
        except (LookupError, UnicodeDecodeError):
            pass  # an unknown or wrong header: the default below
    try:
        return data.decode("cp1252"), "windows-1252"
    except UnicodeDecodeError:
        # Five bytes have no character in Windows-1252; Latin-1 reads every byte.
        return data.decode("latin-1"), "latin-1"


def _detect(text: str, filename: str | None) -> LibraryFormat | None:
    """The format the content shows, else the one the file name's extension names, else None."""
    first = text.lstrip()[:1]
    if first in ("[", "{"):
        return "csl-json"
    ris = RIS_START.search(text)
    bib = BIBTEX_BLOCK.search(text)
    if ris is not None and (bib is None or ris.start() < bib.start()):
        return "ris"
    if bib is not None:
        return "bibtex"
    if filename and "." in filename:
        return _EXTENSIONS.get(filename.rsplit(".", 1)[1].lower())
    return None


# --- entries to LibraryRead -------------------------------------------------------------------------------


def _finish(
    library_format: LibraryFormat, encoding: str, items: list[LibraryEntry | EntryProblem]
) -> LibraryRead:
    """Check the counts, refuse entries without identity and duplicates, and order the problems."""
    if not items:
        raise LibraryFileError(Phrase(N_("the file has no entries")), EXPORT)
    refuse_if_too_many(len(items))
    entries: list[LibraryEntry] = []
    problems: list[EntryProblem] = []
    by_arxiv: dict[str, LibraryEntry] = {}
    by_doi: dict[str, LibraryEntry] = {}
    by_title: dict[tuple[str, ...], LibraryEntry] = {}
    for item in items:
        if isinstance(item, EntryProblem):
            problems.append(item)
            continue
        if not (item.arxiv_id or item.doi or item.title):
            problems.append(EntryProblem(item.key, item.line, _NO_IDENTITY))
            continue
        title_key = tuple(words(item.title))
        first = _earlier(item, title_key, by_arxiv, by_doi, by_title)
        if first is not None:
            reason = Phrase(N_("duplicate of entry {key} (line {line})"), key=first.key, line=first.line)
            problems.append(EntryProblem(item.key, item.line, reason, item.title))
            continue
        if item.arxiv_id:
            by_arxiv[item.arxiv_id] = item
        if item.doi:
            by_doi.setdefault(item.doi, item)
        if not (item.arxiv_id or item.doi) and title_key:
            by_title[title_key] = item
        entries.append(item)
    problems.sort(key=lambda p: p.line or 0)
    return LibraryRead(library_format, encoding, tuple(entries), tuple(problems))


def _earlier(
    entry: LibraryEntry,
    title_key: tuple[str, ...],
    by_arxiv: dict[str, LibraryEntry],
    by_doi: dict[str, LibraryEntry],
    by_title: dict[tuple[str, ...], LibraryEntry],
) -> LibraryEntry | None:
    """The earlier entry that names the same paper, if any (the rules in the module's notes)."""
    if entry.arxiv_id:
        if entry.arxiv_id in by_arxiv:
            return by_arxiv[entry.arxiv_id]
        # Two arXiv ids with one DOI are two papers (a DOI put on the wrong preprint); without an id on one
        # side, the DOI is all there is to go by.
        first = by_doi.get(entry.doi) if entry.doi else None
        return first if first is not None and first.arxiv_id is None else None
    if entry.doi:
        return by_doi.get(entry.doi)
    return by_title.get(title_key) if title_key else None
