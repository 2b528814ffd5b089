"""Author follows against real author names: the query as a user types it, the name as a paper stores it.

Every stored name below is copied from the recorded corpus, with its TeX escapes as the source has them, and
decoded the way ingest decodes it (``core.tex_accents.decode_tex``):

- most come from ``<dc:creator>`` in ``tests/corpus/arxiv-rss/aioarxiv_rss_mock_feed.xml`` (one day of arXiv,
  1,504 papers); several pairs are two authors of that same day whom a looser rule confused (Jia Li and
  Jia-Ning Li) or whom a stricter rule would tell apart although they are surely one person (Dong-Lai Feng
  and Donglai Feng both appear);
- "Last, First" names come from ``shared/corpus/arxiv-oai`` (OAI-PMH ``dc:creator`` and arXivRaw
  ``keyname``/``forenames``), the others marked "snapshot" or "api" from ``shared/corpus/arxiv-snapshot``
  and ``shared/corpus/arxiv-api``.

The rules themselves are documented in ``docs/follow-language.md`` ("Names").
"""

from __future__ import annotations

import pytest

from core.follows.query import parse
from core.tex_accents import decode_tex
from core.values import PaperIn
from tests.support.name_pairs import NAME_PAIRS


def _paper(display: str) -> PaperIn:
    return PaperIn(
        arxiv_id="2411.17700",
        version=1,
        title="t",
        abstract="a",
        authors=(decode_tex(display),),
        categories=("cs.LG",),
    )


def _query(name: str) -> str:
    # Quote as a user would; a double quote inside (a TeX umlaut) needs its backslash, which TeX has anyway.
    return f'au:"{name}"'


@pytest.mark.parametrize(
    ("query", "stored", "expected"),
    [pytest.param(q, s, e, id=f"{q} ~ {s}: {why}") for q, s, e, why in NAME_PAIRS],
)
def test_author_query_against_a_real_name(query: str, stored: str, expected: bool) -> None:
    found = parse(_query(query)).evaluate(_paper(stored))
    assert (found is not None) is expected
    if expected:
        # The reason names the author as the paper spells it, after TeX decoding.
        assert found == (f"author {decode_tex(stored)}",)


def test_the_table_is_large_and_two_sided() -> None:
    assert len(NAME_PAIRS) >= 40
    assert sum(e for _, _, e, _ in NAME_PAIRS) >= 20
    assert sum(not e for _, _, e, _ in NAME_PAIRS) >= 20
    assert len({(q, s) for q, s, _, _ in NAME_PAIRS}) == len(NAME_PAIRS)


def test_every_stored_name_is_in_the_recorded_corpus() -> None:
    """Guards the claim of the module docstring for the names taken from the feed in this repository."""
    from tests.conftest import BIG_FEED

    feed = BIG_FEED.read_text(encoding="utf-8").replace("&quot;", '"')
    elsewhere = {
        "Amari, Shun-Ichi",
        "Chun, Eung Jin",
        "Balcan, Maria-Florina",
        "Bettler, M. -O.",
        "J.C.S. Rocha",
        "C.-P. Yuan",
        r"C. Bal\'azs",
        r"Mikkel {\O}bro",
        r"Tom\'a\v{s} Vina\v{r}",
        r"Mateusz {\L}\k{a}cki",
        r"Kri\v{s}j\=anis Pr\=usis",
    }
    missing = {s for _, s, _, _ in NAME_PAIRS if s not in elsewhere and s not in feed}
    assert not missing
