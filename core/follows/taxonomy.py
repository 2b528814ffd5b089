"""The arXiv category taxonomy: every current category, the archives, aliases, and suggestions for typos.

Source: arXiv's category taxonomy (arxiv.org/category_taxonomy). It changes rarely (a new category every few
years); when it does, add the id to ``_SUBJECTS`` or ``_UNDIVIDED`` below. A follow on a category that is not
listed here is refused, because it would silently never match.

Pure and small: sets and dicts built once at import, plus :func:`closest` for "did you mean" hints.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from types import MappingProxyType

__all__ = [
    "ALIASES",
    "ARCHIVES",
    "CATEGORIES",
    "DIVIDED_ARCHIVES",
    "SUBSUMED",
    "archive_of",
    "canonical_category",
    "closest",
    "spell",
    "suggest_category",
]

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

ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "math.MP": "math-ph",
        "stat.TH": "math.ST",
        "math.IT": "cs.IT",
        "q-fin.EC": "econ.GN",
        "cs.SY": "eess.SY",
        "cs.NA": "math.NA",
    }
)
"""Pairs of ids that arXiv treats as one category (alias -> canonical id, as arXiv defines them).

arXiv lists a paper under both ids (every cs.IT paper in the recorded feed also carries math.IT), so either
id in a follow matches it; the canonical form of ``cat:math.IT`` is ``cat:cs.IT``.
"""

SUBSUMED: Mapping[str, str] = MappingProxyType(
    {
        "acc-phys": "physics.acc-ph",
        "adap-org": "nlin.AO",
        "alg-geom": "math.AG",
        "ao-sci": "physics.ao-ph",
        "atom-ph": "physics.atom-ph",
        "bayes-an": "physics.data-an",
        "chao-dyn": "nlin.CD",
        "chem-ph": "physics.chem-ph",
        "cmp-lg": "cs.CL",
        "comp-gas": "nlin.CG",
        "dg-ga": "math.DG",
        "funct-an": "math.FA",
        "mtrl-th": "cond-mat.mtrl-sci",
        "patt-sol": "nlin.PS",
        "plasm-ph": "physics.plasm-ph",
        "q-alg": "math.QA",
        "solv-int": "nlin.SI",
        "supr-con": "cond-mat.supr-con",
    }
)
"""Archives of the 1990s that were folded into categories; no new paper is listed under them."""

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


def archive_of(category: str) -> str:
    """The archive part of a category id, lower case: ``"cs.DC"`` -> ``"cs"``, ``"hep-th"`` -> itself."""
    return category.strip().lower().partition(".")[0]


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance where swapping two neighbours also costs one edit ("sc" -> "cs")."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


def closest(word: str, options: Iterable[str], limit: int = 4) -> list[str]:
    """The options that ``word`` most plausibly misspells, best first; empty when none is close.

    Compared case-insensitively, in three tiers, the first that finds anything wins: options that start
    with ``word`` (``hep`` -> ``hep-th``), options one typing slip away (a letter added, dropped, changed or
    two swapped: ``sc.DC`` -> ``cs.DC``), and options ``difflib`` finds at least 85% similar. Ties go to
    the option that shares the longest beginning with ``word``.
    """
    w = word.lower()
    choices = sorted(dict.fromkeys(options), key=lambda o: (len(o), o.lower()))
    if not w:
        return []
    if len(w) >= 2:
        prefixed = [o for o in choices if o.lower().startswith(w) and o.lower() != w]
        if prefixed:
            return prefixed[:limit]

    def similarity(o: str) -> tuple[float, int]:
        shared = next((k for k, (x, y) in enumerate(zip(w, o.lower(), strict=False)) if x != y), len(w))
        return difflib.SequenceMatcher(None, w, o.lower()).ratio(), shared

    slips = [o for o in choices if _edit_distance(w, o.lower()) <= 1]
    if slips:
        return sorted(slips, key=similarity, reverse=True)[:limit]
    close = [o for o in choices if similarity(o)[0] >= 0.85]
    return sorted(close, key=similarity, reverse=True)[:limit]


def suggest_category(value: str) -> list[str]:
    """Real category ids (or archives) that an unknown ``cat:`` value most likely meant.

    A subject class that exists in another archive wins (``cs.ML`` -> ``stat.ML``); otherwise the closest
    ids by spelling (:func:`closest`); an old archive gives its successor (``chao-dyn`` -> ``nlin.CD``).
    """
    folded = value.strip().lower()
    archive, dot, subject = folded.partition(".")
    if archive in SUBSUMED and not dot:
        return [SUBSUMED[archive]]
    if dot and subject not in ("", "*") and archive in ARCHIVES:
        elsewhere = sorted(c for c in CATEGORIES if c.lower().partition(".")[2] == subject)
        if elsewhere:
            return elsewhere[:4]
    if dot and subject == "*":
        return [f"{a}.*" for a in closest(archive, DIVIDED_ARCHIVES)]
    if not dot:
        # A bare name is meant as an archive ("hepth", "sc"); only if none is close, as a category ("csLG").
        return closest(folded, ARCHIVES) or closest(folded, CATEGORIES)
    return closest(folded, CATEGORIES)
