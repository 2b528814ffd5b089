"""The recorded corpus's versions as BibTeX: parsed, stored, de-TeXed."""

from __future__ import annotations

import re
from functools import cache

from pybtex.bibtex.utils import split_name_list
from pybtex.database import BibliographyData
from pybtex.database.input.bibtex import Parser

from core.escaping import strip_control
from core.values import PaperIn
from ingest.arxiv_api_parse import parse_api
from ingest.arxiv_oai_parse import parse_oai
from ingest.arxiv_rss_parse import parse_feed
from ingest.snapshot_parse import SnapshotRecord, iter_snapshot, open_snapshot
from tests.conftest import BIG_FEED, CORPUS

# Math as core.tex_accents leaves it in stored text; the escapes core.papers.citations documents for
# everything else.
_MATH = r"\$\$.+?\$\$|\$[^$]+?\$|\\\(.*?\\\)|\\\[.*?\\\]"


_ESCAPES = {
    r"\&": "&",
    r"\%": "%",
    r"\$": "$",
    r"\#": "#",
    r"\_": "_",
    r"\textasciitilde{}": "~",
    r"\textasciicircum{}": "^",
    r"\textbackslash{}": "\\",
    r"\textbraceleft{}": "{",
    r"\textbraceright{}": "}",
}


_DETEX = re.compile("|".join([*(re.escape(e) for e in _ESCAPES), f"(?P<math>{_MATH})"]), re.DOTALL)


def detex(value: str) -> str:
    """A BibTeX field's text as it was stored: escapes undone left to right, math copied as it is."""
    return _DETEX.sub(lambda m: m.group(0) if m.group("math") else _ESCAPES[m.group(0)], value)


def stored(text: str) -> str:
    """What an entry promises to keep of a stored value: control characters and extra spaces go."""
    return " ".join(strip_control(text).split())


def parse_one(text: str) -> tuple[str, dict[str, str], list[str]]:
    """The key, fields (raw, as BibTeX reads them) and author names of the one entry in ``text``.

    The author field is kept raw (no person parsing) and split into names by BibTeX's own rule.
    """
    # pybtex's BibTeX parser itself: parse_string would look the plugin up again on every call.
    data: BibliographyData = Parser(person_fields=()).parse_string(text)
    [(key, parsed)] = data.entries.items()
    authors = []
    for name in split_name_list(parsed.fields["author"]) if "author" in parsed.fields else []:
        # A name with the word "and" in it is braced as a whole: one person, not two.
        authors.append(name[1:-1] if name.startswith("{") and name.endswith("}") else name)
    return key, dict(parsed.fields), authors


@cache
def corpus_versions() -> tuple[PaperIn, ...]:
    """Every version the recorded corpus yields, from four sources."""
    rss = parse_feed(BIG_FEED.read_bytes()).items
    oai = parse_oai((CORPUS / "arxiv-oai" / "litpuvn_ListRecords_arXivRaw_from2016-10-20.xml").read_bytes())
    api: list[PaperIn] = []
    for body in sorted((CORPUS / "arxiv-api" / "arxivpy-2026-golden-bodies").glob("q_*.xml")):
        api += parse_api(body.read_bytes()).entries
    for body in sorted((CORPUS / "arxiv-api" / "arxivpy-2026-golden-bodies").glob("id_*-ph_*.xml")):
        api += parse_api(body.read_bytes()).entries
    with open_snapshot(
        CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"
    ) as f:
        snapshot = [v for r in iter_snapshot(f) if isinstance(r, SnapshotRecord) for v in r.versions]
    return (*rss, *(v for r in oai.records for v in r.versions), *api, *snapshot)
