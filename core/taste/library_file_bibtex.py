"""BibTeX library exports read into entries (``core.taste.library_file.read_library`` calls
:func:`read_bibtex`).

bibtexparser splits the file into blocks; each entry block becomes a :class:`LibraryEntry`, and each block
it cannot use (a brace or quote left open, fields run together by a missing comma, an ``@type`` without its
brace) an :class:`EntryProblem` naming its line. Zotero's escapes are undone before ``strip_tex`` so that
titles and abstracts compare with the stored papers'.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

from bibtexparser.entrypoint import parse_string
from bibtexparser.middlewares.enclosing import REMOVED_ENCLOSING_KEY, RemoveEnclosingMiddleware
from bibtexparser.model import Entry, ImplicitComment, ParsingFailedBlock

from core.languages import N_, Phrase
from core.taste.library_file_entries import (
    EXPORT,
    EntryProblem,
    LibraryEntry,
    LibraryFileError,
    pick_arxiv,
    pick_doi,
    plain_text,
    refuse_if_too_many,
)

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
