"""Author follows against real author names: the query as a user types it, the name as a paper stores it.

Every stored name below is copied from the recorded corpus, with its TeX escapes as the source has them, and
decoded the way ingest decodes it (``core.papers.tex_accents.decode_tex``):

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
from core.papers.tex_accents import decode_tex
from core.values import PaperIn

# (query as typed after au:, stored display name (raw, as in the corpus), match expected, what it shows)
NAME_PAIRS: list[tuple[str, str, bool, str]] = [
    # Accents and TeX escapes fold away on both sides.
    ("Remy", r"Benjamin R\'emy", True, "acute accent from TeX"),
    ("Kadioglu", r"Serdar Kad{\i}o\u{g}lu", True, "dotless i and breve"),
    ("Serdar Kadıoğlu", r"Serdar Kad{\i}o\u{g}lu", True, "typed with the accents"),
    ("Selcuk", r"K. Sel\c{c}uk", True, "cedilla"),
    ("Francoise Combes", r"Fran\c{c}oise Combes", True, "cedilla in the given name"),
    ("Jaroslaw Zygierewicz", r"Jaros{\l}aw \.Zygierewicz", True, "ł and Ż"),
    ("Radu Ioan Bot", r"Radu I. Bo\c{t}", True, "middle initial, t with cedilla"),
    ("Loic Herviou", r"Lo\"ic Herviou", True, "diaeresis"),
    ("Vavrycuk", r"V\'aclav Vavry\v{c}uk", True, "caron"),
    ("Rasmus Marak", r"Rasmus Mar{\aa}k", True, "å"),
    ("Mikkel Obro", r"Mikkel {\O}bro", True, "Ø (snapshot)"),
    ("Tomas Vinar", r"Tom\'a\v{s} Vina\v{r}", True, "several escapes (snapshot)"),
    ("Lacki", r"Mateusz {\L}\k{a}cki", True, "Ł and ogonek (OAI)"),
    ("Krisjanis Prusis", r"Kri\v{s}j\=anis Pr\=usis", True, "macrons (OAI)"),
    (r"C. Bal\'azs", r"C. Bal\'azs", True, "TeX pasted into the query (snapshot)"),
    (r"G\"ur", r"Laura Vana-G\"ur", False, "a query escape: Gür is not the surname Vana-Gür"),
    (r"Vana-G\"ur", r"Laura Vana-G\"ur", True, "the whole hyphenated surname, escape in the query"),
    # "Last, First" is "First Last", on either side.
    ("Zdeborova, Lenka", r"Lenka Zdeborov\'a", True, "comma form in the query"),
    ("Shun-ichi Amari", "Amari, Shun-Ichi", True, "comma form as OAI stores it"),
    ("Eung Jin Chun", "Chun, Eung Jin", True, "arXivRaw keyname, forenames"),
    ("Eung-Jin Chun", "Chun, Eung Jin", True, "hyphen in the query, space in the paper"),
    # Hyphenated given names are one name: no stopping inside them, but spellings and initials agree.
    ("Jia Li", "Jia Li", True, "the author Jia Li of the feed"),
    ("Jia Li", "Jia-Ning Li", False, "a different author of the same day"),
    ("Jia Li", "Jia-Wen Li", False, "and a third one"),
    ("Jia-Wen Li", "Jia-Ning Li", False, "same first part, different name"),
    ("J. Li", "Jia-Ning Li", True, "one initial for the whole name"),
    ("J.-N. Li", "Jia-Ning Li", True, "the initials of both parts"),
    ("Jianing Li", "Jia-Ning Li", True, "written in one piece"),
    ("Jia Ning Li", "Jia-Ning Li", True, "space instead of hyphen"),
    ("Yu Wang", "Yu-Xiang Wang", False, "Yu Wang is not Yu-Xiang Wang"),
    ("Y.-X. Wang", "Yu-Xiang Wang", True, "compound initials"),
    ("Kai Chang", "Kai-Wei Chang", False, "a prefix of a compound name"),
    ("Bin Yang", "Gao-Bin Yang", False, "was matched before: 'bin' is also a particle"),
    ("Bin Yang", "Sean Bin Yang", True, "the typed Bin may be the particle: surname 'Bin Yang'"),
    ("Chien-Yu Huang", "Chien-yu Huang", True, "case after the hyphen"),
    ("Hungyi Lee", "Hung-yi Lee", True, "run together"),
    ("Donglai Feng", "Dong-Lai Feng", True, "both spellings appear in the same feed"),
    ("Jiajun Wu", "Jia-Jun Wu", True, "both spellings appear in the same feed"),
    ("Yanpei Cao", "Yan-Pei Cao", True, "both spellings appear in the same feed"),
    ("J.-P. Brantut", "Jean-Philippe Brantut", True, "French compound name, initials"),
    ("Jean Brantut", "Jean-Philippe Brantut", False, "Jean is not Jean-Philippe"),
    ("Philippe Brantut", "Jean-Philippe Brantut", False, "nor is Philippe"),
    ("Maria-Florina Balcan", "Balcan, Maria-Florina", True, "compound name, comma form (OAI)"),
    ("Maria Balcan", "Balcan, Maria-Florina", False, "part of a compound name"),
    ("M.-O. Bettler", "Bettler, M. -O.", True, "OAI writes the hyphen after a space"),
    ("O. Bettler", "Bettler, M. -O.", False, "the second initial alone"),
    ("C.-P. Yuan", "C.-P. Yuan", True, "compound initials on both sides (snapshot)"),
    ("Xin Wang", "Xin-De Wang", False, "a particle-looking part inside a compound name"),
    ("Cheng Lin", "C. -J. David Lin", False, "C.-J. stands for a two-part name"),
    ("Jose Rocha", "J.C.S. Rocha", True, "dotted initials without hyphens are three names (OAI)"),
    ("J. C. S. Rocha", "J.C.S. Rocha", True, "spaced or not"),
    # Middle names and initials.
    ("James Matthew Rehg", "James M. Rehg", True, "middle name against its initial"),
    ("A. J. Bunker", "Andrew J. Bunker", True, "initials for both given names"),
    ("C. Johnson", "Calvin W. Johnson", True, "the middle initial left out"),
    ("Kevin Johnson", "Calvin W. Johnson", False, "a different first name"),
    ("P. G. Kevrekidis", "Panayotis G. Kevrekidis", True, "initials"),
    ("G. Kevrekidis", "Panayotis G. Kevrekidis", False, "the first name may not be skipped"),
    ("Stan Li", "Stan Z. Li", True, "middle initial left out"),
    ("Z. Li", "Stan Z. Li", False, "the middle initial alone"),
    ("Marcel van Gerven", "Marcel A J van Gerven", True, "two undotted middle initials"),
    ("Phong Nguyen", "Phong Ha Nguyen", True, "a middle name left out"),
    ("Lee Swindlehurst", "A. Lee Swindlehurst", True, "the name he goes by, after a leading initial"),
    ("Trevor Mendel", "J. Trevor Mendel", True, "the same convention"),
    ("David Lin", "C. -J. David Lin", True, "after leading compound initials"),
    ("Jessica Martinez", r"J. C Mart\'inez", True, "an initial fits any name with that letter"),
    # A full first name never matches a different full first name with the same initial.
    ("Jian Liu", "Jie Liu", False, "same initial, different name"),
    ("Xiao Zhang", "Xin Zhang", False, "same initial, different name"),
    ("Surajit Pal", "Shivam Pal", False, "same initial, different name"),
    ("Michelle Huang", "Minlie Huang", False, "same initial, different name"),
    # Particles.
    ("van der Schee", "Wilke van der Schee", True, "particles in the query"),
    ("Van Der Schee, Wilke", "Wilke van der Schee", True, "capitalised particles typed, comma form"),
    ("de la Torre", "Alberto de la Torre", True, "lower-case particles in the paper"),
    ("De la Torre", "Fernando De la Torre", True, "a capitalised De in the paper is read as a given name"),
    ("fernando de la torre", "Fernando De la Torre", True, "typed all lower case"),
    ("Alberto de la Torre", "Fernando De la Torre", False, "same surname, different person"),
    ("Van Hamme", "Hugo Van hamme", True, "capitalised particle, lower-case surname"),
    ("Stryk", "Oskar von Stryk", True, "the particle left out"),
    ("O. von Stryk", "Oskar von Stryk", True, "initial and particle"),
    ("dos Santos", "V. F. dos Santos", True, "Portuguese particle"),
    ("Al Ghallabi", "Wafa Al Ghallabi", True, "Arabic article"),
    ("Habashy", "Dina M. El-Habashy", True, "an article joined by a hyphen still counts as a particle"),
    ("De-Arteaga", "Maria De-arteaga", True, "hyphenated particle"),
    # Several-word surnames: the query can say where the surname starts, the display name cannot.
    ("Perez Martin, Guillem", r"Guillem P\'erez Mart\'in", True, "double surname in comma form"),
    ("Perez-Martin", r"Guillem P\'erez Mart\'in", True, "double surname with a hyphen"),
    ("Castro Holbaek, Sofie", r"Sofie Castro Holb{\ae}k", True, "double surname, æ"),
    ("Pascu Moca, Catalin", r"C\u{a}t\u{a}lin Pa\c{s}cu Moca", True, "double surname, breve and cedilla"),
    ("Pascu Moca", r"C\u{a}t\u{a}lin Pa\c{s}cu Moca", False, "without a comma it reads as Pascu (given)"),
    ("Rouppe van der Voort, Luc", "Luc Rouppe van der Voort", True, "surname with an inner particle"),
    ("Giron-Jimenez", r"Adri\'an Gir\'on-Jim\'enez", True, "hyphenated surname"),
    ("Jimenez", r"Adri\'an Gir\'on-Jim\'enez", False, "half of a hyphenated surname"),
    # Surname-only follows and suffixes.
    ("Zdeborova", r"Lenka Zdeborov\'a", True, "surname only"),
    ("Lin", "Cheng Lin", True, "surname only"),
    ("Wang", "Wangyu Wu", False, "a given name is not a surname"),
    ("Merz", "Kenneth M. Merz Jr", True, "suffix dropped"),
    ("Kenneth Merz", "Kenneth M. Merz Jr", True, "suffix dropped, middle initial left out"),
]


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
