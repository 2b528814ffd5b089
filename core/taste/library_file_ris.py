"""RIS library exports read into entries (``core.taste.library_file.read_library`` calls :func:`read_ris`).

The records are found here, from ``TY`` to ``ER`` line by line, and each is read by rispy on its own, so
that a record without its ``ER`` line or lines outside any record become problems instead of being lost.
"""

from __future__ import annotations

import re
from typing import Any

import rispy

from core.languages import N_, Phrase
from core.taste.library_file_entries import (
    EntryProblem,
    LibraryEntry,
    field_values,
    pick_arxiv,
    pick_doi,
    plain_text,
    refuse_if_too_many,
)

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
