"""Text normalisation shared by the follow language and the matcher.

Everything here is pure and deterministic: the same input always gives the same folded text, the same
words and the same name key, so a follow and a paper are compared in one normal form.
"""

from __future__ import annotations

import re
import unicodedata

NameKey = tuple[str, tuple[str, ...]]
"""``(surname, given-name tokens)``, all folded; a surname of several words is joined by single spaces."""

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


def _is_particle(token: str, *, any_case: bool) -> bool:
    ws = words(token)
    return len(ws) == 1 and ws[0] in PARTICLES and (any_case or token[:1].islower())


def _is_suffix(token: str) -> bool:
    ws = words(token)
    return len(ws) == 1 and ws[0] in _SUFFIXES


def name_key(name: str, *, particles_any_case: bool = False) -> NameKey:
    """Return ``(surname, given-name tokens)`` for a person's name, folded.

    ``"Li, Zeng"`` (comma form: surname first) and ``"Zeng Li"`` both give ``("li", ("zeng",))``. Without a
    comma the last word is the surname, together with the particles right before it (``"Wilke van der
    Schee"`` -> ``("van der schee", ("wilke",))``). A particle counts only when written in lower case,
    because in display names a capitalised "De" or "Van" may as well be a given name ("Van Nguyen"); pass
    ``particles_any_case=True`` for text typed by users, who often write everything in lower case. The
    first word is never taken as a particle ("Le Wang" is given name "le", surname "wang"). Generational
    suffixes (Jr., Sr., II, III, IV) are dropped. Hyphenated parts become separate tokens.
    """
    text = " ".join(name.split())
    if "," in text:
        last, _, first = text.partition(",")
        first_tokens = first.split()
        if first_tokens and all(_is_suffix(t) for t in first_tokens) and len(last.split()) > 1:
            # "John Smith, Jr." is not the comma form: the part after the comma is only a suffix.
            return name_key(last, particles_any_case=particles_any_case)
        given = tuple(w for t in first_tokens if not _is_suffix(t) for w in words(t))
        return " ".join(words(last)), given
    tokens = [t for t in text.split() if words(t)]
    while len(tokens) > 2 and _is_suffix(tokens[-1]):
        tokens.pop()
    if not tokens:
        return "", ()
    start = len(tokens) - 1
    while start > 1 and _is_particle(tokens[start - 1], any_case=particles_any_case):
        start -= 1
    surname = " ".join(w for t in tokens[start:] for w in words(t))
    given = tuple(w for t in tokens[:start] for w in words(t))
    return surname, given


def query_name_keys(name: str) -> tuple[NameKey, ...]:
    """Return the readings of a name typed in a query: one, or two when the name may be a bare surname.

    ``"van der Schee"`` reads both as given name "van" + surname "der schee" and as the surname
    "van der schee" alone; a name matches if either reading does (see :func:`name_matches`).
    """
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


def given_compatible(query: tuple[str, ...], author: tuple[str, ...]) -> bool:
    """True if the query's given-name tokens pair, position by position, with the author's first ones.

    Tokens pair when equal or when one is the initial of the other, so ``("z",)`` fits ``("zeng",)`` and
    ``("kevin",)`` fits ``("k", "j")``. The author may have more given names than the query (an empty query
    fits anything), but not fewer, and none is skipped: ``("j",)`` does not fit ``("k", "j")``, because
    a loose rule lets "Hui Li" match "Zeng-Hui Li".
    """
    return len(query) <= len(author) and all(
        _initial_compatible(q, a) for q, a in zip(query, author[: len(query)], strict=True)
    )


def name_matches(query: NameKey, author: NameKey) -> bool:
    """True if the query name ``query`` denotes the author ``author`` (both from :func:`name_key`).

    Surnames must agree up to leading particles: the query may leave out particles the author's surname
    carries (``"schee"`` fits ``"van der schee"``), or carry particles that the author's display name
    capitalised into the given names (query ``"de luca"`` fits "Anna De Luca" = ``("luca", ("anna",
    "de"))``). Then the given names must be compatible (:func:`given_compatible`).
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
        extra = qs[: len(qs) - len(as_)]
        if qs[len(extra) :] != as_ or not all(w in PARTICLES for w in extra):
            return False
        if len(a_given) < len(extra) or list(a_given[len(a_given) - len(extra) :]) != extra:
            return False
        pool = a_given[: len(a_given) - len(extra)]
    return given_compatible(q_given, pool)
