"""Citations of stored papers: BibTeX entries and the Highwire Press ``<meta>`` tags of a paper page.

Pure: values in, text out; no store, no network. The shell serves them (``papertrail.web.bibtex``:
``GET /papers/{id}.bib``, a subscriber's ``GET /manage/{token}/papers.bib``), the paper page prints
:func:`highwire_tags`, and digests link :func:`bibtex_url`.

**One entry per paper, for its newest stored version**::

    @misc{arXiv:2411.17700,
      title = {...},
      author = {Zeng Li and Ève Dupont and ...},
      year = {2024},
      month = nov,
      eprint = {2411.17700},
      archivePrefix = {arXiv},
      primaryClass = {cs.LG},
      doi = {10.1000/example},
      url = {https://arxiv.org/abs/2411.17700},
      version = {2},
      note = {arXiv:2411.17700v2},
    }

* The cite key is ``arXiv:`` and the id without version (``arXiv:hep-th/9901001`` for an old-style id):
  stable across revisions, unique, and what people already write in papers.
* ``year``/``month`` are the newest version's announcement (UTC), as arXiv's and Zotero's own arXiv
  exports date an e-print by its latest version; a version without a stored date falls back to the month in
  the id (``2411.`` is November 2024, v1's month), else the fields are left out.
* ``doi`` is the version's DOI when it has one that is safe in a verbatim field (the first of several;
  one with a brace, backslash, ``%``, ``#``, ``~``, ``^`` or space is left out); ``primaryClass`` the first
  (primary) category. ``url`` is arXiv's abstract page without version, so it always shows the newest.

**Escaping.** Stored titles and names are Unicode with the TeX that arXiv's metadata keeps
(``core.tex_accents``
decodes accents and ``\\&``-style escapes, and leaves math and other control words alone). So a value is
written as TeX: math (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``), control words (``\\mathbb``,
``\\textrm``) and balanced brace groups (``{BERT}``) are kept as the submitter wrote them; everything
else is text, whose specials are escaped: ``& % $ # _`` as ``\\&`` etc., ``~ ^ \\`` as
``\\textasciitilde{}``, ``\\textasciicircum{}``, ``\\textbackslash{}``, and a brace without its partner
(``\\{`` too) as ``\\textbraceleft{}`` / ``\\textbraceright{}``. Braces are therefore always balanced the way
BibTeX counts them (it ignores backslashes), and no title can end its field or the entry. TeX that could
reach outside the document is never kept: math containing ``^^`` (TeX's character-code notation), a bare
``%`` or ``#``, or unbalanced braces, and the control words of :data:`UNSAFE_WORDS` (file and shell
access, definitions, catcodes, job control) are written as text instead. Non-ASCII characters stay UTF-8
(biber/biblatex read it; classic BibTeX with ``\\usepackage[utf8]{inputenc}`` does too). Control
characters are removed and runs of white space become one space.

A lone ``$`` cannot be told from math: ``core.tex_accents`` decodes arXiv's ``\\$5`` to ``$5``, so two
such
amounts in one title read as one math span. Authors are written as arXiv gives them ("Zeng Li"); BibTeX
takes the last word as the surname. A name containing the word ``and`` (``Smith and Wesson Collaboration``)
is wrapped in braces, else BibTeX would read two people.

**Meta tags** (:func:`highwire_tags`): what Zotero's "Embedded Metadata" translator and Google Scholar
read. See docs/status-page.md#citations-bibtex-and-zotero for what each tag is for and why
``citation_journal_title`` is not one of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol
from urllib.parse import quote

from core.escaping import strip_control

__all__ = [
    "MAX_HISTORY_PAPERS",
    "MEDIA_TYPE",
    "UNSAFE_PREFIXES",
    "UNSAFE_WORDS",
    "Citable",
    "bibtex_name",
    "bibtex_path",
    "bibtex_url",
    "bibtex_value",
    "cite_key",
    "entry",
    "file_name",
    "first_doi",
    "highwire_tags",
]

# What a .bib download is served as.
MEDIA_TYPE = "application/x-bibtex; charset=utf-8"
# Papers in one history download (the manage page's papers.bib): about 5 MB of BibTeX at arXiv's usual
# author counts. A subscriber with more gets the most recently sent ones and a closing comment that says
# the file stops there.
MAX_HISTORY_PAPERS = 10_000

ARXIV = "https://arxiv.org"
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")

# arXiv ids as the store keeps them (no version): 2411.17700, 0704.0001, hep-th/9901001, math.AG/0211159.
_ARXIV_ID = re.compile(r"(?:\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7})")
_NEW_STYLE = re.compile(r"(\d{2})(\d{2})\.\d{4,5}")
_OLD_STYLE = re.compile(r"[a-z][a-z\-]*(?:\.[A-Z]{2})?/(\d{2})(\d{2})\d{3}")
_CATEGORY = re.compile(r"[A-Za-z][A-Za-z0-9.\-]{0,31}")
# A DOI that is safe in a verbatim BibTeX field and a <meta> tag: 10.<registrant>/<suffix>, no character
# that BibTeX or a LaTeX URL macro would read as syntax.
_DOI = re.compile(r"10\.\d{4,9}/[^\s{}\\%#~^\"]+")

# Control words never kept: they read or write files, run commands, define or redefine macros, change
# catcodes, build control sequences from text, or end the job. Any word starting with one of
# UNSAFE_PREFIXES is treated the same (\openout, \pdfshellescape, \directlua, \everypar, \newcommand ...).
UNSAFE_WORDS = frozenset(
    {
        "input", "include", "includeonly", "InputIfFileExists", "IfFileExists", "read", "readline",
        "special", "catcode", "uccode", "lccode", "mathcode", "sfcode", "delcode",
        "def", "edef", "gdef", "xdef", "let", "futurelet", "global", "long", "outer", "protected",
        "csname", "endcsname", "expandafter", "noexpand", "string", "scantokens", "detokenize",
        "unexpanded", "lowercase", "uppercase", "afterassignment", "aftergroup", "usepackage",
        "RequirePackage", "documentclass", "begin", "end", "dump", "batchmode", "nonstopmode",
        "scrollmode", "errorstopmode", "shipout", "output", "jobname", "immediate", "message",
        "errmessage", "show", "showthe", "showbox", "showlists", "tracingonline",
    }
)  # fmt: skip
UNSAFE_PREFIXES = (
    "write", "open", "close", "pdf", "lua", "directlua", "latelua", "every", "new", "renew", "provide",
    "Declare", "end", "input", "include", "tracing", "XeTeX", "shell", "Shell",
)  # fmt: skip

_TOKEN = re.compile(
    r"(?P<math>\$\$.+?\$\$|\$[^$]+?\$|\\\(.*?\\\)|\\\[.*?\\\])"
    r"|(?P<word>\\[A-Za-z]+)"
    r"|(?P<symbol>\\[ -@\[-`{-~])"  # \, \\ \{ \' ...: a backslash and one ASCII non-letter
    r"|(?P<open>\{)|(?P<close>\})"
    r"|(?P<char>[&%$#_~^\\])",
    re.DOTALL,
)
_TEXT_ESCAPES = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
    "{": r"\textbraceleft{}",
    "}": r"\textbraceright{}",
}
_PLAIN = re.compile(r"[&%$#_~^\\{}]")
_WORDS_IN_MATH = re.compile(r"\\([A-Za-z]+)")
_BARE_IN_MATH = re.compile(r"(?<!\\)[%#]")
_AND = re.compile(r"(?:^|\s)(?:and|others)(?:\s|$)", re.IGNORECASE)


class Citable(Protocol):
    """What a citation needs of a stored version (``core.models.Version`` is one)."""

    @property
    def paper_id(self) -> str: ...
    @property
    def number(self) -> int: ...
    @property
    def title(self) -> str: ...
    @property
    def abstract(self) -> str: ...
    @property
    def authors(self) -> Sequence[str]: ...
    @property
    def categories(self) -> Sequence[str]: ...
    @property
    def doi(self) -> str | None: ...
    @property
    def announced_at(self) -> datetime | None: ...


# -- names and places ------------------------------------------------------------------------------------


def check_id(arxiv_id: str) -> str:
    """``arxiv_id`` when it is an arXiv id without version; ValueError otherwise (keys, headers, paths)."""
    if not _ARXIV_ID.fullmatch(arxiv_id):
        raise ValueError(f"not an arXiv id without version: {arxiv_id!r}")
    return arxiv_id


def cite_key(arxiv_id: str) -> str:
    """The entry's cite key: ``arXiv:2411.17700`` (the same for every version of the paper)."""
    return "arXiv:" + check_id(arxiv_id)


def bibtex_path(arxiv_id: str) -> str:
    """Where PaperTrail serves a paper's entry: ``/papers/2411.17700.bib``, ``/papers/hep-th/9901001.bib``."""
    return "/papers/" + quote(arxiv_id, safe="/") + ".bib"


def bibtex_url(public_url: str, arxiv_id: str) -> str:
    """:func:`bibtex_path` on the site at ``public_url`` (``PAPERTRAIL_PUBLIC_URL``)."""
    return public_url.rstrip("/") + bibtex_path(arxiv_id)


def file_name(arxiv_id: str) -> str:
    """The download's file name: ``2411.17700.bib``; an old-style id's slash becomes ``_``."""
    return check_id(arxiv_id).replace("/", "_") + ".bib"


def first_doi(raw: str | None) -> str | None:
    """The first DOI in ``raw`` that is safe to print verbatim (arXiv's field may list several), or None."""
    for token in (raw or "").split():
        if _DOI.fullmatch(token):
            return token
    return None


# -- values ----------------------------------------------------------------------------------------------


def _unsafe_word(name: str) -> bool:
    return name in UNSAFE_WORDS or name.startswith(UNSAFE_PREFIXES)


def _balanced(text: str) -> bool:
    """Braces balanced as BibTeX counts them: every ``{`` and ``}``, backslash or not."""
    depth = 0
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _safe_math(span: str) -> bool:
    return (
        _balanced(span)
        and "^^" not in span
        and not _BARE_IN_MATH.search(span)
        and not any(_unsafe_word(name) for name in _WORDS_IN_MATH.findall(span))
    )


def _as_text(text: str) -> str:
    return _PLAIN.sub(lambda m: _TEXT_ESCAPES[m.group(0)], text)


def bibtex_value(text: str) -> str:
    """``text`` as the inside of a braced BibTeX field: TeX kept, specials escaped (module docstring)."""
    text = " ".join(strip_control(text).split())
    tokens = [(m.lastgroup or "", m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    # Pair the braces outside math: a pair is a TeX group and stays; a brace without a partner is text.
    kept: set[int] = set()
    stack: list[int] = []
    for index, (kind, _, _, _) in enumerate(tokens):
        if kind == "open":
            stack.append(index)
        elif kind == "close" and stack:
            kept.update((stack.pop(), index))
    out: list[str] = []
    position = 0
    for index, (kind, value, start, end) in enumerate(tokens):
        out.append(text[position:start])
        position = end
        if kind == "math":
            out.append(value if _safe_math(value) else _as_text(value))
        elif kind == "word":
            out.append(_as_text(value) if _unsafe_word(value[1:]) else value)
        elif kind == "symbol":
            # \{ and \} are TeX's literal braces, which BibTeX would count as group braces; \( \) \[ \]
            # outside a math span open or close math that is not there.
            if value[1] in "{}":
                out.append(_TEXT_ESCAPES[value[1]])
            else:
                out.append(_as_text(value) if value[1] in "()[]" else value)
        elif kind in ("open", "close"):
            out.append(value if index in kept else _as_text(value))
        else:
            out.append(_as_text(value))
    out.append(text[position:])
    result = "".join(out)
    if not _balanced(result):  # cannot happen: every brace written is paired or escaped
        raise AssertionError(f"unbalanced BibTeX value from {text!r}")
    return result


def bibtex_name(name: str) -> str:
    """One author for an ``author`` field: escaped, and braced when it contains the word ``and``."""
    value = bibtex_value(name)
    return "{" + value + "}" if _AND.search(value) else value


# -- dates -----------------------------------------------------------------------------------------------


def _id_month(arxiv_id: str) -> tuple[int, int] | None:
    """The year and month in an id (v1's submission month): ``2411.17700`` -> (2024, 11)."""
    match = _NEW_STYLE.fullmatch(arxiv_id) or _OLD_STYLE.fullmatch(arxiv_id)
    if match is None:
        return None
    yy, mm = int(match.group(1)), int(match.group(2))
    if not 1 <= mm <= 12:
        return None
    # Old-style ids began in August 1991; new-style ids in April 2007.
    return (1900 + yy if yy >= 91 else 2000 + yy), mm


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC) if moment.tzinfo else moment


def _meta_date(version: Citable | None, arxiv_id: str) -> str | None:
    """``YYYY/MM/DD`` of the version's announcement, else ``YYYY/MM`` from the id, else None."""
    if version is not None and version.announced_at is not None:
        return _utc(version.announced_at).strftime("%Y/%m/%d")
    month = _id_month(arxiv_id)
    return f"{month[0]:04d}/{month[1]:02d}" if month else None


# -- the two outputs -------------------------------------------------------------------------------------


def entry(version: Citable) -> str:
    """The BibTeX entry of ``version`` (a paper's newest stored version), ending in a newline."""
    arxiv_id = check_id(version.paper_id)
    if version.announced_at is not None:
        moment = _utc(version.announced_at)
        year_month: tuple[int, int] | None = (moment.year, moment.month)
    else:
        year_month = _id_month(arxiv_id)
    authors = [bibtex_name(name) for name in version.authors if name.strip()]
    fields: list[tuple[str, str]] = [("title", "{" + bibtex_value(version.title) + "}")]
    if authors:
        fields.append(("author", "{" + " and ".join(authors) + "}"))
    if year_month:
        fields += [("year", f"{{{year_month[0]}}}"), ("month", MONTHS[year_month[1] - 1])]
    fields += [("eprint", "{" + arxiv_id + "}"), ("archivePrefix", "{arXiv}")]
    primary = version.categories[0] if version.categories else ""
    if _CATEGORY.fullmatch(primary):
        fields.append(("primaryClass", "{" + primary + "}"))
    doi = first_doi(version.doi)
    if doi:
        fields.append(("doi", "{" + doi + "}"))
    fields += [
        ("url", "{" + f"{ARXIV}/abs/{arxiv_id}" + "}"),
        ("version", f"{{{version.number}}}"),
        ("note", "{" + f"arXiv:{arxiv_id}v{version.number}" + "}"),
    ]
    body = "".join(f"  {name} = {value},\n" for name, value in fields)
    return f"@misc{{{cite_key(arxiv_id)},\n{body}}}\n"


def highwire_tags(versions: Sequence[Citable]) -> list[tuple[str, str]]:
    """The ``<meta name content>`` pairs of a paper page, for its stored versions (oldest first).

    Plain values: the template escapes them for the attribute. Empty for a paper without versions.
    """
    if not versions:
        return []
    newest = versions[-1]
    arxiv_id = newest.paper_id
    first = next((v for v in versions if v.number == 1), None)

    def clean(text: str) -> str:
        return " ".join(strip_control(text).split())

    tags = [("citation_title", clean(newest.title))]
    tags += [("citation_author", clean(name)) for name in newest.authors if name.strip()]
    published = _meta_date(first, arxiv_id)
    if published:
        tags += [("citation_date", published), ("citation_publication_date", published)]
    online = _meta_date(newest, arxiv_id) if newest.announced_at else None
    if online:
        tags.append(("citation_online_date", online))
    path = quote(arxiv_id, safe="/")
    tags += [
        ("citation_arxiv_id", arxiv_id),
        ("citation_technical_report_institution", "arXiv"),
        ("citation_technical_report_number", f"arXiv:{arxiv_id}"),
        ("citation_pdf_url", f"{ARXIV}/pdf/{path}"),
        ("citation_abstract_html_url", f"{ARXIV}/abs/{path}"),
        ("citation_public_url", f"{ARXIV}/abs/{path}"),
    ]
    doi = first_doi(newest.doi)
    if doi:
        tags.append(("citation_doi", doi))
    if newest.abstract.strip():
        tags.append(("citation_abstract", clean(newest.abstract)))
    return tags
