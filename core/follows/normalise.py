"""Text normalisation shared by the follow language and the matcher.

Everything here is pure and deterministic: the same input always gives the same folded text, the same
words, the same match terms and the same name key, so a follow and a paper are compared in one normal form.

Three layers, each used on both sides (query and paper):

- :func:`fold` and :func:`words`: case, accents and punctuation (``"Multi-Agent"`` -> ``multi``, ``agent``);
- :func:`term` and :func:`terms`: regular English plurals on top (``models`` -> ``model``);
- :func:`strip_tex`: TeX markup and inline math out of titles and abstracts before either.

Names have their own key (:func:`name_key`) and comparison (:func:`name_matches`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from core.tex_accents import decode_tex

NameKey = tuple[str, tuple[str, ...]]
"""``(surname, given names)``, all folded; a surname of several words is joined by single spaces.

Each given name is one written name: ``"Jean-Pierre"`` and ``"J.-P."`` are one given name each, its parts
joined by ``-`` (``"jean-pierre"``, ``"j-p"``); ``"K. J."`` and ``"J.C.S."`` are two and three.
"""

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


# --- plurals ----------------------------------------------------------------------------------------------

# Words whose final s is not a plural and whose s-less form is a different, common word or acronym, so that
# folding them would raise false alerts: news/new, odds/odd, Adams/Adam (the optimiser), Mars/MAR (missing at
# random), SARS/SAR (radar), AIDS/aid, MIPS/MIP (integer programming), BIOS/bio, MEMS/MEM, alias/"inter alia".
NOT_PLURALS = frozenset({"adams", "aids", "alias", "bios", "mars", "mems", "mips", "news", "odds", "sars"})
"""Words ending in s that :func:`term` leaves alone although the plural rules would apply."""

_VOWELS = frozenset("aeiou")
_SIBILANT_PLURALS = ("ches", "shes", "sses", "xes", "zzes")


# Cached because every word of every paper goes through it, and word frequencies are very skewed: a few
# thousand words make up most of any abstract.
@lru_cache(maxsize=1 << 16)
def term(word: str) -> str:
    """The match term of one folded word: regular English plurals become singular, anything else is kept.

    ``studies`` -> ``study``; ``approaches``, ``classes``, ``boxes``, ``meshes``, ``buzzes`` lose ``es``;
    other words lose a final ``s`` (``models``, ``sizes``, ``videos``, ``ideas``, ``LLMs``). Because
    ``caches`` becomes ``cach``, a singular ending in ``che`` or ``sse`` drops its ``e`` too (``cache`` ->
    ``cach``, ``impasse`` -> ``impass``). Left alone: words of three letters or fewer, words with a digit or
    a letter outside a-z, words ending in ``ss``, ``us``, ``is`` or ``oes`` (``class``, ``status``,
    ``analysis``, ``does``, ``heroes``) and the words of :data:`NOT_PLURALS`. Irregular plurals (``mice``,
    ``data``, ``indices``, ``analyses``) are not recognised. Idempotent: ``term(term(w)) == term(w)``.
    """
    if len(word) < 4 or not (word.isascii() and word.isalpha() and word.islower()) or word in NOT_PLURALS:
        return word
    if word.endswith("s"):
        if word.endswith("ies"):
            # "studies" -> "study", but "ties" -> "tie" and "movies" -> "movy" (no dictionary to tell -ie/-y).
            return word[:-3] + "y" if len(word) >= 5 and word[-4] not in _VOWELS else word[:-1]
        if word.endswith(_SIBILANT_PLURALS) and len(word) >= 5:
            return word[:-2]
        if word.endswith(("ss", "us", "is", "oes")):
            return word
        return word[:-1]
    if word.endswith(("che", "sse")):
        return word[:-1]
    return word


def terms(s: str) -> list[str]:
    """The match terms of ``s``: :func:`words`, each through :func:`term`."""
    return list(map(term, words(s)))


# --- TeX markup -------------------------------------------------------------------------------------------

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
# escaped \$) are not math. Read by _strip_math: here only the openers, so that a closer is looked for once,
# not from every opener (as a regex with lazy bodies would, to the end of a text that has none).
_MATH_OPENER = re.compile(
    r"\$|\\[\[(]|\\begin\{(?P<env>equation|align|eqnarray|gather|multline|displaymath|math)(?P<star>\*?)\}"
)
_DOLLAR = re.compile(r"\$")
# The body of $...$: any character but a dollar or a backslash, or a backslash and the character after it.
_INLINE_BODY = re.compile(r"[^$\\]*(?:\\.[^$\\]*)*", re.DOTALL)
# \cite{key}, \ref{eq:1}, \label{x}, \begin{env}: the argument is a key or a name, never prose. Read by
# _drop_references: the command, a star and white space here; then options ([...], each to the next "]")
# and the argument ({...} without braces inside).
_REFERENCE_HEAD = re.compile(r"\\(?:cite[a-zA-Z]*|[cC]?ref|eqref|autoref|pageref|label|begin|end)\*?\s*")
_SPACES = re.compile(r"\s*")
_NO_BRACES = re.compile(r"[^{}]*")
_CONTROL_WORD = re.compile(r"\\([A-Za-z]+)\*?")
# One pass left to right, so that in "\\\\next" the first backslash pairs with the second (a line break)
# and "next" stays a word.
_CONTROL = re.compile(r"\\(?:(?P<word>[A-Za-z]+)\*?|(?P<symbol>.))", re.DOTALL)
_ADJACENT_GROUPS = re.compile(r"\}\s*\{")
_MATH_SPACE = re.compile(r"\\[,;:! ]")
_MATH_ESCAPE = re.compile(r"\\([%&#$_])")
_BRACES = str.maketrans("", "", "{}")
_SCRIPTS = str.maketrans("", "", "{}_^")


def _math(body: str) -> str:
    """Keep a formula that is plain text once styling is gone (``$k$``, ``$_2$``, ``$\\mathrm{CO}_2$``).

    Such math is part of a word or name: ``$k$-means``, ``$p$-adic``, ``MnBi$_2$Te$_4$`` -> ``MnBi2Te4``,
    ``$^{12}$C``. Sub- and superscripts are joined to their base. A formula with any other command
    (``$\\alpha$``, ``$\\frac{1}{2}$``) is not searchable text and becomes a space.
    """
    if "\\" not in body:
        return body.translate(_SCRIPTS)  # the steps below change only commands, spaces and escapes
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
    t = _strip_math(decode_tex(s))
    t = _CONTROL.sub(_control, _drop_references(t))
    # Two arguments in a row (\href{url}{text}) are two pieces of text, not one word.
    return _ADJACENT_GROUPS.sub(" ", t).translate(_BRACES)


# strip_tex's two passes that look for a closer are written out rather than as regexes: a regex looks for
# the closer again from every opener, so a text of openers without closers (``\[`` repeated, 48 KB of it
# froze the process for 21 s) costs the square of its length. Each pass below reads the text once, left to
# right, and gives exactly what re.sub gives with the regex in its comment: the same leftmost match at each
# place, the alternatives in the same order. What makes it linear: a closer that does not come after an
# opener is known at once from the text's last closer; a closer found is consumed with its span; and a walk
# or a search that several openers share is remembered, not repeated.


def _strip_math(s: str) -> str:
    r"""Each formula through :func:`_math`, as ``re.sub`` with this regex (DOTALL) would do it::

    \$\$(?P<display>.+?)\$\$ | \\\[(?P<bracket>.+?)\\\] | \\\((?P<paren>.+?)\\\)
    | \\begin\{(?P<env>equation|...|math)(?P<star>\*?)\}(?P<environment>.+?)\\end\{(?P=env)(?P=star)\}
    | \$(?!\s)(?P<inline>(?:[^$\\]|\\.)+?)(?<!\s)\$(?!\d)
    """
    if "$" not in s and "\\" not in s:
        return s
    last: dict[str, int] = {}  # the last place of each closer in s, -1 for none

    def closer_after(closer: str, at: int) -> int:
        """Where ``closer`` first comes at or after ``at``, or -1."""
        if closer not in last:
            last[closer] = s.rfind(closer)
        return s.find(closer, at) if last[closer] >= at else -1

    # Past the last closer of \[, \( and every environment only a dollar can open a formula.
    backslash_until = max(s.rfind("\\]"), s.rfind("\\)"), s.rfind("\\end{"))
    out: list[str] = []
    copied = 0  # s[:copied] is in out
    walk_end = -1  # where the last $...$ walk stopped; a dollar before it was escaped in that walk
    at = 0
    while (m := (_MATH_OPENER if at < backslash_until else _DOLLAR).search(s, at)) is not None:
        start = m.start()
        body, end = "", -1
        if s[start] == "$":
            if s.startswith("$$", start):
                found = closer_after("$$", start + 3)
                if found >= 0:
                    body, end = s[start + 2 : found], found + 2
            if end < 0 and start + 1 < len(s) and not s[start + 1].isspace():
                # The body runs to the first dollar not escaped by a backslash; a dollar inside the last walk
                # was such an escaped one, so its walk (from the same place on) stops where that one did.
                if start >= walk_end:
                    walk_end = _INLINE_BODY.match(s, start + 1).end()  # type: ignore[union-attr]
                if (
                    start + 1 < walk_end < len(s)
                    and s[walk_end] == "$"
                    and not s[walk_end - 1].isspace()
                    and not s[walk_end + 1 : walk_end + 2].isdecimal()
                ):
                    body, end = s[start + 1 : walk_end], walk_end + 1
        elif s[start + 1] in "[(":
            found = closer_after("\\]" if s[start + 1] == "[" else "\\)", start + 3)
            if found >= 0:
                body, end = s[start + 2 : found], found + 2
        else:
            closer = f"\\end{{{m.group('env')}{m.group('star')}}}"
            found = closer_after(closer, m.end() + 1)
            if found >= 0:
                body, end = s[m.end() : found], found + len(closer)
        if end < 0:
            at = start + 1  # no formula starts here
            continue
        out += (s[copied:start], _math(body))
        copied = at = end
    out.append(s[copied:])
    return "".join(out)


def _drop_references(s: str) -> str:
    r"""Each reference replaced by a space, as ``re.sub`` with this regex would do it::

        \\(?:cite[a-zA-Z]*|[cC]?ref|eqref|autoref|pageref|label|begin|end)\*?\s*(?:\[[^\]]*\]\s*)*\{[^{}]*\}

    Its only way to match is the greedy one (a shorter name, star, space or option list leaves a letter,
    ``*``, white space or ``[`` where ``[`` or ``{`` must come), so it is read here in that one way.
    """
    if "\\" not in s:
        return s
    # The last search for "]": from bracket_from, found at bracket_at (-1: none after bracket_from).
    bracket_from, bracket_at = len(s) + 1, -1
    after_options: dict[int, int] = {}  # the end of a reference whose options end at "]" at the key, or -1

    def next_bracket(at: int) -> int:
        nonlocal bracket_from, bracket_at
        if not (bracket_from <= at and (at <= bracket_at or bracket_at < 0)):
            bracket_from, bracket_at = at, s.find("]", at)
        return bracket_at

    def argument(at: int) -> int:
        """The end of ``{...}`` at ``at``, or -1."""
        if s[at : at + 1] != "{":
            return -1
        close = _NO_BRACES.match(s, at + 1).end()  # type: ignore[union-attr]
        return close + 1 if s[close : close + 1] == "}" else -1

    def options(at: int) -> int:
        """The end of the reference whose options (if any) start at ``at``, or -1."""
        chain: list[int] = []
        end = -1
        while s[at : at + 1] == "[":
            close = next_bracket(at + 1)
            if close < 0:
                break
            if close in after_options:
                end = after_options[close]
                break
            chain.append(close)
            at = _SPACES.match(s, close + 1).end()  # type: ignore[union-attr]
        else:
            end = argument(at)
        for close in chain:
            after_options[close] = end
        return end

    out: list[str] = []
    copied = 0
    at = 0
    while (m := _REFERENCE_HEAD.search(s, at)) is not None:
        end = options(m.end())
        if end < 0:
            at = m.start() + 1
            continue
        out += (s[copied : m.start()], " ")
        copied = at = end
    out.append(s[copied:])
    return "".join(out)


# --- names ------------------------------------------------------------------------------------------------


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


def _initial_compatible(q: str, a: str) -> bool:
    # "z" (from "Z." after folding) stands for any given name starting with z, in either direction.
    return q == a or (len(q) == 1 and a.startswith(q)) or (len(a) == 1 and q.startswith(a))


def _parts(names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Flatten given names into parts, with the index just past the name each part belongs to."""
    parts: list[str] = []
    ends: list[int] = []
    for name in names:
        pieces = name.split("-")
        parts += pieces
        ends += [len(parts)] * len(pieces)
    return tuple(parts), tuple(ends)


def given_compatible(query: tuple[str, ...], author: tuple[str, ...]) -> bool:
    """True if the query's given names denote the author's first given names (see :func:`name_key`).

    Compared part by part from the first; two parts fit when equal or when one is the initial of the other,
    so ``("z",)`` fits ``("zeng",)`` and ``("kevin",)`` fits ``("k", "j")``. The author may have more given
    names than the query (an empty query fits anything), but none is skipped: ``("j",)`` does not fit
    ``("k", "j")``, because a loose rule lets "Hui Li" match "Zeng-Hui Li". Beyond that:

    - a hyphenated name is one name, so the query may not stop inside it: ``("yu",)`` does not fit
      ``("yu-jhe",)`` (Yu Li and Yu-Jhe Li are different people), but one initial stands for all of it:
      ``("y",)`` fits ``("yu-jhe",)``, and ``("jean-pierre",)`` fits ``("j",)``;
    - hyphens, spaces and run-together parts are the same name: ``("yu", "jhe")``, ``("yu-jhe",)`` and
      ``("yujhe",)`` all fit one another;
    - a first given name made of initials only may be skipped when a full name follows it and the other
      side starts with a full name: ``("lee",)`` fits ``("a", "lee")`` (A. Lee Swindlehurst, who goes by
      Lee) and ``("david",)`` fits ``("c-j", "david")`` (C.-J. David Lin).
    """
    # The common case first, without the search below: the query's names, none hyphenated, each equal to or
    # an initial of the author's name at the same place. That is the search's first path (one name to one
    # name, to the end of the query), taken before any other, so the answer is the same, at a fraction of
    # the cost; a matcher asks this for every author query that a paper's author could fit.
    if len(query) <= len(author):
        for q_name, a_name in zip(query, author, strict=False):  # the author may have more
            if "-" in q_name or "-" in a_name or not _initial_compatible(q_name, a_name):
                break
        else:
            return True
        # And the common failure: two different full first names, neither hyphenated nor a prefix of the
        # other ("wei", "wen"). Every way the search could pair them needs equal names, an initial, a
        # hyphen, one name spelling the start of the other, or initials to skip; none applies.
    if query and author:
        q_first, a_first = query[0], author[0]
        if (
            len(q_first) > 1
            and len(a_first) > 1
            and "-" not in q_first
            and "-" not in a_first
            and not q_first.startswith(a_first)
            and not a_first.startswith(q_first)
        ):
            return False
    q, q_ends = _parts(query)
    a, a_ends = _parts(author)
    failed: set[tuple[int, int]] = set()

    def fits(i: int, j: int) -> bool:
        if i == len(q):
            # Done, unless the last step stopped inside one of the author's hyphenated names.
            return j == 0 or a_ends[j - 1] == j
        if j == len(a) or (i, j) in failed:
            return False
        qp, ap = q[i], a[j]
        q_starts = i == 0 or q_ends[i - 1] == i
        a_starts = j == 0 or a_ends[j - 1] == j
        found = (
            (_initial_compatible(qp, ap) and fits(i + 1, j + 1))
            # One initial for a whole hyphenated name, on either side: "J." = "Jean-Pierre". Not when another
            # initial follows it: "Y. J." are the initials of the two parts, so "Ya-Qian" is compared part
            # by part (and fails) instead of "Y." taking all of it and "J." passing for a middle name.
            or (
                q_starts
                and a_starts
                and len(qp) == 1
                and ap.startswith(qp)
                and not _initial_follows(q, i)
                and fits(i + 1, a_ends[j])
            )
            or (
                q_starts
                and a_starts
                and len(ap) == 1
                and qp.startswith(ap)
                and not _initial_follows(a, j)
                and fits(q_ends[i], j + 1)
            )
            # One name written in one piece on one side and in parts on the other: "Yujhe" = "Yu Jhe".
            or (len(qp) > 1 and any(fits(i + 1, k) for k in _spans(qp, a, j)))
            or (len(ap) > 1 and any(fits(k, j + 1) for k in _spans(ap, q, i)))
            # Leading initials before the name someone goes by: "Lee" = "A. Lee", "David" = "C.-J. David".
            or (i == j == 0 and len(qp) > 1 and _leading_initials(a, a_ends) and fits(0, a_ends[0]))
            or (i == j == 0 and len(ap) > 1 and _leading_initials(q, q_ends) and fits(q_ends[0], 0))
        )
        if not found:
            failed.add((i, j))
        return found

    return fits(0, 0)


def _spans(whole: str, parts: tuple[str, ...], start: int) -> list[int]:
    """Ends ``k > start + 1`` such that ``parts[start:k]`` written together spell ``whole``."""
    ends: list[int] = []
    joined = parts[start]
    for k in range(start + 1, len(parts)):
        if len(joined) >= len(whole):
            break
        joined += parts[k]
        if joined == whole:
            ends.append(k + 1)
    return ends


def _initial_follows(parts: tuple[str, ...], i: int) -> bool:
    return i + 1 < len(parts) and len(parts[i + 1]) == 1


def _leading_initials(parts: tuple[str, ...], ends: tuple[int, ...]) -> bool:
    # The first given name is initials only ("A.", "C.-J.") and a full given name follows it.
    first = ends[0] if parts else 0
    return 0 < first < len(parts) and all(len(p) == 1 for p in parts[:first]) and len(parts[first]) > 1


def given_letters(given: tuple[str, ...]) -> frozenset[str] | None:
    """Letters of which a query's and an author's given names share one whenever they are compatible.

    The first letter of the first given name, and, when that name is initials only and a full name follows
    (``("a", "lee")``, ``("c-j", "david")``), the first letter of that full name too. None for no given
    names (a bare surname fits any author of that surname, and an author without given names fits only a
    query without them). Every way :func:`given_compatible` can pair the first names keeps their first
    letter (equal names, an initial, one initial for a hyphenated name, a name written in one piece for
    several parts) except skipping leading initials, which pairs the other side's first name with the
    name after them; so ``given_compatible(q, a)`` implies that the letters of ``q`` and of ``a`` meet. The
    same holds for the given names :func:`name_matches` compares, which start as the author's do. A matcher
    files author queries under these letters to evaluate only those an author of the paper could fit.
    """
    parts, ends = _parts(given)
    if not parts or not all(parts):
        return None
    letters = {parts[0][0]}
    if _leading_initials(parts, ends):
        letters.add(parts[ends[0]][0])
    return frozenset(letters)


def name_matches(query: NameKey, author: NameKey) -> bool:
    """True if the query name ``query`` denotes the author ``author`` (both from :func:`name_key`).

    Surnames must agree up to leading words: the query may leave out particles the author's surname
    carries (``"schee"`` fits ``"van der schee"``), and the query's surname may start with words that the
    author's display name, which cannot mark a surname, put among the last given names: query ``"de luca"``
    fits "Anna De Luca" = ``("luca", ("anna", "de"))``, and ``"perez martin"`` (typed as ``"Pérez Martín,
    Guillem"`` or ``"Perez-Martin"``) fits "Guillem Pérez Martín" = ``("martin", ("guillem", "perez"))``.
    Then the given names must be compatible (:func:`given_compatible`).
    """
    q_surname, q_given = query
    a_surname, a_given = author
    qs, as_ = q_surname.split(), a_surname.split()
    if not qs or not as_:
        return False
    if len(qs) <= len(as_):
        extra = as_[: len(as_) - len(qs)]
        if as_[len(extra) :] != qs or not all(w in PARTICLES for w in extra):
            return False
        pool = a_given
    else:
        # Any words, not only particles: a query surname of several words was marked as one on purpose.
        extra = qs[: len(qs) - len(as_)]
        if qs[len(extra) :] != as_:
            return False
        if len(a_given) < len(extra) or list(a_given[len(a_given) - len(extra) :]) != extra:
            return False
        pool = a_given[: len(a_given) - len(extra)]
    return given_compatible(q_given, pool)
