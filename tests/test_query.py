"""The follow language: text helpers, grammar, errors, canonical form and matching semantics."""

from __future__ import annotations

import dataclasses
import pickle
import random
import re

import pytest

from core.follows.normalise import fold, given_compatible, name_key, name_matches, query_name_keys, words
from core.follows.query import (
    MAX_DEPTH,
    MAX_QUERY_CHARS,
    MAX_TERMS,
    And,
    Author,
    Category,
    Not,
    Or,
    PaperId,
    PaperText,
    Query,
    QueryError,
    Words,
    parse,
)
from core.follows.taxonomy import ALIASES, ARCHIVES, CATEGORIES, DIVIDED_ARCHIVES, SUBSUMED, archive_of
from core.values import PaperIn
from tests.conftest import BIG_FEED


def paper(
    title: str = "A study of things",
    abstract: str = "We study things.",
    authors: tuple[str, ...] = ("Ada Lovelace",),
    categories: tuple[str, ...] = ("cs.DC",),
    arxiv_id: str = "2611.08864",
    version: int = 1,
) -> PaperIn:
    return PaperIn(
        arxiv_id=arxiv_id,
        version=version,
        title=title,
        abstract=abstract,
        authors=authors,
        categories=categories,
    )


def reasons(query: str, p: PaperIn) -> tuple[str, ...] | None:
    return parse(query).evaluate(p)


def error(query: str) -> QueryError:
    with pytest.raises(QueryError) as info:
        parse(query)
    return info.value


# --- core.follows.normalise ----------


def test_fold_casefolds_and_strips_accents() -> None:
    assert fold("Benjamin Rémy") == "benjamin remy"
    assert (
        fold("Straße ØRESUND Łódź Đorđe Æsir Œuvre Kadıoğlu")
        == "strasse oresund lodz dorde aesir oeuvre kadioglu"
    )
    assert fold("İstanbul") == "istanbul"
    assert fold("ﬁne") == "fine"
    assert fold("Plain ASCII") == "plain ascii"


def test_words_split_on_hyphens_and_punctuation() -> None:
    assert words("Multi-Agent RL's (GPT-4o) e.g. x_y") == [
        "multi",
        "agent",
        "rl",
        "s",
        "gpt",
        "4o",
        "e",
        "g",
        "x",
        "y",
    ]
    assert words("Schrödinger-type") == ["schrodinger", "type"]
    assert words(" -- ") == []


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Zeng Li", ("li", ("zeng",))),
        ("Li, Zeng", ("li", ("zeng",))),
        ("Z. Li", ("li", ("z",))),
        ("K. J. Hepworth", ("hepworth", ("k", "j"))),
        ("Benjamin Rémy", ("remy", ("benjamin",))),
        ("Wilke van der Schee", ("van der schee", ("wilke",))),
        ("Alberto de la Torre", ("de la torre", ("alberto",))),
        # Capitalised particles stay with the given names in display names: "Van" may be a given name.
        ("Robert J. De Rosa", ("rosa", ("robert", "j", "de"))),
        # The first word is never a particle.
        ("Le Wang", ("wang", ("le",))),
        # A hyphen makes one given name of two parts; dots alone do not.
        ("Jean-Pierre Serre", ("serre", ("jean-pierre",))),
        ("J.-P. Serre", ("serre", ("j-p",))),
        ("J.C.S. Rocha", ("rocha", ("j", "c", "s"))),
        ("Bettler, M. -O.", ("bettler", ("m-o",))),
        ("Maria Garcia-Lopez", ("garcia lopez", ("maria",))),
        ("Kenneth M. Merz Jr", ("merz", ("kenneth", "m"))),
        ("John Smith, Jr.", ("smith", ("john",))),
        ("van der Schee, Wilke", ("van der schee", ("wilke",))),
        ("  ", ("", ())),
    ],
)
def test_name_key(name: str, key: tuple[str, tuple[str, ...]]) -> None:
    assert name_key(name) == key


def test_name_key_any_case_particles_for_typed_names() -> None:
    assert name_key("Robert De Rosa", particles_any_case=True) == ("de rosa", ("robert",))
    assert name_key("wilke VAN DER schee", particles_any_case=True) == ("van der schee", ("wilke",))


def test_query_name_keys_adds_a_bare_surname_reading() -> None:
    assert query_name_keys("Zeng Li") == (("li", ("zeng",)),)
    assert query_name_keys("van der Schee") == (("der schee", ("van",)), ("van der schee", ()))
    assert query_name_keys("Le Wang") == (("wang", ("le",)), ("le wang", ()))
    assert query_name_keys("Wang, Le") == (("wang", ("le",)),)


def test_given_compatible_pairs_initials_in_order() -> None:
    assert given_compatible(("zeng",), ("z",))
    assert given_compatible(("z",), ("zeng",))
    assert given_compatible(("kevin",), ("k", "j"))
    assert given_compatible((), ("anything",))
    assert not given_compatible(("j",), ("k", "j"))
    assert not given_compatible(("kevin", "james"), ("kevin",))
    assert not given_compatible(("wei",), ("zeng",))


def test_given_compatible_hyphenated_names() -> None:
    # One name: the query may not stop inside it...
    assert not given_compatible(("yu",), ("yu-jhe",))
    assert not given_compatible(("zeng",), ("zeng-hui",))
    # ...but hyphen, space and one piece are the same name, and one initial stands for all of it.
    assert given_compatible(("yu", "jhe"), ("yu-jhe",))
    assert given_compatible(("yu-jhe",), ("yu", "jhe"))
    assert given_compatible(("yujhe",), ("yu-jhe",))
    assert given_compatible(("yu-jhe",), ("yujhe",))
    assert given_compatible(("y-j",), ("yu-jhe",))
    assert given_compatible(("y",), ("yu-jhe",))
    assert given_compatible(("jean-pierre",), ("j",))
    assert given_compatible(("jp",), ("j", "p"))
    # An initial followed by another initial is compared part by part, not as the whole compound name.
    assert not given_compatible(("ya-qian",), ("y", "j"))
    assert given_compatible(("yun-jie",), ("y", "j"))
    # A leading initial before the name someone goes by may be skipped, on either side.
    assert given_compatible(("lee",), ("a", "lee"))
    assert given_compatible(("a", "lee"), ("lee",))
    assert given_compatible(("david",), ("c-j", "david"))
    assert not given_compatible(("j",), ("kevin",))
    assert not given_compatible(("lee",), ("a", "b"))


@pytest.mark.parametrize(
    ("query", "author", "expected"),
    [
        ("Li", "Zeng Li", True),
        ("Li", "Zeng Lin", False),
        ("Zeng Li", "Z. Li", True),
        ("Z. Li", "Zeng Li", True),
        ("Li, Zeng", "Zeng Li", True),
        ("Zeng Li", "Wei Li", False),
        ("Hui Li", "Zeng-Hui Li", False),
        ("Remy", "Benjamin Rémy", True),
        ("Benjamin Rémy", "Benjamin Remy", True),
        ("Schee", "Wilke van der Schee", True),
        ("van der Schee", "Wilke van der Schee", True),
        ("Van der Schee", "Wilke van der Schee", True),
        ("W. van der Schee", "Wilke van der Schee", True),
        ("van der Schee, W.", "Wilke van der Schee", True),
        ("De Rosa", "Robert J. De Rosa", True),
        ("Robert De Rosa", "Robert J. De Rosa", True),
        ("De Rosa", "Robert Rosa", False),
        ("Le Wang", "Le Wang", True),
        ("Le Wang", "Wei Wang", False),
        ("Garcia-Lopez", "Maria Garcia-Lopez", True),
        ("Lopez", "Maria Garcia-Lopez", False),
        ("Garcia-Lopez", "Maria Garcia Lopez", True),
        ("Garcia Lopez, Maria", "Maria Garcia Lopez", True),
        ("Garcia Lopez, Ana", "Maria Garcia Lopez", False),
        ("Hui Li", "Z. Hui Li", True),
        ("Zeng Li", "Zeng-Hui Li", False),
        ("Z. Li", "Zeng-Hui Li", True),
        (r"R\'emy", "Benjamin Rémy", True),
    ],
)
def test_name_matches(query: str, author: str, expected: bool) -> None:
    assert any(name_matches(q, name_key(author)) for q in query_name_keys(query)) is expected


# --- grammar ----------


def test_terms_parse_to_nodes() -> None:
    assert parse("asynchronous").root == Words("any", ("asynchronous",))
    assert parse('"Policy Lag"').root == Words("any", ("policy", "lag"))
    assert parse("multi-agent").root == Words("any", ("multi", "agent"))
    assert parse("ti:Rollout").root == Words("ti", ("rollout",))
    assert parse('abs:"policy lag"').root == Words("abs", ("policy", "lag"))
    assert parse("cat:cs.DC").root == Category("cs.dc", archive=False)
    assert parse("cat:cs.*").root == Category("cs", archive=True)
    assert parse("cat:cs").root == Category("cs", archive=True)
    assert parse('au:"Zeng Li"').root == Author((("li", ("zeng",)),))
    assert parse("id:2611.08864").root == PaperId("2611.08864")


def test_field_names_are_case_insensitive() -> None:
    assert parse("TI:x AU:Li Cat:cs.dc").canonical() == "ti:x AND au:li AND cat:cs.DC"


def test_juxtaposition_and_explicit_and_are_the_same() -> None:
    assert parse("a b") == parse("a AND b") == Query(And((Words("any", ("a",)), Words("any", ("b",)))))


def test_or_not_andnot() -> None:
    a, b = Words("any", ("a",)), Words("any", ("b",))
    assert parse("a OR b").root == Or((a, b))
    assert parse("NOT a").root == Not(a)
    assert parse("a ANDNOT b").root == And((a, Not(b)))
    assert parse("a AND NOT b") == parse("a ANDNOT b")


def test_precedence_not_then_and_then_or() -> None:
    a, b, c = (Words("any", (w,)) for w in "abc")
    assert parse("a OR b c").root == Or((a, And((b, c))))
    assert parse("a b OR c").root == Or((And((a, b)), c))
    assert parse("NOT a b").root == And((Not(a), b))
    assert parse("a ANDNOT b OR c").root == Or((And((a, Not(b))), c))
    assert parse("(a OR b) c").root == And((Or((a, b)), c))
    assert parse("NOT (a OR b)").root == Not(Or((a, b)))


def test_lowercase_operators_are_words() -> None:
    assert parse("rock and roll").root == And(tuple(Words("any", (w,)) for w in ("rock", "and", "roll")))
    assert parse("not or").root == And((Words("any", ("not",)), Words("any", ("or",))))
    assert parse('"AND"').root == Words("any", ("and",))


def test_typographic_quotes_from_phones() -> None:
    assert parse("ti:“policy lag”") == parse('ti:"policy lag"')
    assert parse("„policy lag“") == parse('"policy lag"')


def test_nested_nodes_flatten_and_repeats_drop() -> None:
    assert parse("a (b c)") == parse("a b c")
    assert parse("a OR (b OR c)") == parse("a OR b OR c")
    assert parse("a a OR a") == parse("a")
    assert parse("NOT NOT a") == parse("a")


def test_query_is_immutable_and_hashable() -> None:
    q = parse("cat:cs.DC au:Li")
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.root = Words("any", ("x",))  # type: ignore[misc]
    assert {q, parse("cat:CS.dc AND au:LI")} == {q}
    assert str(q) == "cat:cs.DC AND au:li"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("Asynchronous", "asynchronous"),
        ('"Policy  Lag"', '"policy lag"'),
        ("Multi-Agent", '"multi agent"'),
        ("ti:Rémy", "ti:remy"),
        (
            "cat:CS.dc cat:physics.ACC-PH cat:hep-th cat:cs cat:math.*",
            "cat:cs.DC AND cat:physics.acc-ph AND cat:hep-th AND cat:cs.* AND cat:math.*",
        ),
        ('au:"Li, Zeng"', 'au:"zeng li"'),
        ('au:"Z. Li"', 'au:"z li"'),
        ("au:Rémy", "au:remy"),
        ('au:"van der Schee"', 'au:"van der schee"'),
        ('au:"van der Schee,"', 'au:"van der schee,"'),
        ('au:"Garcia-Lopez, Maria"', 'au:"garcia lopez, maria"'),
        ('au:"Jean-Pierre Serre"', 'au:"jean-pierre serre"'),
        ('au:"Serre, J.-P."', 'au:"j-p serre"'),
        ('au:"R\\\'emy"', "au:remy"),
        ("Models", "models"),
        ('ti:"Language Models"', 'ti:"language models"'),
        ("SARS-CoV-2", '"sars cov 2"'),
        ("$k$-means", '"k means"'),
        ("cat:math.MP cat:stat.TH cat:cs.SY", "cat:math-ph AND cat:math.ST AND cat:eess.SY"),
        ("cat:hep-th.* cat:Quant-Ph cat:cond-mat", "cat:hep-th AND cat:quant-ph AND cat:cond-mat.*"),
        ("id:arXiv:2611.08864", "id:2611.08864"),
        ("id:math.GT/0309136", "id:math/0309136"),
        ("id:Quant-Ph/0201082", "id:quant-ph/0201082"),
        ("a ANDNOT b", "a AND NOT b"),
        ("(a OR b) NOT (c d)", "(a OR b) AND NOT (c AND d)"),
        ("a b OR c", "a AND b OR c"),
        ("NOT (a OR b)", "NOT (a OR b)"),
    ],
)
def test_canonical_form_and_round_trip(text: str, canonical: str) -> None:
    q = parse(text)
    assert q.canonical() == canonical
    assert parse(canonical) == q
    assert parse(canonical).canonical() == canonical


# --- errors ----------


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("", 0, 'empty query at position 0; write a word, a "phrase" or a field such as cat:cs.DC'),
        ("   ", 0, 'empty query at position 0; write a word, a "phrase" or a field such as cat:cs.DC'),
        ("(cat:cs.DC ti:x", 15, "expected a closing ')' at position 15; the '(' at position 0 is still open"),
        ("a OR (b (c)", 11, "expected a closing ')' at position 11; the '(' at position 5 is still open"),
        ("a)", 1, "unexpected ')' at position 1; it has no matching '('"),
        (") a", 0, "unexpected ')' at position 0; it has no matching '('"),
        ("()", 0, "empty parentheses at position 0"),
        ("tit:async", 0, "unknown field 'tit:' at position 0; did you mean ti:?"),
        ("author:Li", 0, "unknown field 'author:' at position 0; did you mean au:?"),
        ("title:x", 0, "unknown field 'title:' at position 0; did you mean ti:?"),
        ("abstract:x", 0, "unknown field 'abstract:' at position 0; did you mean abs:?"),
        ("category:cs.DC", 0, "unknown field 'category:' at position 0; did you mean cat:?"),
        ("kat:cs.DC", 0, "unknown field 'kat:' at position 0; did you mean cat:?"),
        ("x foo:y", 2, "unknown field 'foo:' at position 2; fields are cat:, au:, ti:, abs:, id:"),
        (
            "x all:y",
            2,
            "unknown field 'all:' at position 2; all: is not supported; "
            "a word without a field searches the title and the abstract",
        ),
        (
            "https://arxiv.org/abs/2611.08864v2",
            0,
            "unknown field 'https:' at position 0; write id:2611.08864 to follow that paper",
        ),
        ("a AND", 5, "expected a search term after 'AND' at position 5"),
        ("a OR ", 5, "expected a search term after 'OR' at position 5"),
        ("a ANDNOT", 8, "expected a search term after 'ANDNOT' at position 8"),
        ("NOT", 3, "expected a search term after 'NOT' at position 3"),
        ("a OR OR b", 5, "expected a search term after 'OR' at position 5; found 'OR'"),
        ("a AND)", 5, "expected a search term after 'AND' at position 5; found ')'"),
        ("(OR a)", 1, "expected a search term after '(' at position 1; found 'OR'"),
        ("(", 1, "expected a search term after '(' at position 1"),
        ("OR a", 0, "expected a search term before 'OR' at position 0"),
        ('ti:"policy lag', 3, 'unterminated quoted phrase at position 3; add a closing "'),
        ('a "', 2, 'unterminated quoted phrase at position 2; add a closing "'),
        ('""', 0, "empty quoted phrase at position 0"),
        ('abs:"  "', 4, "empty quoted phrase at position 4"),
        ("ti:", 3, """expected a word or "phrase" after 'ti:' at position 3"""),
        ("au: Li", 3, """expected a word or "phrase" after 'au:' at position 3"""),
        ("(cat:)", 5, """expected a word or "phrase" after 'cat:' at position 5"""),
        (
            "id:2611.08864v2",
            13,
            "unexpected version suffix 'v2' at position 13; drop it: id:2611.08864 follows every version",
        ),
        (
            "id:quant-ph/0201082v3",
            19,
            "unexpected version suffix 'v3' at position 19; drop it: "
            "id:quant-ph/0201082 follows every version",
        ),
        (
            "id:2611.088",
            3,
            "not an arXiv id: '2611.088' at position 3; write e.g. id:2411.17700 or id:quant-ph/0201082",
        ),
        (
            'id:"Zeng Li"',
            4,
            "not an arXiv id: 'Zeng Li' at position 4; write e.g. id:2411.17700 or id:quant-ph/0201082",
        ),
        ("cat:cs.D.C", 4, "not a category: 'cs.D.C' at position 4; write e.g. cat:cs.DC or cat:cs.*"),
        ("cat:cs.LGG", 4, "unknown category 'cs.LGG' at position 4; did you mean cs.LG?"),
        ("cat:sc.DC", 4, "unknown category 'sc.DC' at position 4; did you mean cs.DC?"),
        ("x cat:sc", 6, "unknown arXiv archive 'sc' at position 6; did you mean cs?"),
        ("cat:sc.*", 4, "unknown arXiv archive 'sc' at position 4; did you mean cs.*?"),
        ("cat:cs.ML", 4, "unknown category 'cs.ML' at position 4; did you mean stat.ML?"),
        ("cat:cs.DCC", 4, "unknown category 'cs.DCC' at position 4; did you mean cs.DC or cs.CC?"),
        ("cat:hepth", 4, "unknown arXiv archive 'hepth' at position 4; did you mean hep-th?"),
        (
            "cat:hep",
            4,
            "unknown arXiv archive 'hep' at position 4; did you mean hep-ex, hep-ph, hep-th or hep-lat?",
        ),
        (
            "cat:cs.zz",
            4,
            "unknown category 'cs.zz' at position 4; see arxiv.org/category_taxonomy, "
            "or write cat:cs.* for all of cs",
        ),
        (
            "cat:hep-th.xx",
            4,
            "unknown category 'hep-th.xx' at position 4; hep-th has no subject classes: write cat:hep-th",
        ),
        (
            "cat:chao-dyn",
            4,
            "unknown arXiv archive 'chao-dyn' at position 4; chao-dyn is now nlin.CD: write cat:nlin.CD",
        ),
        (
            "cat:xyz.AB",
            4,
            "unknown category 'xyz.AB' at position 4; archives are astro-ph, cond-mat, cs, econ, "
            "eess, gr-qc, hep-ex, hep-lat, hep-ph, hep-th, math, math-ph, nlin, nucl-ex, nucl-th, physics, "
            "q-bio, q-fin, quant-ph, stat",
        ),
        (
            "ti:$\\alpha$",
            3,
            "nothing to search for in '$\\alpha$' at position 3; TeX math and commands are not searched",
        ),
        ('au:"(,)"', 4, """no name in '(,)' at position 4; write e.g. au:Li or au:"Zeng Li\""""),
        (
            "transform*",
            9,
            "wildcards are not supported at position 9; words match whole words; cat: accepts cs.*",
        ),
        ("-survey", 0, "a leading '-' does not exclude at position 0; write NOT word to exclude"),
        ("a & b", 2, "nothing to search for in '&' at position 2; words are made of letters and digits"),
    ],
)
def test_errors_say_what_and_where(text: str, position: int, message: str) -> None:
    err = error(text)
    assert isinstance(err, ValueError)
    assert err.position == position
    assert str(err) == message
    assert err.text == text


def test_error_excerpt_points_at_the_position() -> None:
    assert error("cat:cs.DC tit:x").excerpt() == "cat:cs.DC tit:x\n          ^"
    long = "a " * 100 + "tit:x"
    lines = error(long).excerpt().splitlines()
    assert lines[0].startswith("…") and "tit:x" in lines[0]
    assert lines[0][len(lines[1]) - 1 : len(lines[1]) + 3] == "tit:"


def test_error_survives_pickling() -> None:
    err = pickle.loads(pickle.dumps(error("(a")))
    assert (str(err), err.position, err.text) == (
        "expected a closing ')' at position 2; the '(' at position 0 is still open",
        2,
        "(a",
    )


def test_limits() -> None:
    assert str(error("a" * (MAX_QUERY_CHARS + 1))) == (
        f"query too long at position {MAX_QUERY_CHARS}; the limit is {MAX_QUERY_CHARS} characters"
    )
    parse(" ".join(f"w{i}" for i in range(MAX_TERMS)))
    many = " ".join(f"w{i}" for i in range(MAX_TERMS + 1))
    assert str(error(many)) == (
        f"too many search terms at position {many.index(f'w{MAX_TERMS}')}; the limit is {MAX_TERMS}"
    )
    parse("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH)
    assert str(error("(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1))) == (
        f"query nested too deeply at position {MAX_DEPTH}; the limit is {MAX_DEPTH} levels"
    )
    assert error("NOT " * (MAX_DEPTH + 1) + "a").position == 4 * MAX_DEPTH


# --- matching ----------


def test_words_match_whole_words_only() -> None:
    p = paper(title="Graphene sheets", abstract="Paragraphs about graphs.")
    assert reasons("grap", p) is None
    assert reasons("paragraph", p) == ("abstract: paragraph",)
    assert reasons("graphene", p) == ("title: graphene",)
    assert reasons("graphenes", p) == ("title: graphenes",)
    assert reasons("graphs", p) == ("abstract: graphs",)
    assert reasons("GRAPHENE", p) == ("title: graphene",)
    assert reasons("sheet", p) == ("title: sheet",)


def test_plurals_fold_on_both_sides_and_reasons_show_the_typed_word() -> None:
    p = paper(
        title="Large language models for case studies",
        abstract="A box of classes; two approaches; the model zoo.",
    )
    assert reasons("model", p) == ("title: model",)
    assert reasons("models", p) == ("title: models",)
    assert reasons("Study", p) == ("title: study",)
    assert reasons("boxes", p) == ("abstract: boxes",)
    assert reasons("abs:class", p) == ("abstract: class",)
    assert reasons("approach", p) == ("abstract: approach",)
    # Phrases fold word by word.
    assert reasons('"language model"', p) == ('title: "language model"',)
    assert reasons('"case study"', p) == ('title: "case study"',)
    assert reasons('abs:"the models zoo"', p) == ('abstract: "the models zoo"',)
    # What does not fold.
    assert reasons("analyses", paper(title="An analysis")) is None
    assert reasons("news", paper(title="A new method")) is None
    assert reasons("SAR", paper(title="SARS-CoV-2 spread")) is None
    assert reasons("gpu", paper(title="Many GPUs")) is None
    # Equal terms, different typed words: two follows, each with its own reason.
    assert parse("model") != parse("models")
    assert parse("model").anchors() == parse("models").anchors() == frozenset({("w", "model")})


def test_tex_markup_is_stripped_from_titles_and_abstracts() -> None:
    p = paper(
        title=r"\emph{Fast} $k$-means for MnBi$_2$Te$_4$ films",
        abstract=r"We use $\mathcal{O}(n \log n)$ time \cite{smith2020} on \textbf{GPUs}; see \url{x.org}.",
    )
    assert reasons('"k-means"', p) == ('title: "k means"',)
    assert reasons("fast", p) == ("title: fast",)
    assert reasons("MnBi2Te4", p) == ("title: mnbi2te4",)
    assert reasons('abs:"on gpus"', p) == ('abstract: "on gpus"',)
    assert reasons('abs:"time on"', p) == ('abstract: "time on"',)  # the citation left no word behind
    assert reasons("smith2020", p) is None
    assert reasons("log", p) is None  # a formula is not text
    assert reasons("emph", p) is None
    text = PaperText.of(p)
    assert ("w", "mnbi2te4") in text.keys and ("w", "mathcal") not in text.keys
    # The same markup pasted into a query means the same words.
    assert reasons(r'ti:"$k$-means"', p) == ('title: "k means"',)


def test_tex_accents_in_query_values() -> None:
    p = paper(title="Schrödinger bridges", authors=("Benjamin Rémy", "Kurt Gödel"))
    assert reasons(r'au:"R\'emy"', p) == ("author Benjamin Rémy",)
    assert reasons(r'au:"G\"odel"', p) == ("author Kurt Gödel",)
    assert reasons(r"au:G\"odel", p) == ("author Kurt Gödel",)
    assert reasons(r'au:"Kurt G\"{o}del"', p) == ("author Kurt Gödel",)
    assert reasons(r"ti:Schr\"odinger", p) == ("title: schrodinger",)


def test_accents_fold_on_both_sides() -> None:
    p = paper(title="Schrödinger bridges", abstract="Une étude.")
    assert reasons("schrodinger", p) == ("title: schrodinger",)
    assert reasons("Schrödinger", p) == ("title: schrodinger",)
    assert reasons("abs:etude", p) == ("abstract: etude",)


def test_unfielded_words_prefer_title_reason() -> None:
    p = paper(title="Asynchronous rollouts", abstract="Asynchronous training with policy lag.")
    assert reasons("asynchronous", p) == ("title: asynchronous",)
    assert reasons("training", p) == ("abstract: training",)
    assert reasons("ti:training", p) is None
    assert reasons("abs:asynchronous", p) == ("abstract: asynchronous",)
    assert reasons("abs:rollouts", p) is None


def test_phrases_match_consecutive_words() -> None:
    p = paper(title="On policy lag", abstract="The lag of the policy. Off-policy lag-aware methods.")
    assert reasons('"policy lag"', p) == ('title: "policy lag"',)
    assert reasons('abs:"policy lag"', p) == ('abstract: "policy lag"',)
    assert reasons('abs:"lag policy"', p) is None
    assert reasons('ti:"lag policy"', p) is None
    assert reasons('abs:"lag of the policy"', p) == ('abstract: "lag of the policy"',)


def test_hyphens_are_separators_on_both_sides() -> None:
    p = paper(title="Multi-Agent Reinforcement Learning", abstract="A multi agent system.")
    assert reasons("multi-agent", p) == ('title: "multi agent"',)
    assert reasons('abs:"multi-agent"', p) == ('abstract: "multi agent"',)
    assert reasons("agent", p) == ("title: agent",)
    assert reasons("multiagent", p) is None


def test_category_primary_or_cross_list() -> None:
    p = paper(categories=("cs.LG", "cs.DC", "math.OC"))
    assert reasons("cat:cs.DC", p) == ("category cs.DC",)
    assert reasons("cat:cs.dc", p) == ("category cs.DC",)
    assert reasons("cat:cs.LG", p) == ("category cs.LG",)
    assert reasons("cat:cs.AI", p) is None
    assert str(error("cat:cs.D")) == (
        "unknown category 'cs.D' at position 4; did you mean cs.DB, cs.DC, cs.DL or cs.DM?"
    )


def test_category_aliases_are_one_category() -> None:
    both = paper(categories=("cs.IT", "math.IT"))
    assert reasons("cat:math.IT", both) == ("category cs.IT",)
    assert reasons("cat:cs.IT", both) == ("category cs.IT",)
    # A source that lists only one of the two names still matches a follow on the other.
    assert reasons("cat:cs.IT", paper(categories=("math.IT",))) == ("category math.IT",)
    assert reasons("cat:math-ph", paper(categories=("math.MP",))) == ("category math.MP",)
    assert reasons("cat:math.MP", paper(categories=("math-ph",))) == ("category math-ph",)
    assert parse("cat:math.IT") == parse("cat:cs.IT")
    # Archives go by the categories as listed.
    assert reasons("cat:math.*", paper(categories=("math-ph",))) is None
    assert reasons("cat:math.*", paper(categories=("math-ph", "math.MP"))) == ("category math.MP",)


def test_category_archive() -> None:
    p = paper(categories=("math-ph", "physics.acc-ph"))
    assert reasons("cat:cs.*", p) is None
    assert reasons("cat:physics.*", p) == ("category physics.acc-ph",)
    assert reasons("cat:physics", p) == ("category physics.acc-ph",)
    assert reasons("cat:math", p) is None  # math-ph is its own archive
    assert reasons("cat:math-ph", p) == ("category math-ph",)
    assert reasons("cat:cs.*", paper(categories=("eess.SP", "cs.LG", "cs.AI"))) == ("category cs.LG",)


def test_author_rules() -> None:
    p = paper(authors=("Stan Z. Li", "Zeng Li", "Benjamin Rémy", "Wilke van der Schee", "Xu Lin"))
    assert reasons("au:Li", p) == ("author Stan Z. Li", "author Zeng Li")
    assert reasons('au:"Zeng Li"', p) == ("author Zeng Li",)
    assert reasons('au:"Li, Zeng"', p) == ("author Zeng Li",)
    assert reasons('au:"Z. Li"', p) == ("author Zeng Li",)
    assert reasons('au:"Stan Li"', p) == ("author Stan Z. Li",)
    assert reasons('au:"Wei Li"', p) is None
    assert reasons("au:Remy", p) == ("author Benjamin Rémy",)
    assert reasons('au:"benjamin remy"', p) == ("author Benjamin Rémy",)
    assert reasons('au:"van der Schee"', p) == ("author Wilke van der Schee",)
    assert reasons("au:schee", p) == ("author Wilke van der Schee",)
    assert reasons("au:Lin", p) == ("author Xu Lin",)
    assert reasons("au:Xu", p) is None  # a surname, not any name part
    assert reasons('au:"Z. Li"', paper(authors=("Zhang Li",))) == ("author Zhang Li",)


def test_paper_id_matches_any_version() -> None:
    assert reasons("id:2611.08864", paper(version=1)) == ("paper 2611.08864",)
    assert reasons("id:2611.08864", paper(version=3)) == ("paper 2611.08864",)
    assert reasons("id:2611.08865", paper()) is None
    old = paper(arxiv_id="quant-ph/0201082")
    assert reasons("id:quant-ph/0201082", old) == ("paper quant-ph/0201082",)


def test_reasons_of_combined_queries() -> None:
    p = paper(
        title="Asynchronous rollouts",
        abstract="We bound the policy lag.",
        authors=("Zeng Li", "Ada Lovelace"),
        categories=("cs.LG", "cs.DC"),
    )
    assert reasons('cat:cs.DC au:"Zeng Li" asynchronous', p) == (
        "category cs.DC",
        "author Zeng Li",
        "title: asynchronous",
    )
    assert reasons('asynchronous OR "policy lag" OR quantum', p) == (
        "title: asynchronous",
        'abstract: "policy lag"',
    )
    assert reasons("asynchronous OR ti:asynchronous", p) == ("title: asynchronous",)
    assert reasons("asynchronous ANDNOT cat:cs.CV", p) == ("title: asynchronous",)
    assert reasons("asynchronous ANDNOT cat:cs.DC", p) is None
    assert reasons("NOT cat:cs.CV", p) == ()
    assert reasons("NOT cat:cs.DC", p) is None
    assert reasons("(quantum OR au:Lovelace) NOT (ti:survey OR cat:cs.CV)", p) == ("author Ada Lovelace",)
    assert reasons("id:2611.08864", p) == ("paper 2611.08864",)


def test_paper_keys_use_match_terms_and_canonical_categories() -> None:
    text = PaperText.of(paper(title="Models of studies", categories=("math.MP", "math-ph", "cs.LG")))
    assert {("w", "model"), ("w", "study"), ("w", "of")} <= text.keys
    assert ("w", "models") not in text.keys
    assert text.title_words == ("model", "of", "study")
    assert text.folded_categories == ("math-ph", "math-ph", "cs.lg")
    assert text.archives == ("math", "math-ph", "cs")
    assert {("cat", "math-ph"), ("arch", "math"), ("arch", "math-ph"), ("arch", "cs")} <= text.keys


def test_evaluate_accepts_a_pretokenised_paper() -> None:
    p = paper(title="Asynchronous rollouts", authors=("Zeng Li",))
    text = PaperText.of(p)
    q = parse("asynchronous au:li")
    assert q.evaluate(text) == q.evaluate(p) == ("title: asynchronous", "author Zeng Li")
    assert ("w", "asynchronous") in text.keys
    assert {("cat", "cs.dc"), ("arch", "cs"), ("au", "li"), ("id", "2611.08864")} <= text.keys


def test_undivided_archives_are_categories() -> None:
    assert parse("cat:hep-th").root == parse("cat:hep-th.*").root == Category("hep-th", archive=False)
    assert reasons("cat:hep-th", paper(categories=("hep-ph", "hep-th"))) == ("category hep-th",)
    assert reasons("cat:quant-ph", paper(categories=("quant-ph",))) == ("category quant-ph",)


# --- taxonomy ----------


def _feed_categories() -> set[str]:
    return set(re.findall(r"<category>([^<]+)</category>", BIG_FEED.read_text(encoding="utf-8")))


def test_every_category_of_the_recorded_feed_is_known() -> None:
    seen = _feed_categories()
    assert len(seen) > 140
    assert seen <= CATEGORIES, sorted(seen - CATEGORIES)
    for category in seen:
        assert parse(f"cat:{category}").canonical().lower() in (
            f"cat:{category.lower()}",
            f"cat:{ALIASES.get(category, category).lower()}",
        )


def test_taxonomy_shape() -> None:
    assert {archive_of(c) for c in CATEGORIES} == ARCHIVES
    assert DIVIDED_ARCHIVES < ARCHIVES
    assert set(ALIASES) | set(ALIASES.values()) <= CATEGORIES
    assert set(SUBSUMED.values()) <= CATEGORIES and not set(SUBSUMED) & ARCHIVES
    # Every category parses, prints in arXiv's spelling and reads back the same.
    for category in CATEGORIES:
        q = parse(f"cat:{category}")
        assert parse(q.canonical()) == q
        assert q.canonical() == f"cat:{ALIASES.get(category, category)}"


def test_anchors() -> None:
    assert parse("cat:cs.DC").anchors() == frozenset({("cat", "cs.dc")})
    assert parse("cat:cs.*").anchors() == frozenset({("arch", "cs")})
    assert parse('"policy lag"').anchors() == frozenset({("w", "policy")})
    assert parse('"rollouts"').anchors() == frozenset({("w", "rollout")})
    assert parse("cat:math.MP").anchors() == frozenset({("cat", "math-ph")})
    assert parse("cat:hep-th").anchors() == frozenset({("cat", "hep-th")})
    assert parse('au:"van der Schee"').anchors() == frozenset({("au", "schee")})
    assert parse("id:2611.08864").anchors() == frozenset({("id", "2611.08864")})
    # AND keeps the most selective child: an author beats a category, an id beats everything.
    assert parse("cat:cs.DC au:Li").anchors() == frozenset({("au", "li")})
    assert parse("au:Li id:2611.08864").anchors() == frozenset({("id", "2611.08864")})
    assert parse("(rollout OR asynchronous) cat:cs.*").anchors() == frozenset(
        {("w", "rollout"), ("w", "asynchronous")}
    )
    assert parse("NOT cat:cs.CV ti:rollout").anchors() == frozenset({("w", "rollout")})
    assert parse("NOT cat:cs.CV").anchors() is None
    assert parse("rollout OR NOT cat:cs.CV").anchors() is None


_PIECES = [
    "a", "b", "Li", '"x y"', '"', "(", ")", "AND", "OR", "NOT", "ANDNOT", "and", "ti:", "abs:", "au:",
    "cat:", "id:", "cs.DC", "cs.*", "2611.08864", "v2", "-", "*", "“", "”", ",", "Zeng", "van", "der", "é",
    "tit:", ":", "models", "ys", "\\", "$", "{", "}", "math.MP", "hep-th", "Jean-Pierre", "J.", "\\'e",
]  # fmt: skip


def test_random_text_parses_to_a_stable_form_or_fails_cleanly() -> None:
    rng = random.Random(20611)
    papers = [
        PaperText.of(paper(title="a b x y", abstract="Li zeng", authors=("Zeng Li", "Wilke van der Schee"))),
        PaperText.of(
            paper(title="x", abstract="b a", authors=("A. van der Schee",), categories=("math.CO",))
        ),
        PaperText.of(
            paper(
                title=r"Models $y$ {a} \emph{b}",
                abstract="the model ys",
                authors=("Jean-Pierre Li", "J. Zeng", "Rémy é"),
                categories=("math.MP", "hep-th"),
            )
        ),
    ]
    parsed = 0
    for _ in range(5000):
        text = "".join(rng.choice(_PIECES) + rng.choice(("", " ")) for _ in range(rng.randint(0, 10)))
        try:
            q = parse(text)
        except QueryError as err:
            assert 0 <= err.position <= len(text)
            continue
        parsed += 1
        again = parse(q.canonical())
        assert again == q, text
        assert again.canonical() == q.canonical()
        anchors = q.anchors()
        for p in papers:
            found = q.evaluate(p)
            # The matcher's index is sound only if a matching paper always carries one of the anchors.
            if found is not None and anchors is not None:
                assert anchors & p.keys, text
    assert parsed > 300
