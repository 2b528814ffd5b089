"""A reader's reference library, exported from Zotero, Mendeley or JabRef, read into entries.

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
  format's section, highest priority first) and DOIs from the DOI field or a ``doi.org`` link, both in the
  store's form (core.taste.library_ids);
* titles and abstracts are reduced to text: TeX markup by ``core.follows.normalise.strip_tex`` (so that they
  compare with stored papers through ``core.follows.normalise.words`` after the same call), Zotero's
  rich-text tags removed, white space collapsed;
* an entry needs an arXiv id, a DOI or a title; a later entry naming the same paper as an earlier one (the
  same arXiv id; the same DOI when one of them has no arXiv id; the same title when neither has an id)
  is a duplicate of it;
* at most :data:`MAX_FILE_BYTES` bytes and :data:`MAX_ENTRIES` entries are read; a larger file is refused.

Pure: no store, no I/O beyond the bytes it is given.

This module holds, in order: what reading yields (the entries, problems and the file error) and the helpers
every format shares (picking the arXiv id and DOI, plain text, the entry limit); reading the bytes, telling
the format and checking the entries as a whole (counts, duplicates); and one section per format: BibTeX
(bibtexparser), RIS (rispy) and CSL-JSON.
"""

from __future__ import annotations

import codecs
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import rispy
from bibtexparser.entrypoint import parse_string
from bibtexparser.middlewares.enclosing import REMOVED_ENCLOSING_KEY, RemoveEnclosingMiddleware
from bibtexparser.model import Entry, ImplicitComment, ParsingFailedBlock

from core.follows.normalise import strip_tex, words
from core.json_input import JSONReader, TooDeep
from core.languages import N_, Phrase, Translator, Worded
from core.taste.library_ids import arxiv_id_in, bare_arxiv_id, doi_in_url, normalise_doi

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


# -------------------------------------------------------------------------------------------------------
# What reading a library yields, and the helpers every format reader shares to make an entry the same way.

# A Zotero export with abstracts runs to about 1.8 KB an entry, so 5 MB hold some 2,700 papers (without
# abstracts, the 5,000 entries fit): more than a taste model needs, and a larger library can be exported a
# collection at a time. The size bounds the time, every step being linear in it: a real export takes about
# 0.4 s a MB to read, a file built to be slow (5 MB of "\[" for strip_tex, of open braces or commas for
# bibtexparser's splitter) at most some 1 s a MB (bench/library_file.py).
MAX_FILE_BYTES = 5_000_000
MAX_ENTRIES = 5_000

# Zotero's rich text in titles (its RIS and CSL-JSON exports keep the tags; its BibTeX turns them into TeX).
_RICH_TEXT = re.compile(r"</?(?:i|b|sub|sup|sc)>|<span\b[^>]*>|</span>", re.IGNORECASE)
_SPACE = re.compile(r"\s+")

EXPORT = Phrase(N_("export it as BibTeX, RIS or CSL-JSON, e.g. from Zotero: File → Export Library…"))
SMALLER = Phrase(N_("export one collection at a time"))


class LibraryFileError(Worded, ValueError):
    """A file that is not a library PaperTrail can read: what is wrong and what to do, worded for readers."""


@dataclass(frozen=True, slots=True)
class LibraryEntry:
    """One usable entry: its key, the ids it names, its text, and the line it starts on.

    ``key`` is the BibTeX citation key, the RIS ``ID`` or the CSL ``id``, else ``#`` and the entry's
    number in the file (``#3``). ``arxiv_id`` has no version (``2306.03564``, ``hep-th/9901001``); ``doi``
    is lower case without a resolver (``10.1103/physrevb.108.125437``). ``title`` and ``abstract`` are
    plain text ("" when the entry has none). At least one of ``arxiv_id``, ``doi`` and ``title`` is set.
    """

    key: str
    arxiv_id: str | None
    doi: str | None
    title: str
    abstract: str
    line: int | None


@dataclass(frozen=True, slots=True)
class EntryProblem:
    """An entry that is not used, and why (``reason``, a phrase in the reader's language when said).

    ``key`` and ``title`` are the entry's when they could be read (a broken BibTeX entry may have neither),
    so that the reader can find it in their reference manager; ``line`` is where it starts in the file.
    """

    key: str | None
    line: int | None
    reason: Phrase
    title: str = ""

    @property
    def phrase(self) -> Phrase:
        """The whole problem as one phrase: ``entry smith2023 (line 14): no arXiv id, DOI or title``."""
        if self.key and self.line is not None:
            return Phrase(
                N_("entry {key} (line {line}): {reason}"), key=self.key, line=self.line, reason=self.reason
            )
        if self.line is not None:
            return Phrase(N_("line {line}: {reason}"), line=self.line, reason=self.reason)
        return Phrase(N_("entry {key}: {reason}"), key=self.key or "?", reason=self.reason)

    def said(self, t: Translator, *, limit: int | None = None) -> str:
        """The problem in ``t``'s language; with ``limit``, the key (a CSL id can be a long URI) cut to it."""
        return (self.phrase.shortened(limit) if limit else self.phrase).said(t)

    def __str__(self) -> str:
        return str(self.phrase)


def refuse_if_too_many(count: int) -> None:
    """Refuse a file of more than MAX_ENTRIES entries (counted before they are read, where that is cheap)."""
    if count > MAX_ENTRIES:
        raise LibraryFileError(
            Phrase(
                N_("the file has {count} entries; at most {limit} are read"),
                count=f"{count:,}",
                limit=f"{MAX_ENTRIES:,}",
            ),
            SMALLER,
        )


def plain_text(value: str) -> str:
    """A title or an abstract as plain text on one line."""
    return _SPACE.sub(" ", strip_tex(_without_rich_text(value))).strip() if value else ""


def _without_rich_text(value: str) -> str:
    """``value`` without Zotero's rich-text tags, read in time linear in its length.

    Every tag ends with ``>``, so none starts after the last one: the text after it is copied as it is.
    Before it each ``<span`` finds a ``>`` and ends there, while after it each would look for one to the end
    of the text (``<span`` repeated: quadratic).
    """
    cut = value.rfind(">") + 1
    return _RICH_TEXT.sub("", value[:cut]) + value[cut:] if cut else value


def pick_arxiv(bare: Iterable[str], linked: Iterable[str]) -> str | None:
    """The first id in fields that hold only one, else the first named in a link or text, in field order."""
    for value in bare:
        found = bare_arxiv_id(value) or arxiv_id_in(value)
        if found:
            return found
    for value in linked:
        found = arxiv_id_in(value)
        if found:
            return found
    return None


def pick_doi(dois: Iterable[str], links: Iterable[str]) -> str | None:
    """The first valid DOI in the DOI fields, else the first ``doi.org`` link's."""
    for value in dois:
        doi = normalise_doi(value)
        if doi:
            return doi
    for value in links:
        doi = doi_in_url(value)
        if doi:
            return doi
    return None


def field_values(fields: dict[str, Any], *names: str) -> Iterator[str]:
    """The text values of ``names`` in order, a repeated tag's or a list's one by one."""
    for name in names:
        value = fields.get(name)
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, str) and item.strip():
                yield item
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                yield str(item)


# -------------------------------------------------------------------------------------------------------
# Reading a file: its text, its format, and its entries checked as a whole.

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


# -------------------------------------------------------------------------------------------------------
# BibTeX: bibtexparser splits the file into blocks; an entry block becomes an entry, a block it cannot use a
# problem naming its line. Zotero's escapes are undone before strip_tex so that titles and abstracts compare
# with the stored papers'.

# Highest priority first. Fields that hold an id and nothing else (read with bare_arxiv_id): BibTeX's
# eprint beside archivePrefix/eprinttype arXiv (or none), Mendeley's arxivId.
_BIBTEX_ID_FIELDS = ("arxivid", "arxiv")
# Fields searched for an arxiv.org link, arXiv's DOI or an "arXiv:" prefix
# (core.taste.library_ids.arxiv_id_in).
_BIBTEX_LINK_FIELDS = ("doi", "url", "howpublished", "eprint")
_BIBTEX_TEXT_FIELDS = ("journal", "journaltitle", "note", "number", "booktitle", "addendum", "annote")
# The start of a BibTeX block ("@article{", "@misc (") on its own line, as every exporter writes it.
BIBTEX_BLOCK = re.compile(r"^[ \t]*@[ \t]*([A-Za-z]+)[ \t]*[{(]", re.MULTILINE)
_BIBTEX_KEY = re.compile(r"@\s*([A-Za-z]+)\s*[{(]\s*([^,\s{}()]*)")
_BIBTEX_NOT_ENTRIES = frozenset({"comment", "string", "preamble"})
# An "@type" at the start of a line that bibtexparser kept as comment text: an entry without its brace.
_STRAY_ENTRY = re.compile(r"^[ \t]*@[ \t]*([A-Za-z]+)\b", re.MULTILINE)
_TEX_ESCAPE = re.compile(r"\\([_%&#$])")
_TIE = re.compile(r"(?<!\\)~")
# Zotero's BibTeX export escapes the characters TeX would read as markup (BibTeX.js, alwaysMap): undone,
# an abstract copied from arXiv is arXiv's text again, and strip_tex reduces it as it reduces the stored
# paper's (``$x{\textasciicircum}2$`` is ``$x^2$``, whose ``x2`` a stored abstract has too).
_ZOTERO_ESCAPES = {
    "{\\textbar}": "|",
    "{\\textless}": "<",
    "{\\textgreater}": ">",
    "{\\textasciitilde}": "~",
    "{\\textasciicircum}": "^",
    "{\\textbackslash}": "\\",
    "\\{\\vphantom{\\}}": "{",
    "\\vphantom{\\{}\\}": "}",
    # Undone in the same pass, so that an escaped backslash before them stays a backslash ($11.37\%$).
    "\\$": "$",
    "\\%": "%",
    "\\&": "&",
    "\\#": "#",
    "\\_": "_",
}
_REMOVE_ENCLOSING = RemoveEnclosingMiddleware()
_ZOTERO_ESCAPE = re.compile("|".join(map(re.escape, _ZOTERO_ESCAPES)))

# bibtexparser logs a warning for every block of the reader's file it cannot split; here each of them
# becomes an EntryProblem instead, so its log lines (up to MAX_ENTRIES for one upload) would only repeat
# what the reader is told.
logging.getLogger("bibtexparser.splitter").addFilter(lambda record: record.levelno >= logging.ERROR)

_UNCLOSED = Phrase(N_("not valid BibTeX: a brace or a quote is not closed"))
_BIBTEX_SYNTAX = Phrase(N_("not valid BibTeX: a field is not written as name = value, followed by a comma"))
_BRACELESS = Phrase(N_("not valid BibTeX: the brace after @type is missing"))


def read_bibtex(text: str) -> list[LibraryEntry | EntryProblem]:
    """Every entry block: an entry, or a problem naming the broken block's line."""
    starts = BIBTEX_BLOCK.findall(text)
    refuse_if_too_many(sum(kind.lower() not in _BIBTEX_NOT_ENTRIES for kind in starts))
    try:
        library = parse_string(text)
    except Exception as exc:
        # bibtexparser raises only on what it calls its own bugs; the reader can still try another format.
        raise LibraryFileError(Phrase(N_("the BibTeX file could not be read")), EXPORT) from exc
    items: list[LibraryEntry | EntryProblem] = []
    for block in library.blocks:
        line = None if block.start_line is None else block.start_line + 1
        if isinstance(block, ParsingFailedBlock) and isinstance(block.ignore_error_block, Entry):
            # A repeated citation key or field: the entry itself was read, and is as good as any other,
            # but bibtexparser (2.1) leaves it as split, its values still in their braces or quotes.
            block = block.ignore_error_block
            _REMOVE_ENCLOSING.transform_entry(block, library)
        if isinstance(block, Entry) and _fields_run_together(block):
            items.append(EntryProblem(block.key or None, line, _BIBTEX_SYNTAX))
        elif isinstance(block, Entry):
            items.append(_bibtex_entry(block, line, len(items) + 1))
        elif isinstance(block, ParsingFailedBlock):
            failure = _bibtex_failure(block, line)
            if failure is not None:
                items.append(failure)
        elif isinstance(block, ImplicitComment):
            items.extend(_stray_entries(block, line))
    return items


def _bibtex_entry(entry: Entry, line: int | None, number: int) -> LibraryEntry:
    fields: dict[str, list[str]] = {}
    for field in entry.fields:
        fields.setdefault(field.key.lower(), []).append(str(field.value))

    def plain(*names: str) -> Iterator[str]:
        for name in names:
            for value in fields.get(name, ()):
                yield _TEX_ESCAPE.sub(r"\1", value.replace("{", "").replace("}", ""))

    prefix = next(plain("archiveprefix", "eprinttype"), "arxiv").strip().lower()
    bare = [*(plain("eprint") if prefix == "arxiv" else ()), *plain(*_BIBTEX_ID_FIELDS)]
    arxiv_id = pick_arxiv(bare, plain(*_BIBTEX_LINK_FIELDS, *_BIBTEX_TEXT_FIELDS))
    doi = pick_doi(plain("doi"), plain("url", "howpublished"))
    title = next(iter(fields.get("title", ())), "")
    abstract = next(iter(fields.get("abstract", ())), "")
    return LibraryEntry(
        key=entry.key.strip() or f"#{number}",
        arxiv_id=arxiv_id,
        doi=doi,
        title=plain_text(_bibtex_text(title)),
        abstract=plain_text(_bibtex_text(abstract)),
        line=line,
    )


def _fields_run_together(entry: Entry) -> bool:
    """True when a missing comma made two fields one: ``title = {A} eprint = {2411.17792}``.

    bibtexparser (2.1) ends a value only at a comma or the closing brace, so it reads that as a title
    ``{A} eprint = {2411.17792}`` and the eprint is lost without a word. Such a value is not enclosed in one
    pair of braces or quotes (bibtexparser notes that), and holds an ``=`` outside any braces or quotes,
    which no value written without enclosing (a number, a ``@string`` name, a ``#`` concatenation) can.
    """
    removed = entry.parser_metadata.get(REMOVED_ENCLOSING_KEY) or {}
    for field in entry.fields:
        if removed.get(field.key) != "no-enclosing" or "=" not in str(field.value):
            continue
        depth, quoted = 0, False
        for char in str(field.value):
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            elif char == '"' and depth == 0:
                quoted = not quoted
            elif char == "=" and depth == 0 and not quoted:
                return True
    return False


def _bibtex_text(value: str) -> str:
    """A BibTeX title or abstract before strip_tex: ties are spaces, Zotero's escapes undone."""
    return _ZOTERO_ESCAPE.sub(lambda m: _ZOTERO_ESCAPES[m.group()], _TIE.sub(" ", value))


def _bibtex_failure(block: ParsingFailedBlock, line: int | None) -> EntryProblem | None:
    """The problem of a block bibtexparser could not split, or None for a broken comment or string."""
    head = _BIBTEX_KEY.match(block.raw or "")
    if head is not None and head.group(1).lower() in _BIBTEX_NOT_ENTRIES:
        return None
    reason = str(getattr(block.error, "abort_reason", ""))
    # The splitter stops a block at the next "@" that starts a line, or at the end of the file, when a brace
    # or quote is still open; its other aborts are a field without "=" or without a comma after it.
    unclosed = reason.startswith(("Unexpected block start", "Unexpectedly reached end of file"))
    key = head.group(2) if head is not None and head.group(2) else None
    return EntryProblem(key, line, _UNCLOSED if unclosed else _BIBTEX_SYNTAX)


def _stray_entries(block: ImplicitComment, line: int | None) -> Iterator[EntryProblem]:
    """Entries bibtexparser took for comment text because the brace after ``@type`` is missing."""
    for m in _STRAY_ENTRY.finditer(block.comment):
        if m.group(1).lower() in _BIBTEX_NOT_ENTRIES:
            continue
        at = None if line is None else line + block.comment.count("\n", 0, m.start())
        yield EntryProblem(None, at, _BRACELESS)


# -------------------------------------------------------------------------------------------------------
# RIS: the records are found here, TY to ER line by line, and each is read by rispy on its own, so that a
# record without its ER line or lines outside any record become problems instead of being lost.

# rispy's names: DO, UR, L1 (PDF), L2 (full text); N1, JO, JF, JA, T2, M1, M3, ID, AN.
_RIS_LINK_FIELDS = ("doi", "urls", "file_attachments1", "file_attachments2")
_RIS_TEXT_FIELDS = (
    "notes", "journal_name", "alternate_title3", "alternate_title2", "secondary_title", "note",
    "type_of_work", "id", "accession_number",
)  # fmt: skip

RIS_START = re.compile(r"^TY {1,2}-", re.MULTILINE)
# A RIS tag line as the standard writes it ("AU  - Name"), and with one space as some tools do. The value
# is group 2 without its trailing white space (_ris_value): a lazy value before \s* would try to end at every
# white space of the line, and scan the rest of that run each time (quadratic in a run of spaces and tabs).
_RIS_TAG = re.compile(r"([A-Z][A-Z0-9]) {1,2}-(?: +(.*)|\s*)")
_LINES = re.compile(r"\r\n|\r|\n")

_NO_ER = Phrase(N_("the record does not end with an ER line (the file may be cut short)"))
_NO_TY = Phrase(N_("lines outside a record: a RIS record starts with a TY line"))


def read_ris(text: str) -> list[LibraryEntry | EntryProblem]:
    """Every record from ``TY`` to ``ER``, split here and read by rispy record by record.

    rispy alone (0.10) would lose records silently: a record without ``ER`` is merged into the next one
    (its links added to the next record's) or, at the end of the file, dropped, and a file with one space
    before the dash is not read at all. So the records are found here, each with its first line, the tag
    lines rewritten in the standard spelling, and continuation lines joined to their tag line (rispy fails
    on a continuation of a repeated tag).
    """
    refuse_if_too_many(len(RIS_START.findall(text)))
    items: list[LibraryEntry | EntryProblem] = []
    record: list[str] | None = None
    start = 0
    number = 0
    outside = False
    for line_number, raw in enumerate(_LINES.split(text), 1):
        tag = _RIS_TAG.fullmatch(raw)
        if tag is not None and tag.group(1) == "TY":
            if record is not None:
                items.append(_ris_unclosed(record, start, number))
            number += 1
            record, start, outside = [f"TY  - {_ris_value(tag)}"], line_number, False
        elif record is None:
            if tag is not None and tag.group(1) != "ER" and not outside:
                items.append(EntryProblem(None, line_number, _NO_TY))
                outside = True
        elif tag is not None and tag.group(1) == "ER":
            items.append(_ris_entry(_ris_fields(record), start, number))
            record = None
        elif tag is not None:
            record.append(f"{tag.group(1)}  - {_ris_value(tag)}")
        elif raw.strip():
            record[-1] = f"{record[-1]} {raw.strip()}"
    if record is not None:
        items.append(_ris_unclosed(record, start, number))
    return items


def _ris_value(tag: re.Match[str]) -> str:
    """A tag line's value, without the white space after it."""
    return (tag.group(2) or "").rstrip()


def _ris_fields(record: list[str]) -> dict[str, Any]:
    parsed: list[dict[str, Any]] = rispy.loads("\n".join([*record, "ER  - "]), enforce_list_tags=False)
    return parsed[0] if parsed else {}


def _ris_entry(fields: dict[str, Any], line: int, number: int) -> LibraryEntry:
    return LibraryEntry(
        key=next(field_values(fields, "id"), f"#{number}").strip(),
        arxiv_id=pick_arxiv((), field_values(fields, *_RIS_LINK_FIELDS, *_RIS_TEXT_FIELDS)),
        doi=pick_doi(
            field_values(fields, "doi"),
            field_values(fields, "urls", "file_attachments1", "file_attachments2"),
        ),
        title=plain_text(next(field_values(fields, "title", "primary_title"), "")),
        abstract=plain_text(next(field_values(fields, "abstract", "notes_abstract"), "")),
        line=line,
    )


def _ris_unclosed(record: list[str], line: int, number: int) -> EntryProblem:
    entry = _ris_entry(_ris_fields(record), line, number)
    return EntryProblem(entry.key, line, _NO_ER, entry.title)


# -------------------------------------------------------------------------------------------------------
# CSL-JSON: a JSON array of CSL items (or one item); each object becomes an entry with the line it starts
# on, anything else a problem. JSON that is not CSL-JSON is refused whole.

_CSL_ID_FIELDS = ("number", "archive_location")  # an id alone only when archive or publisher is arXiv
_CSL_LINK_FIELDS = ("DOI", "URL", "id")
_CSL_TEXT_FIELDS = ("number", "archive_location", "note", "container-title")
# Keys that make a JSON object a CSL item; a list with no object that has one is not CSL-JSON.
_CSL_KEYS = frozenset({"id", "type", "title"})

# The shared rules of untrusted JSON: its nesting limit. A key given twice is not refused: exporters do not
# write one, and a library entry keeps what it can read.
_READER = JSONReader(unique_keys=False)
_NOT_OBJECT = Phrase(N_("not a CSL item: an item is an object with a type and a title"))


def read_csl(text: str) -> list[LibraryEntry | EntryProblem]:
    """Every item of the top-level array (or the one item a single object is), each with its line."""
    try:
        document = _READER.loads(text)
    except json.JSONDecodeError as exc:
        raise LibraryFileError(
            Phrase(
                N_("the file is not valid JSON (line {line}, column {column})"),
                line=exc.lineno,
                column=exc.colno,
            ),
            EXPORT,
        ) from None
    except TooDeep as exc:
        raise LibraryFileError(
            Phrase(
                N_("the file is nested too deeply (more than {limit} arrays or objects inside each other)"),
                limit=exc.limit,
            ),
            EXPORT,
        ) from None
    if isinstance(document, list):
        refuse_if_too_many(len(document))
    if isinstance(document, dict):
        located = [(text.count("\n", 0, len(text) - len(text.lstrip())) + 1, document)]
    elif isinstance(document, list):
        located = list(zip(_item_lines(text), document, strict=True))
    else:
        located = []
    if not any(isinstance(item, dict) and _CSL_KEYS & item.keys() for _, item in located):
        if isinstance(document, list) and not document:
            return []
        raise LibraryFileError(
            Phrase(N_("the file is JSON but not CSL-JSON (a list of items with a type and a title)")), EXPORT
        )
    items: list[LibraryEntry | EntryProblem] = []
    for number, (line, item) in enumerate(located, 1):
        if isinstance(item, dict):
            items.append(_csl_entry(item, line, number))
        else:
            items.append(EntryProblem(f"#{number}", line, _NOT_OBJECT))
    return items


def _item_lines(text: str) -> Iterator[int]:
    """The line each element of the (valid) top-level JSON array starts on."""
    decoder = json.JSONDecoder()
    at = _after_space(text, text.index("[") + 1)
    line = 1 + text.count("\n", 0, at)
    while text[at] != "]":
        yield line
        _, end = decoder.raw_decode(text, at)
        after = _after_space(text, end)
        if text[after] == ",":
            after = _after_space(text, after + 1)
        line += text.count("\n", at, after)
        at = after


def _after_space(text: str, at: int) -> int:
    """The index of the first character from ``at`` on that is not JSON white space."""
    while at < len(text) and text[at] in " \t\n\r":
        at += 1
    return at


def _csl_entry(item: dict[str, Any], line: int, number: int) -> LibraryEntry:
    on_arxiv = any(
        v.strip().lower() in ("arxiv", "arxiv.org") for v in field_values(item, "archive", "publisher")
    )
    return LibraryEntry(
        key=next(field_values(item, "id"), f"#{number}").strip(),
        arxiv_id=pick_arxiv(
            field_values(item, *_CSL_ID_FIELDS) if on_arxiv else (),
            field_values(item, *_CSL_LINK_FIELDS, *_CSL_TEXT_FIELDS),
        ),
        doi=pick_doi(field_values(item, "DOI"), field_values(item, "URL")),
        title=plain_text(next(field_values(item, "title"), "")),
        abstract=plain_text(next(field_values(item, "abstract"), "")),
        line=line,
    )
