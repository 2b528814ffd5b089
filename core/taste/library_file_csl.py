"""CSL-JSON library exports read into entries (``core.taste.library_file.read_library`` calls
:func:`read_csl`).

The file is a JSON array of CSL items (or one item); each object becomes a :class:`LibraryEntry` with the
line it starts on, anything else an :class:`EntryProblem`. JSON that is not CSL-JSON is refused whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from core.json_input import JSONReader, TooDeep
from core.languages import N_, Phrase
from core.taste.library_file_entries import (
    EXPORT,
    EntryProblem,
    LibraryEntry,
    LibraryFileError,
    field_values,
    pick_arxiv,
    pick_doi,
    plain_text,
    refuse_if_too_many,
)

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
