"""arXiv ids and DOIs found in the fields of a reference library's entries (core.taste.library_file).

Reference managers keep a paper's arXiv id in many places: a dedicated field (BibTeX ``eprint``,
Mendeley's ``arxivId``), a link (``http://arxiv.org/abs/2306.03564v2``, ``.../pdf/2306.03564.pdf``),
arXiv's DataCite DOI (``10.48550/arXiv.2306.03564``) or free text (``arXiv preprint arXiv:2306.03564``,
``arXiv:2306.03564 [cs]``). Every finder here returns the id in the form the store keys papers by:

* no version (``2306.03564v2`` -> ``2306.03564``);
* an old-style id without its subject class, as arXiv itself writes it (``math.GT/0309136`` ->
  ``math/0309136``; ``core.follows.query`` reads ``id:`` the same way), its archive in lower case;
* only ids that can exist: a new-style id's month is 01-12 from 0704 (April 2007) on, with four digits
  after the dot until 1412 and five from 1501; an old-style id's month is 01-12 from 9108 to 0703. So a
  page range or a date in a note (``1234.56789``) is never taken for an id.

DOIs are lower-cased (DOIs are case-insensitive) and have no resolver prefix (``https://doi.org/``,
``doi:``). Pure and deterministic.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["arxiv_doi_id", "arxiv_id_in", "bare_arxiv_id", "doi_in_url", "normalise_doi"]

# The id with an optional version; groups: new-style id, or old-style archive and number.
_ID = (
    r"(?:(?P<new>\d{4}\.\d{4,5})|(?P<archive>[a-z]+(?:-[a-z]+)*)(?:\.[a-z]{2})?/(?P<old>\d{7}))"
    r"(?:v\d+)?(?!\d)"
)
# An id alone, maybe with arXiv's prefix and a primary category after it ("arXiv:0704.0001 [hep-ph]").
_BARE = re.compile(rf"(?:arxiv\s*:\s*)?{_ID}(?:\s*\[[\w.\-]+\])?", re.IGNORECASE)
# A link to an abstract, PDF or HTML page on arxiv.org or a mirror (export.arxiv.org), not on a look-alike
# host (notarxiv.org): nothing word-like may precede the host name.
_URL = re.compile(rf"(?<![\w-])arxiv\.org/(?:abs|pdf|html)/{_ID}", re.IGNORECASE)
# arXiv's DataCite DOIs, 10.48550/arXiv.<id>, for new-style and old-style ids alike.
_DOI = re.compile(rf"(?<![\w.])10\.48550/arxiv\.{_ID}", re.IGNORECASE)
# Free text: "arXiv:2306.03564", "arXiv: hep-th/9901001", "arXiv preprint 2306.03564", "arXiv e-print ...".
_TEXT = re.compile(rf"(?<![\w-])arxiv(?:\s+(?:preprint|e-?prints?))?\s*:?\s*{_ID}", re.IGNORECASE)
_DOI_SYNTAX = re.compile(r"10\.\d{4,9}/\S+")
_DOI_PREFIX = re.compile(r"^(?:doi\s*:\s*|(?:https?://)?(?:dx\.|www\.)?doi\.org/)", re.IGNORECASE)
_DOI_IN_URL = re.compile(r"(?:dx\.|www\.)?doi\.org/(10\.[^\s?#]+)", re.IGNORECASE)


def _canonical(m: re.Match[str]) -> str | None:
    """The id a match names, or None when no arXiv id can have that number (see the module's notes)."""
    new = m.group("new")
    if new is not None:
        yymm = int(new[:4])
        digits = len(new) - 5
        if not 1 <= yymm % 100 <= 12 or yymm < 704 or digits != (4 if yymm < 1501 else 5):
            return None
        return new
    number = m.group("old")
    yy, mm = int(number[:2]), int(number[2:4])
    if not 1 <= mm <= 12 or not (yy > 91 or (yy == 91 and mm >= 8) or yy < 7 or (yy == 7 and mm <= 3)):
        return None
    return f"{m.group('archive').lower()}/{number}"


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    for m in pattern.finditer(text):
        found = _canonical(m)
        if found is not None:
            return found
    return None


def bare_arxiv_id(value: str) -> str | None:
    """The id when ``value`` is nothing but one (``2306.03564``, ``arXiv:2306.03564v2``, ``hep-th/9901001``).

    For fields that hold an arXiv id and nothing else: BibTeX ``eprint`` beside ``archivePrefix = {arXiv}``,
    Mendeley's ``arxivId``.
    """
    m = _BARE.fullmatch(value.strip())
    return None if m is None else _canonical(m)


def arxiv_doi_id(doi: str) -> str | None:
    """The id in arXiv's DOI ``10.48550/arXiv.2306.03564`` (any case, with or without a resolver prefix)."""
    return _first(_DOI, doi)


def arxiv_id_in(text: str) -> str | None:
    """The first arXiv id named in ``text`` by an arxiv.org link, arXiv's DOI or an ``arXiv:`` prefix.

    A bare number is not enough here (``note = {2306.03564}`` may be anything); the fields that hold only
    an id go through :func:`bare_arxiv_id`.
    """
    if "arxiv" not in text.lower():
        return None  # the common case: a note or a journal name without any
    return _first(_URL, text) or _first(_DOI, text) or _first(_TEXT, text)


def normalise_doi(value: str) -> str | None:
    """``value`` as a DOI: lower case, without ``doi:`` or a resolver (``https://doi.org/``); else None.

    A DOI link's percent escapes are decoded (``10.1002/%28SICI%29...`` -> ``10.1002/(sici)...``).
    """
    text = value.strip()
    if _DOI_PREFIX.match(text):
        text = unquote(_DOI_PREFIX.sub("", text))
    text = text.strip().rstrip(".")
    return text.lower() if _DOI_SYNTAX.fullmatch(text) else None


def doi_in_url(url: str) -> str | None:
    """The DOI a ``doi.org`` link resolves, normalised; None for any other link."""
    m = _DOI_IN_URL.search(url)
    return None if m is None else normalise_doi(unquote(m.group(1)))
