"""Decode the TeX accent and special-letter escapes that arXiv leaves in titles and author names.

arXiv stores metadata as the submitter typed it, so feeds carry ``R\\'emy``, ``Vavry\\v{c}uk`` or
``Przemys{\\l}aw``. Readers, and the author matching in ``core.follows.match``, want ``Rémy``, ``Vavryčuk``
and
``Przemysław``. This is deliberately a small decoder, not a TeX interpreter: it only rewrites escapes it
fully understands and copies everything else through byte for byte, including math (``$x^2$``), unknown
control words (``\\Lambda``, ``\\textbf``) and stray braces.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["decode_tex"]

# Accents written with a punctuation control symbol: \'e, \"{o}, \.Z. Values are combining characters, so
# NFC composes the precomposed letter when Unicode has one and keeps base + mark when it does not.
_SYMBOL_ACCENTS = {
    "'": "\u0301",  # acute
    "`": "\u0300",  # grave
    "^": "\u0302",  # circumflex
    '"': "\u0308",  # diaeresis / umlaut
    "~": "\u0303",  # tilde
    "=": "\u0304",  # macron
    ".": "\u0307",  # dot above
}

# Accents written with a one-letter control word: \v{c}, \u{g}, \H{o}. They need a brace, a space or a
# backslash after the letter, because \vc or \vec are different control words.
_LETTER_ACCENTS = {
    "u": "\u0306",  # breve
    "v": "\u030c",  # caron (háček)
    "H": "\u030b",  # double acute (Hungarian umlaut)
    "c": "\u0327",  # cedilla
    "k": "\u0328",  # ogonek
    "r": "\u030a",  # ring above
    "d": "\u0323",  # dot below
    "b": "\u0331",  # macron below
}

# Letters that TeX spells as control words: {\l}, {\ss}, \AA. These have no decomposition, so a table is
# unavoidable here.
_SPECIAL_LETTERS = {
    "i": "ı",  # dotless i (Turkish)
    "j": "ȷ",
    "l": "ł",
    "L": "Ł",
    "o": "ø",
    "O": "Ø",
    "ss": "ß",
    "ae": "æ",
    "AE": "Æ",
    "oe": "œ",
    "OE": "Œ",
    "aa": "å",
    "AA": "Å",
    "dh": "ð",
    "DH": "Ð",
    "th": "þ",
    "TH": "Þ",
    "dj": "đ",
    "DJ": "Đ",
    "ng": "ŋ",
    "NG": "Ŋ",
}

# Under an accent, \i and \j stand for i and j: TeX drops the dot so the accent does not collide with it.
# Unicode does the same inside the precomposed letter, and í only composes from a dotted i.
_ACCENT_BASE_OVERRIDES = {"i": "i", "j": "j"}

# Escaped TeX specials that are plain characters in running text.
_ESCAPED_SYMBOLS = "&%#_$"

# The look-ahead makes a name match only as a whole control word: \o never matches the start of \oe or
# \omega, which TeX would read as different commands.
_SPECIAL = r"\\(?:" + "|".join(_SPECIAL_LETTERS) + r")(?![A-Za-z])"
_LETTER = r"[^\W\d_]"  # exactly one Unicode letter
_BASE = rf"(?:{_SPECIAL}|{_LETTER})"
_SYMBOLS_CLASS = "".join(re.escape(c) for c in _SYMBOL_ACCENTS)
_LETTERS_CLASS = "".join(_LETTER_ACCENTS)


def _accent(command: str, prefix: str) -> str:
    """An accent command followed by its argument: one letter or special letter, braced or bare."""
    return rf"{command}(?:\{{ *(?P<{prefix}_braced>{_BASE}) *\}}|(?P<{prefix}_bare>{_BASE}))"


# One complete escape, with named groups, used to decode a span the tokenizer already isolated.
_ESCAPE_RE = re.compile(
    "|".join(
        [
            # \'e \"{o} \.Z: a control symbol takes its argument immediately.
            _accent(rf"\\(?P<sym>[{_SYMBOLS_CLASS}])", "sym"),
            # \v{c} \v c \u\i: the look-ahead ends the control word, then spaces may precede the argument.
            _accent(rf"\\(?P<let>[{_LETTERS_CLASS}])(?![A-Za-z]) *", "let"),
            # \ss \o \ss{}: an empty brace pair after the word only terminates it.
            rf"(?P<special>{_SPECIAL})(?:\{{\}})?",
        ]
    )
)

# The same escape without group names, so it can appear twice in the tokenizer below.
_ESCAPE_PLAIN = re.sub(r"\(\?P<\w+>", "(?:", _ESCAPE_RE.pattern)

_TOKEN_RE = re.compile(
    # Every alternative starts with a backslash, a dollar or a brace: the lookahead lets the regex engine
    # skip plain text without trying each alternative at every position (3x faster on long abstracts).
    r"(?=[\\${])(?:"
    + "|".join(
        [
            # First, so that \$ is a dollar sign and never opens math.
            rf"(?P<escaped_symbol>\\[{re.escape(_ESCAPED_SYMBOLS)}])",
            # Math is copied verbatim: $...$, $$...$$, \(...\), \[...\]. Each dollar scans only to the next
            # dollar; \( and \[ are only their opener here, and decode_tex looks for the closer (see there).
            r"(?P<math>\$\$.+?\$\$|\$[^$]+?\$)|(?P<math_open>\\[(\[])",
            # {\'e}, {\l}: braces around a single escape only protect it and are dropped with it.
            rf"(?P<group>\{{ *(?:{_ESCAPE_PLAIN}) *\}})",
            rf"(?P<escape>{_ESCAPE_PLAIN})",
            # Any other control word is swallowed whole (so \vec is never read as \v + ec) and kept as is.
            r"(?P<other>\\(?:[A-Za-z]+|.))",
        ]
    )
    + ")",
    re.DOTALL,
)
# The closer of each math opener.
_MATH_CLOSERS = {"(": "\\)", "[": "\\]"}


def _accent_base(text: str) -> str:
    """Turn an accent argument (one letter or a special-letter control word) into the letter to accent."""
    if not text.startswith("\\"):
        return text
    name = text[1:]
    return _ACCENT_BASE_OVERRIDES.get(name) or _SPECIAL_LETTERS[name]


def _decode_escape(text: str) -> str | None:
    """Decode exactly one escape, or return None when ``text`` is not one escape we understand."""
    m = _ESCAPE_RE.fullmatch(text)
    if m is None:
        return None
    if m.group("special") is not None:
        return _SPECIAL_LETTERS[m.group("special")[1:]]
    if m.group("sym") is not None:
        mark = _SYMBOL_ACCENTS[m.group("sym")]
        base = m.group("sym_braced") or m.group("sym_bare")
    else:
        mark = _LETTER_ACCENTS[m.group("let")]
        base = m.group("let_braced") or m.group("let_bare")
    # Normalise only the new letter: NFC over the whole string would also rewrite text we must not touch.
    return unicodedata.normalize("NFC", _accent_base(base) + mark)


def _replace(m: re.Match[str]) -> str:
    kind = m.lastgroup
    text = m.group(0)
    if kind == "escaped_symbol":
        return text[1]
    # math_open: decode_tex found no closer after it (see there), so it is an unknown control symbol.
    if kind in ("group", "escape"):
        # A group is one escape wrapped in braces (and maybe spaces) that only delimit it: drop them.
        decoded = _decode_escape(text[1:-1].strip(" ") if kind == "group" else text)
        return text if decoded is None else decoded
    return text  # math and unknown control sequences stay exactly as written


def decode_tex(s: str) -> str:
    """Replace TeX accent and special-letter escapes in ``s`` with Unicode characters.

    Handles ``\\'e``, ``\\'{e}``, ``{\\'e}``, ``\\'{\\i}``, the accents ``\\' \\` \\^ \\" \\~ \\= \\.``
    and ``\\u \\v \\H \\c \\k \\r \\d \\b``, the letters ``\\i \\j \\l \\L \\o \\O \\ss \\ae \\AE \\oe
    \\OE \\aa \\AA \\dh \\DH \\th \\TH \\dj \\DJ \\ng \\NG`` and the escaped symbols ``\\& \\% \\# \\_ \\$``.
    Anything else, including math between ``$...$``, ``\\(...\\)`` or ``\\[...\\]`` and unknown control
    words, is returned unchanged. Never raises and never drops text.
    """
    if "\\" not in s:
        return s  # the common case: nothing to decode
    # One pass left to right, as re.sub would make with \(.*?\) and \[.*?\] as alternatives, but linear:
    # that regex would look for the closer from every opener, to the end of the text when there is none
    # (a title of 48 KB of "\[" took 21 s). Here an opener whose closer does not come after it is known
    # at once from the last closer in the text, and a closer found is consumed with its span.
    last = {opener: s.rfind(closer) for opener, closer in _MATH_CLOSERS.items()}
    # From here on no opener has a closer after it: the rest is one re.sub, as fast as before.
    limit = max(last.values()) - 1
    out: list[str] = []
    at = 0
    while at < limit and (m := _TOKEN_RE.search(s, at)) is not None and m.start() < limit:
        start = m.start()
        out.append(s[at:start])
        if m.lastgroup != "math_open":
            out.append(_replace(m))
            at = m.end()
            continue
        opener = s[start + 1]
        # Without a closer after it the opener is an unknown control symbol, kept as written.
        end = s.find(_MATH_CLOSERS[opener], start + 2) + 2 if last[opener] >= start + 2 else start + 2
        out.append(s[start:end])
        at = end
    out.append(_TOKEN_RE.sub(_replace, s[at:]) if at < len(s) else "")
    return "".join(out)
