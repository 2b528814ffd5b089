"""recompute the normal form of stored follows (the follow language grew: plurals, aliases, names)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Unfollow-by-text and duplicate detection compare normal forms; follows stored under an older grammar
would otherwise not be found. A follow that no longer parses keeps its old form (the matcher skips it
and logs why). If two follows of one subscriber now share a form, the older one stays and the newer is
removed: they would match exactly the same papers.

The follow language below is a frozen copy, on purpose, of what the normal form needs from core.follows
(query_parse, query_nodes, normalise, taxonomy) and core.tex_accents as they stood when this
migration's copy was taken: a migration carries its own logic, so that it does the same thing whatever the
application's code becomes (tests/test_migration_data.py checks that it agrees with the application today).
It keeps only what decides the normal form and whether a follow parses: no error messages, no matching.
Whenever the grammar changes normal forms again, add a migration with a copy of the new grammar.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# ---- Frozen copy of the follow language's normal form, not to be edited. ----

# From core.tex_accents.

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
            # Math is copied verbatim: $...$, $$...$$, \(...\), \[...\].
            r"(?P<math>\$\$.+?\$\$|\$[^$]+?\$|\\\(.*?\\\)|\\\[.*?\\\])",
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
    return _TOKEN_RE.sub(_replace, s)


# From core.follows.normalise.

NameKey = tuple[str, tuple[str, ...]]

# Letters that Unicode does not decompose into "base letter + accent", so NFKD alone would keep them.
_EXTRA_FOLDS = str.maketrans(
    {"ß": "ss", "ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "æ": "ae", "œ": "oe", "ı": "i"}
)

# A word is a run of letters and digits; ``\w`` also admits "_", which we treat as a separator.
_WORD = re.compile(r"[^\W_]+")

PARTICLES = frozenset(
    {
        "af", "al", "av", "bin", "da", "das", "de", "dei", "degli", "del", "della", "den", "der", "des",
        "di", "do", "dos", "du", "el", "ibn", "la", "le", "ten", "ter", "van", "vander", "von", "zu",
    }
)  # fmt: skip
"""Surname particles ("van der Schee", "de Gennes"), folded."""

_SUFFIXES = frozenset({"jr", "sr", "ii", "iii", "iv"})


def fold(s: str) -> str:
    """Return ``s`` case-folded with accents removed, e.g. ``"Rémy Łukasz"`` -> ``"remy lukasz"``.

    Compatibility forms are unified too (the ligature "ﬁ" becomes "fi"), and the few letters that have no
    Unicode decomposition are mapped by hand: ß->ss, ø->o, ł->l, đ/ð->d, þ->th, æ->ae, œ->oe, ı->i.
    """
    if s.isascii():
        # Most titles and abstracts are plain ASCII; lower() equals casefold() there and is much cheaper.
        return s.lower()
    # Casefolding can itself produce combining marks ("İ" -> "i" + dot above), so decompose on both sides.
    t = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", s).casefold())
    t = t.translate(_EXTRA_FOLDS)
    return "".join(c for c in t if not unicodedata.combining(c))


def words(s: str) -> list[str]:
    """Split ``s`` into folded whole words: runs of letters and digits.

    Hyphens, apostrophes, dots and all other punctuation separate words: ``"Multi-Agent RL's"`` ->
    ``["multi", "agent", "rl", "s"]``.
    """
    return _WORD.findall(fold(s))


# Commands that only style their argument: the argument is text of the sentence, so it stays where it is,
# glued to its neighbours (``\emph{multi}-agent`` -> ``multi-agent``). Old-style switches (``{\it x}``) too.
_STYLE_COMMANDS = frozenset(
    {
        "bf", "bm", "boldsymbol", "em", "emph", "hbox", "it", "mathbb", "mathbf", "mathcal", "mathfrak",
        "mathit", "mathnormal", "mathrm", "mathscr", "mathsf", "mathtt", "mbox", "operatorname", "rm", "sc",
        "sf", "sl", "text", "textbf", "textit", "textmd", "textnormal", "textrm", "textsc", "textsf",
        "textsl", "texttt", "textup", "tt", "underline",
    }
)  # fmt: skip

# Math: $$...$$, \[...\], \(...\), equation-like environments, and $...$ with pandoc's rule (no space
# just inside the dollars, no digit right after the closing one) so that prices ("$5 and $10", from an
# escaped \$) are not math.
_MATH = re.compile(
    r"\$\$(?P<display>.+?)\$\$|\\\[(?P<bracket>.+?)\\\]|\\\((?P<paren>.+?)\\\)"
    r"|\\begin\{(?P<env>equation|align|eqnarray|gather|multline|displaymath|math)(?P<star>\*?)\}"
    r"(?P<environment>.+?)\\end\{(?P=env)(?P=star)\}"
    r"|\$(?!\s)(?P<inline>(?:[^$\\]|\\.)+?)(?<!\s)\$(?!\d)",
    re.DOTALL,
)
# \cite{key}, \ref{eq:1}, \label{x}, \begin{env}: the argument is a key or a name, never prose.
_REFERENCE = re.compile(
    r"\\(?:cite[a-zA-Z]*|[cC]?ref|eqref|autoref|pageref|label|begin|end)\*?\s*(?:\[[^\]]*\]\s*)*\{[^{}]*\}"
)
_CONTROL_WORD = re.compile(r"\\([A-Za-z]+)\*?")
# One pass left to right, so that in "\\\\next" the first backslash pairs with the second (a line break)
# and "next" stays a word.
_CONTROL = re.compile(r"\\(?:(?P<word>[A-Za-z]+)\*?|(?P<symbol>.))", re.DOTALL)
_ADJACENT_GROUPS = re.compile(r"\}\s*\{")
_MATH_SPACE = re.compile(r"\\[,;:! ]")
_MATH_ESCAPE = re.compile(r"\\([%&#$_])")
_BRACES = str.maketrans("", "", "{}")
_SCRIPTS = str.maketrans("", "", "{}_^")


def _math(m: re.Match[str]) -> str:
    """Keep a formula that is plain text once styling is gone (``$k$``, ``$_2$``, ``$\\mathrm{CO}_2$``).

    Such math is part of a word or name: ``$k$-means``, ``$p$-adic``, ``MnBi$_2$Te$_4$`` -> ``MnBi2Te4``,
    ``$^{12}$C``. Sub- and superscripts are joined to their base. A formula with any other command
    (``$\\alpha$``, ``$\\frac{1}{2}$``) is not searchable text and becomes a space.
    """
    body = next(m.group(k) for k in ("display", "bracket", "paren", "environment", "inline") if m.group(k))
    body = _CONTROL_WORD.sub(lambda c: "" if c.group(1) in _STYLE_COMMANDS else c.group(0), body)
    body = _MATH_ESCAPE.sub(r"\1", _MATH_SPACE.sub(" ", body)).translate(_SCRIPTS)
    return " " if "\\" in body else body


def _control(m: re.Match[str]) -> str:
    word = m.group("word")
    if word is not None:
        # A styling command vanishes so that its argument joins the text; any other command stands for a
        # symbol or a space (\textendash, \quad, \LaTeX) and becomes a space, which never glues two words.
        return "" if word in _STYLE_COMMANDS else " "
    # \- (a hyphenation hint), \/ (italic correction) and \@ are invisible; \, \\ \; and the rest are spaces.
    return "" if m.group("symbol") in "-/@" else " "


def strip_tex(s: str) -> str:
    """Remove TeX markup from a title or abstract, keeping the words a reader sees.

    TeX accents are decoded first (:func:`core.tex_accents.decode_tex`:
    ``Schr\\"odinger`` -> ``Schrödinger``).
    Math (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``, ``\\begin{equation}`` and its kin) becomes a
    space unless it is plain text such as ``$k$`` or ``$_2$``, which stays in place (see ``_math``). Styling
    commands keep their argument (``\\emph{word}``, ``\\textbf``, ``\\textit``, ``\\texttt``, ``\\mathrm``,
    ``{\\it word}``); references lose theirs (``\\cite{key}``, ``\\ref``, ``\\eqref``, ``\\label``,
    ``\\begin{env}``); every other command (``\\alpha``, ``\\quad``, ``\\url``) becomes a space and its braced
    argument, if any, stays as text. Braces go (a space between two adjacent groups). Text without ``\\``,
    ``$``, ``{`` or ``}`` is returned unchanged.
    """
    if "\\" not in s and "$" not in s and "{" not in s and "}" not in s:
        return s
    t = _MATH.sub(_math, decode_tex(s))
    t = _CONTROL.sub(_control, _REFERENCE.sub(" ", t))
    # Two arguments in a row (\href{url}{text}) are two pieces of text, not one word.
    return _ADJACENT_GROUPS.sub(" ", t).translate(_BRACES)


def _is_particle(token: str, *, any_case: bool) -> bool:
    ws = words(token)
    return len(ws) == 1 and ws[0] in PARTICLES and (any_case or token[:1].islower())


def _is_suffix(token: str) -> bool:
    ws = words(token)
    return len(ws) == 1 and ws[0] in _SUFFIXES


_HYPHENS = frozenset("-\u2010\u2011")


def _given_names(tokens: list[str]) -> tuple[str, ...]:
    """One entry per written given name, hyphenated parts joined by ``-``.

    ``["Jean-Pierre"]`` -> ``("jean-pierre",)`` and ``["J.-P."]`` -> ``("j-p",)``, but ``["J.C.S."]`` ->
    ``("j", "c", "s")``: only a hyphen makes one name of two parts (J.C.S. Rocha has three given names, as
    the Brazilian José Carlos S... Rocha). A hyphen at the start of a token continues the previous name, as
    in arXiv's ``"M. -O. Bettler"``.
    """
    names: list[str] = []
    for token in tokens:
        folded = fold(token)
        end = 0
        for m in _WORD.finditer(folded):
            joined = any(c in _HYPHENS for c in folded[end : m.start()])
            if joined and names:
                names[-1] += "-" + m.group()
            else:
                names.append(m.group())
            end = m.end()
    return tuple(names)


def name_key(name: str, *, particles_any_case: bool = False) -> NameKey:
    """Return ``(surname, given names)`` for a person's name, folded.

    ``"Li, Zeng"`` (comma form: surname first) and ``"Zeng Li"`` both give ``("li", ("zeng",))``. Without a
    comma the last word is the surname, together with the particles right before it (``"Wilke van der
    Schee"`` -> ``("van der schee", ("wilke",))``). A particle counts only when written in lower case,
    because in display names a capitalised "De" or "Van" may as well be a given name ("Van Nguyen"); pass
    ``particles_any_case=True`` for text typed by users, who often write everything in lower case. The
    first word is never taken as a particle ("Le Wang" is given name "le", surname "wang"). Generational
    suffixes (Jr., Sr., II, III, IV) are dropped. A hyphenated surname becomes words joined by spaces
    (``"Garcia-Lopez"`` -> ``"garcia lopez"``); a hyphenated given name stays one name with its parts joined
    by ``-`` (``"Yu-Jhe"`` -> ``"yu-jhe"``, ``"J.-P."`` -> ``"j-p"``; see ``_given_names``).
    """
    text = " ".join(name.split())
    if "," in text:
        last, _, first = text.partition(",")
        first_tokens = first.split()
        if first_tokens and all(_is_suffix(t) for t in first_tokens) and len(last.split()) > 1:
            # "John Smith, Jr." is not the comma form: the part after the comma is only a suffix.
            return name_key(last, particles_any_case=particles_any_case)
        return " ".join(words(last)), _given_names([t for t in first_tokens if not _is_suffix(t)])
    tokens = [t for t in text.split() if words(t)]
    while len(tokens) > 2 and _is_suffix(tokens[-1]):
        tokens.pop()
    if not tokens:
        return "", ()
    start = len(tokens) - 1
    while start > 1 and _is_particle(tokens[start - 1], any_case=particles_any_case):
        start -= 1
    surname = " ".join(w for t in tokens[start:] for w in words(t))
    return surname, _given_names(tokens[:start])


def query_name_keys(name: str) -> tuple[NameKey, ...]:
    """Return the readings of a name typed in a query: one, or two when the name may be a bare surname.

    ``"van der Schee"`` reads both as given name "van" + surname "der schee" and as the surname
    "van der schee" alone; a name matches if either reading does (see :func:`name_matches`). TeX accents
    are decoded first, for names pasted from a TeX source (``R\\'emy`` -> ``Rémy``).
    """
    name = decode_tex(name)
    primary = name_key(name, particles_any_case=True)
    keys = [primary]
    tokens = [t for t in name.split() if words(t)]
    if "," not in name and len(tokens) >= 2 and all(_is_particle(t, any_case=True) for t in tokens[:-1]):
        whole: NameKey = (" ".join(w for t in tokens for w in words(t)), ())
        if whole != primary:
            keys.append(whole)
    return tuple(keys)


# From core.follows.taxonomy.

# Archives divided into subject classes, with the subject part of each category id as arXiv spells it.
_SUBJECTS: dict[str, tuple[str, ...]] = {
    "astro-ph": ("CO", "EP", "GA", "HE", "IM", "SR"),
    "cond-mat": (
        "dis-nn", "mes-hall", "mtrl-sci", "other", "quant-gas", "soft", "stat-mech", "str-el", "supr-con",
    ),
    "cs": (
        "AI", "AR", "CC", "CE", "CG", "CL", "CR", "CV", "CY", "DB", "DC", "DL", "DM", "DS", "ET", "FL", "GL",
        "GR", "GT", "HC", "IR", "IT", "LG", "LO", "MA", "MM", "MS", "NA", "NE", "NI", "OH", "OS", "PF", "PL",
        "RO", "SC", "SD", "SE", "SI", "SY",
    ),
    "econ": ("EM", "GN", "TH"),
    "eess": ("AS", "IV", "SP", "SY"),
    "math": (
        "AC", "AG", "AP", "AT", "CA", "CO", "CT", "CV", "DG", "DS", "FA", "GM", "GN", "GR", "GT", "HO", "IT",
        "KT", "LO", "MG", "MP", "NA", "NT", "OA", "OC", "PR", "QA", "RA", "RT", "SG", "SP", "ST",
    ),
    "nlin": ("AO", "CD", "CG", "PS", "SI"),
    "physics": (
        "acc-ph", "ao-ph", "app-ph", "atm-clus", "atom-ph", "bio-ph", "chem-ph", "class-ph", "comp-ph",
        "data-an", "ed-ph", "flu-dyn", "gen-ph", "geo-ph", "hist-ph", "ins-det", "med-ph", "optics",
        "plasm-ph", "pop-ph", "soc-ph", "space-ph",
    ),
    "q-bio": ("BM", "CB", "GN", "MN", "NC", "OT", "PE", "QM", "SC", "TO"),
    "q-fin": ("CP", "EC", "GN", "MF", "PM", "PR", "RM", "ST", "TR"),
    "stat": ("AP", "CO", "ME", "ML", "OT", "TH"),
}  # fmt: skip

# Archives that are a single category: the archive id is the category id.
_UNDIVIDED = ("gr-qc", "hep-ex", "hep-lat", "hep-ph", "hep-th", "math-ph", "nucl-ex", "nucl-th", "quant-ph")

DIVIDED_ARCHIVES = frozenset(_SUBJECTS)
"""Archives whose categories are ``archive.SUBJECT`` (``cs.DC``); ``cat:cs`` or ``cat:cs.*`` is all of one."""

ARCHIVES = DIVIDED_ARCHIVES | frozenset(_UNDIVIDED)
"""Every current arXiv archive id, lower case as arXiv writes them."""

CATEGORIES = frozenset(
    [f"{archive}.{subject}" for archive, subjects in _SUBJECTS.items() for subject in subjects]
    + list(_UNDIVIDED)
)
"""Every current arXiv category id in arXiv's spelling (``cs.AI``, ``cond-mat.soft``, ``hep-th``).

Includes the six alias ids of :data:`ALIASES`, because papers are listed under them too.
"""

ALIASES = {
    "math.MP": "math-ph",
    "stat.TH": "math.ST",
    "math.IT": "cs.IT",
    "q-fin.EC": "econ.GN",
    "cs.SY": "eess.SY",
    "cs.NA": "math.NA",
}
"""Pairs of ids that arXiv treats as one category (alias -> canonical id, as arXiv defines them).

arXiv lists a paper under both ids (every cs.IT paper in the recorded feed also carries math.IT), so either
id in a follow matches it; the canonical form of ``cat:math.IT`` is ``cat:cs.IT``.
"""

_SPELLING = {c.lower(): c for c in CATEGORIES | DIVIDED_ARCHIVES}
_CANONICAL = {alias.lower(): target.lower() for alias, target in ALIASES.items()}


def spell(category: str) -> str:
    """arXiv's spelling of a category or archive id given in any case: ``"cs.dc"`` -> ``"cs.DC"``.

    Unknown ids come back lower-cased.
    """
    return _SPELLING.get(category.lower(), category.lower())


def canonical_category(category: str) -> str:
    """The lower-case id that stands for ``category`` and its alias: ``"math.MP"`` -> ``"math-ph"``."""
    folded = category.strip().lower()
    return _CANONICAL.get(folded, folded)


# From core.follows.query_parse and core.follows.query_nodes.

MAX_QUERY_CHARS = 1000
MAX_TERMS = 50
MAX_DEPTH = 20
"""Limits that keep one follow cheap to store, show and evaluate (depth counts parentheses and NOTs)."""

FIELDS = ("cat", "au", "ti", "abs", "id")
OPERATORS = frozenset({"AND", "OR", "NOT", "ANDNOT"})

_CATEGORY_IDS = frozenset(c.lower() for c in CATEGORIES)

_QUOTES = '"“”„'
_CLOSING_QUOTES = '"“”'
_FIELD = re.compile(r"([A-Za-z]+):(.*)", re.DOTALL)
_CATEGORY = re.compile(r"([a-z][a-z-]*)(?:\.([a-z][a-z-]*|\*))?")
_NEW_ID = re.compile(r"([0-9]{4}\.[0-9]{4,5})(v[0-9]+)?")
_OLD_ID = re.compile(r"([a-z][a-z-]*)(?:\.[a-z]{2})?/([0-9]{7})(v[0-9]+)?")


class _QueryError(ValueError):
    """A follow that does not parse (the copy keeps no message: the migration only skips such a follow)."""


class _Token(NamedTuple):
    kind: str  # "(", ")", "op", "term", "end"
    pos: int
    text: str = ""
    field: str = ""
    value: str = ""
    value_pos: int = 0
    quoted: bool = False


# The tree: tagged tuples, so that equal meanings compare equal as the original's frozen dataclasses do:
# ("words", field, display), ("author", readings), ("cat", category, archive), ("id", arxiv_id),
# ("and", children), ("or", children), ("not", child).
_Node = tuple[Any, ...]


def _read_phrase(text: str, start: int) -> tuple[str, int]:
    k = start + 1
    while k < len(text) and text[k] not in _CLOSING_QUOTES:
        k += 2 if text[k] == "\\" else 1
    if k >= len(text):
        raise _QueryError("unterminated quoted phrase")
    content = text[start + 1 : k]
    if not content.strip():
        raise _QueryError("empty quoted phrase")
    return content, k + 1


def _run_end(text: str, start: int) -> int:
    j, n = start, len(text)
    while j < n and not text[j].isspace() and text[j] not in "()" and text[j] not in _QUOTES:
        j += 2 if text[j] == "\\" and j + 1 < n and not text[j + 1].isspace() else 1
    return j


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "()":
            tokens.append(_Token("(" if c == "(" else ")", i, text=c))
            i += 1
        elif c in _QUOTES:
            value, end = _read_phrase(text, i)
            tokens.append(_Token("term", i, text=text[i:end], value=value, value_pos=i + 1, quoted=True))
            i = end
        else:
            j = _run_end(text, i)
            run = text[i:j]
            if run in OPERATORS:
                tokens.append(_Token("op", i, text=run))
                i = j
                continue
            m = _FIELD.fullmatch(run)
            if m is None:
                tokens.append(_Token("term", i, text=run, value=run, value_pos=i))
                i = j
                continue
            field = m.group(1).lower()
            if field not in FIELDS:
                raise _QueryError("unknown field")
            value_pos = i + len(m.group(1)) + 1
            if m.group(2):
                value, end, quoted = m.group(2), j, False
            elif j < n and text[j] in _QUOTES:
                value, end = _read_phrase(text, j)
                value_pos, quoted = j + 1, True
            else:
                raise _QueryError("expected a word or phrase after a field")
            tokens.append(
                _Token(
                    "term", i, text=text[i:end], field=field, value=value, value_pos=value_pos, quoted=quoted
                )
            )
            i = end
    tokens.append(_Token("end", n))
    return tokens


def _term(token: _Token) -> _Node:
    value, field = token.value, token.field
    if field in ("", "ti", "abs"):
        if "*" in value:
            raise _QueryError("wildcards are not supported")
        if not token.quoted and not field and len(value) > 1 and value.startswith("-"):
            raise _QueryError("a leading '-' does not exclude")
        found = tuple(words(strip_tex(value)))
        if not found:
            raise _QueryError("nothing to search for")
        kind = "ti" if field == "ti" else "abs" if field == "abs" else "any"
        return ("words", kind, found)
    if field == "au":
        readings = query_name_keys(value)
        if not readings[0][0]:
            raise _QueryError("no name")
        return ("author", readings)
    if field == "cat":
        return _category(value)
    return ("id", _arxiv_id(value.strip()))


def _category(value: str) -> _Node:
    shown = value.strip()
    m = _CATEGORY.fullmatch(shown.lower())
    if m is None:
        raise _QueryError("not a category")
    archive, subject = m.group(1), m.group(2)
    if subject is None or subject == "*":
        if archive in DIVIDED_ARCHIVES:
            return ("cat", archive, True)
        if archive in ARCHIVES:
            return ("cat", archive, False)  # hep-th, hep-th.*: the archive is the category
        raise _QueryError("unknown arXiv archive")
    full = f"{archive}.{subject}"
    if full in _CATEGORY_IDS:
        return ("cat", canonical_category(full), False)
    raise _QueryError("unknown category")


def _arxiv_id(value: str) -> str:
    bare = value[6:] if value.lower().startswith("arxiv:") else value
    new = _NEW_ID.fullmatch(bare)
    old = _OLD_ID.fullmatch(bare.lower())
    if new is not None:
        ident, version = new.group(1), new.group(2)
    elif old is not None:
        # "math.GT/0309136" and "math/0309136" are the same paper; arXiv's canonical id drops the class.
        ident, version = f"{old.group(1)}/{old.group(2)}", old.group(3)
    else:
        raise _QueryError("not an arXiv id")
    if version:
        raise _QueryError("unexpected version suffix")
    return ident


def _combine(items: list[_Node], kind: str) -> _Node:
    # Flatten nested nodes of the same kind and drop repeated operands, so equal meanings print equally.
    flat: list[_Node] = []
    for item in items:
        for child in item[1] if item[0] == kind else (item,):
            if child not in flat:
                flat.append(child)
    return flat[0] if len(flat) == 1 else (kind, tuple(flat))


def _not(item: _Node) -> _Node:
    return item[1] if item[0] == "not" else ("not", item)


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.terms = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def is_op(self, *names: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text in names

    def parse(self) -> _Node:
        if self.peek().kind == "end":
            raise _QueryError("empty query")
        node = self.or_expr(0)
        if self.peek().kind != "end":
            raise _QueryError("unexpected ')'")
        return node

    def or_expr(self, depth: int) -> _Node:
        items = [self.and_expr(depth)]
        while self.is_op("OR"):
            self.take()
            items.append(self.and_expr(depth))
        return _combine(items, "or")

    def and_expr(self, depth: int) -> _Node:
        items = [self.unary(depth)]
        while True:
            token = self.peek()
            if self.is_op("AND", "ANDNOT"):
                self.take()
                item = self.unary(depth)
                items.append(_not(item) if token.text == "ANDNOT" else item)
            elif token.kind in ("term", "(") or self.is_op("NOT"):
                items.append(self.unary(depth))
            else:
                return _combine(items, "and")

    def unary(self, depth: int) -> _Node:
        if self.is_op("NOT"):
            self.check_depth(depth + 1)
            self.take()
            return _not(self.unary(depth + 1))
        return self.primary(depth)

    def primary(self, depth: int) -> _Node:
        token = self.peek()
        if token.kind == "term":
            self.terms += 1
            if self.terms > MAX_TERMS:
                raise _QueryError("too many search terms")
            self.take()
            return _term(token)
        if token.kind == "(":
            self.check_depth(depth + 1)
            self.take()
            inner = self.or_expr(depth + 1)
            if self.peek().kind != ")":
                raise _QueryError("expected a closing ')'")
            self.take()
            return inner
        raise _QueryError("expected a search term")

    def check_depth(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _QueryError("query nested too deeply")


def _parse(text: str) -> _Node:
    if len(text) > MAX_QUERY_CHARS:
        raise _QueryError("query too long")
    return _Parser(_lex(text)).parse()


def _canonical(node: _Node) -> str:
    """The normal form: folded words, explicit ``AND``/``OR``/``NOT``, arXiv-style categories."""
    kind = node[0]
    if kind == "words":
        _, field, display = node
        value = display[0] if len(display) == 1 else '"' + " ".join(display) + '"'
        return value if field == "any" else f"{field}:{value}"
    if kind == "author":
        readings = node[1]
        surname, given = readings[0]
        text = " ".join((*given, surname))
        if query_name_keys(text) != readings:
            text = f"{surname}, {' '.join(given)}".rstrip()
        return f"au:{text}" if " " not in text and "," not in text else f'au:"{text}"'
    if kind == "cat":
        _, category, archive = node
        return f"cat:{category}.*" if archive else f"cat:{spell(category)}"
    if kind == "id":
        return f"id:{node[1]}"
    if kind == "and":
        return " AND ".join(f"({_canonical(c)})" if c[0] == "or" else _canonical(c) for c in node[1])
    if kind == "or":
        return " OR ".join(_canonical(c) for c in node[1])
    inner = _canonical(node[1])
    return f"NOT ({inner})" if node[1][0] in ("and", "or") else f"NOT {inner}"


# ---- End of the frozen copy. ----


def upgrade() -> None:
    bind = op.get_bind()
    follow = sa.table(
        "follow",
        sa.column("id", sa.Integer),
        sa.column("subscriber_id", sa.Integer),
        sa.column("query", sa.Text),
        sa.column("canonical", sa.Text),
    )
    seen: set[tuple[int, str]] = set()
    rows = bind.execute(sa.select(follow.c.id, follow.c.subscriber_id, follow.c.query).order_by(follow.c.id))
    for follow_id, subscriber_id, query in rows.fetchall():
        try:
            canonical = _canonical(_parse(query))
        except _QueryError:
            continue
        if (subscriber_id, canonical) in seen:
            bind.execute(sa.delete(follow).where(follow.c.id == follow_id))
            continue
        seen.add((subscriber_id, canonical))
        bind.execute(sa.update(follow).where(follow.c.id == follow_id).values(canonical=canonical))


def downgrade() -> None:
    pass  # the old normal form cannot be recomputed; the new one is a valid value for older code too
