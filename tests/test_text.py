"""core.follows.normalise: plural folding (term) and TeX stripping, rule by rule and over the recorded
feed."""

from __future__ import annotations

import re

import pytest

from core.follows.normalise import NOT_PLURALS, strip_tex, term, terms, words
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        # -s
        ("models", "model"),
        ("sizes", "size"),
        ("videos", "video"),
        ("ideas", "idea"),
        ("keys", "key"),
        ("llms", "llm"),
        ("ties", "tie"),
        ("dynamics", "dynamic"),
        # -ies after a consonant
        ("studies", "study"),
        ("queries", "query"),
        ("movies", "movy"),  # no dictionary: -ie nouns fold differently from their singular
        ("series", "sery"),  # singular and plural alike, so harmless
        # -es after ch, sh, ss, x, zz; and the singulars in -che and -sse that must meet them
        ("approaches", "approach"),
        ("classes", "class"),
        ("boxes", "box"),
        ("meshes", "mesh"),
        ("buzzes", "buzz"),
        ("caches", "cach"),
        ("cache", "cach"),
        ("impasse", "impass"),
        ("axes", "axe"),  # too short for the -xes rule: "ax" would be two letters
        # left alone
        ("model", "model"),
        ("study", "study"),
        ("class", "class"),
        ("status", "status"),
        ("gpus", "gpus"),
        ("analysis", "analysis"),
        ("apis", "apis"),
        ("does", "does"),
        ("heroes", "heroes"),
        ("gas", "gas"),
        ("its", "its"),
        ("news", "news"),
        ("sars", "sars"),
        ("mips", "mips"),
        ("4s", "4s"),
        ("a100s", "a100s"),
        ("ωs", "ωs"),
        ("Models", "Models"),  # not a folded word: callers pass words() output
        ("mice", "mice"),
        ("data", "data"),
    ],
)
def test_term(word: str, expected: str) -> None:
    assert term(word) == expected


def test_singular_and_plural_meet() -> None:
    pairs = [
        ("model", "models"),
        ("study", "studies"),
        ("class", "classes"),
        ("box", "boxes"),
        ("approach", "approaches"),
        ("cache", "caches"),
        ("niche", "niches"),
        ("video", "videos"),
        ("idea", "ideas"),
        ("llm", "llms"),
        ("size", "sizes"),
        ("process", "processes"),
        ("mesh", "meshes"),
        ("impasse", "impasses"),
    ]
    for singular, plural in pairs:
        assert term(singular) == term(plural), (singular, plural)
    # Documented misses: irregular plurals and -s/-us/-is singulars with an -es plural.
    for singular, plural in [
        ("mouse", "mice"),
        ("index", "indices"),
        ("analysis", "analyses"),
        ("bias", "biases"),
    ]:
        assert term(singular) != term(plural), (singular, plural)


def test_not_plurals_never_fold_into_another_word() -> None:
    for word in NOT_PLURALS:
        assert term(word) == word
        assert term(word[:-1]) != word


def test_term_is_idempotent_on_the_recorded_feed() -> None:
    """The matcher looks a term up among the terms of a text, so a term must be its own term."""
    page = parse_feed(BIG_FEED.read_bytes())
    seen = {w for p in page.items for w in words(p.title + " " + p.abstract)}
    assert len(seen) > 10_000
    for w in seen:
        assert term(term(w)) == term(w), w


def test_terms() -> None:
    assert terms("Large Language Models' studies of GPUs") == [
        "large",
        "language",
        "model",
        "study",
        "of",
        "gpus",
    ]


@pytest.mark.parametrize(
    ("tex", "expected"),
    [
        # Plain math stays in place, glued: it is part of a word or a formula name people search for.
        (r"$k$-means clustering", "k-means clustering"),
        (r"$p$-adic $L$-functions", "p-adic L-functions"),
        (r"MnBi$_2$Te$_4$ films", "MnBi2Te4 films"),
        (r"$^{12}$C and CO$_2$", "12C and CO2"),
        (r"$\mathrm{CO}_2$ capture", "CO2 capture"),
        (r"$SU(3)$ gauge theory", "SU(3) gauge theory"),
        # Math with any other command is replaced by a space.
        (r"The $\Lambda$CDM model", "The  CDM model"),
        (r"An $\mathcal{O}(n \log n)$ bound", "An   bound"),
        (r"$$E=mc^2 \quad x$$ and \(\alpha\) and \[\beta\]", "  and   and  "),
        # Dollars that are prices, not math (pandoc's rule), once \$ is decoded.
        (r"costs \$5 and \$10 today", "costs $5 and $10 today"),
        # Styling keeps its argument in place; references lose theirs; other commands become a space.
        (r"\emph{Multi}-agent \textbf{RL}", "Multi-agent RL"),
        (r"{\it Ab initio} study", " Ab initio study"),
        (r"Di\textit{ff}erent \texttt{code}", "Different code"),
        (r"as shown \cite{smith2020} and \citep[p.~3]{a,b} in \eqref{eq:1}", "as shown   and   in  "),
        (r"pre\textendash{}post", "pre post"),
        (r"\url{https://x.org}", " https://x.org"),
        (r"hy\-phen\/ated e.g.\ this\\next", "hyphenated e.g. this next"),
        # Accents are decoded first.
        (r"Schr\"odinger and Erd\H{o}s", "Schrödinger and Erdős"),
        # Nothing to do.
        ("Plain text, 50% of it", "Plain text, 50% of it"),
    ],
)
def test_strip_tex(tex: str, expected: str) -> None:
    assert strip_tex(tex) == expected


def test_strip_tex_leaves_no_markup_in_the_recorded_feed() -> None:
    page = parse_feed(BIG_FEED.read_bytes())
    texts = [t for p in page.items for t in (p.title, p.abstract) if re.search(r"[\\${}]", t)]
    assert len(texts) > 100
    for t in texts:
        stripped = strip_tex(t)
        assert "\\" not in stripped and "{" not in stripped and "}" not in stripped, t
        # Words a reader sees outside math and commands survive.
        plain = re.sub(r"\\(?:begin|end|cite[a-z]*|ref|eqref|label)\{[^}]*\}", " ", t)
        plain = re.sub(r"\\begin\{equation\*?\}.*?\\end\{equation\*?\}", " ", plain, flags=re.DOTALL)
        plain = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", "$", plain, flags=re.DOTALL)
        plain = plain.replace("\\-", "")  # a hyphenation hint inside a word
        # Plain words: not a command name, not touching a brace, a dollar or a backslash.
        outside = {w.lower() for w in re.findall(r"(?<![\\{}$\w])[A-Za-z]{4,}(?![{}$\w])", plain)}
        assert outside <= set(words(stripped)), t
