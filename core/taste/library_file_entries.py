"""What reading a reference library yields, shared by the three format readers (``core.taste.library_file``).

A usable entry is a :class:`LibraryEntry`, an unusable one an :class:`EntryProblem` saying why, and a file
that is not a library at all is refused with a :class:`LibraryFileError`. The helpers here turn a format's
field values into an entry the same way for BibTeX, RIS and CSL-JSON: the arXiv id and the DOI picked from
the fields in priority order, titles and abstracts reduced to plain text, and the entry count limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from core.follows.normalise import strip_tex
from core.languages import N_, Phrase, Translator, Worded
from core.taste.library_ids import arxiv_id_in, bare_arxiv_id, doi_in_url, normalise_doi

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
