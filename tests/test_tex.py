"""decode_tex: every escape it supports, the text it must leave alone, and every escape in the real feed."""

from __future__ import annotations

import random
import re
import unicodedata
import xml.etree.ElementTree as ET

import pytest

from core.tex_accents import decode_tex
from tests.conftest import BIG_FEED

DC_CREATOR = "{http://purl.org/dc/elements/1.1/}creator"


@pytest.mark.parametrize(
    ("tex", "expected"),
    [
        # The examples named in the brief, all real names from the corpus.
        (r"R\'emy", "Rémy"),
        (r"Lundstr\"om", "Lundström"),
        (r"Vavry\v{c}uk", "Vavryčuk"),
        (r"Przemys{\l}aw", "Przemysław"),
        (r"\.Zygierewicz", "Żygierewicz"),
        (r"Kad{\i}o\u{g}lu", "Kadıoğlu"),
        (r"Aragon\`es", "Aragonès"),
        # Control-symbol accents: acute, grave, circumflex, diaeresis, tilde, macron, dot above.
        (r"\'a\'A\'{o}", "áÁó"),
        (r"\`e\`{u}", "èù"),
        (r"L\'ev\^eque", "Lévêque"),
        (r"\^o", "ô"),
        (r"\"u\"{O}", "üÖ"),
        (r"Espa\~na", "España"),
        (r"\=a\={E}", "āĒ"),
        (r"\.z\.{I}", "żİ"),
        # Control-word accents: braced, space-separated, and before \i.
        (r"\c{c}", "ç"),
        (r"Bo\c{t}", "Boţ"),
        (r"\c c", "ç"),
        (r"Erd\H{o}s", "Erdős"),
        (r"\r{a}\r A", "åÅ"),
        (r"Zi\k{e}ba \k{a}", "Zięba ą"),
        (r"\v{S}imon \v{z}\v{r}\v{n}", "Šimon žřň"),
        (r"\u{a}\u{g}", "ăğ"),
        (r"\d{o}", "ọ"),
        (r"\b{a}", "a̱"),
        # Special letters, bare and braced; {} after the control word only ends it.
        (r"{\o}", "ø"),
        (r"Sj{\o}rup", "Sjørup"),
        (r"{\O}", "Ø"),
        (r"{\ss}", "ß"),
        (r"Gro\ss{}e", "Große"),
        (r"{\ae}", "æ"),
        (r"Nebul{\ae}", "Nebulæ"),
        (r"{\AE}{\oe}{\OE}", "ÆœŒ"),
        (r"Mar{\aa}k \AA", "Maråk Å"),
        (r"Gu{\dh}mundur {\DH}", "Guðmundur Ð"),
        (r"{\th}{\TH}{\dj}{\DJ}{\ng}{\NG}", "þÞđĐŋŊ"),
        (r"{\L}uksza \l", "Łuksza ł"),
        (r"{\i}{\j}", "ıȷ"),
        # Accents over dotless i and j give the ordinary accented letter.
        (r"Mart\'{\i}nez", "Martínez"),
        (r"\'\i", "í"),
        (r"\"{\i}", "ï"),
        (r"Krasnosel'ki\u{\i}", "Krasnosel'kiĭ"),
        (r"\v{\j}", "ǰ"),
        (r"\'{\o}", "ǿ"),
        # The three spellings of one accent, and spaces inside the protecting braces.
        (r"\'e \'{e} {\'e} {\'{e}} { \'e }", "é é é é é"),
        # Escaped TeX specials.
        (r"Attributes \& Preferences", "Attributes & Preferences"),
        (r"50\% \#1 a\_b \$5", "50% #1 a_b $5"),
        # Several escapes in one name and a whole author list.
        (r"\'Ad\'am Tim\'ar, \"Ozen\c{c} G\"ung\"or", "Ádám Timár, Özenç Güngör"),
        (r"C\u{a}t\u{a}lin Pa\c{s}cu Moca", "Cătălin Paşcu Moca"),
    ],
)
def test_decodes(tex: str, expected: str) -> None:
    assert decode_tex(tex) == expected


def test_decoded_letters_are_precomposed() -> None:
    # NFC gives one code point where Unicode has one, so "é" compares equal to a typed "é".
    for tex in (r"\'e", r"\v{c}", r"\H{o}", r"\k{a}", r"\u{g}", r"\r{a}", r"\.Z", r"\c{c}"):
        decoded = decode_tex(tex)
        assert len(decoded) == 1, tex
        assert unicodedata.is_normalized("NFC", decoded)


def test_accent_without_precomposed_letter_keeps_combining_mark() -> None:
    assert decode_tex(r"\v{q}") == "q\u030c"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain ASCII title",
        "Ünïcödé already",
        "$x^2$",
        r"$\'e$ stays in math",
        r"$$\"o$$ and \(\'e\) and \[\v{c}\]",
        r"$\mathbb{R}^3$ and $\Lambda$CDM",
        r"{\Lambda}CDM",
        r"\beta-CuGaO2",
        r"\b{eta} decay",  # a typo for \beta: the argument is not one letter, so leave it
        r"\vec{x}",
        r"\cdot \omega \oeuvre \aab",
        r"\textbf{bold} \emph{x}",
        r"\t{oo}",
        r"\'{}",
        r"\'",
        "\\",
        "trailing backslash \\",
        r"\\'e",  # a TeX line break followed by 'e, not an accent
        r"O\' Neil",  # a control symbol takes its argument immediately
        r"\vc",
        r"{ATLAS} {braces} stay",
        "a $ lone dollar",
        "10^{-3} and 2--3",
    ],
)
def test_leaves_alone(text: str) -> None:
    assert decode_tex(text) == text


def test_math_is_kept_while_text_around_it_is_decoded() -> None:
    assert decode_tex(r"Schr\"odinger $\"o$ on $\mathbb{T}^{d}$") == r"Schrödinger $\"o$ on $\mathbb{T}^{d}$"
    assert decode_tex(r"\$5 \'e $a$") == "$5 é $a$"


def test_unknown_parts_survive_next_to_decoded_ones() -> None:
    assert decode_tex(r"\'e\foo{\'e}\bar") == r"é\fooé\bar"


def test_never_raises_on_odd_input() -> None:
    alphabet = "\\{}$'`^\"~=.uvHckrdbloiasj ()xé\n"
    rng = random.Random(20241128)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        decoded = decode_tex(text)
        assert isinstance(decoded, str)
        if "\\" not in text:
            assert decoded == text


def _creator_strings() -> list[str]:
    root = ET.parse(BIG_FEED).getroot()
    return [item.findtext(DC_CREATOR) or "" for item in root.iter("item")]


def test_covers_every_escape_in_the_real_feed_authors() -> None:
    creators = [c for c in _creator_strings() if "\\" in c]
    assert len(creators) == 187  # a regex count over the raw file says the same
    escapes = set()
    for creator in creators:
        escapes.update(re.findall(r"\\(?:[A-Za-z]+|.)", creator))
        decoded = decode_tex(creator)
        assert "\\" not in decoded, decoded
        assert "{" not in decoded and "}" not in decoded, decoded
        assert unicodedata.is_normalized("NFC", decoded)
    # The escapes that really occur (so a new kind in a refreshed corpus shows up here).
    assert escapes == {
        "\\'", '\\"', "\\`", "\\^", "\\~", "\\.",
        "\\c", "\\v", "\\u", "\\k",
        "\\l", "\\L", "\\o", "\\i", "\\ae", "\\aa", "\\dh",
    }  # fmt: skip
