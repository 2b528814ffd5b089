"""Text from readers' libraries (and from feeds) is reduced in time linear in its length, to the same result.

Hostile texts: openers without closers (``\\[``, ``\\(``, ``\\begin{equation}``, ``\\cite[``, ``<span``),
dollars, braces nested or left open, runs of backslashes, white space inside a RIS line. Each is read
through the whole library reader in each format, at 16 KB and at 64 KB (at 256 KB and 1 MB in
`make test-slow`, after a cheap step at 4 KB and 16 KB, so that a quadratic reader fails in seconds
instead of running for hours): four times the text may cost at most ten times the CPU (a quadratic step
costs sixteen). And the linear readers give exactly what the regexes they replace gave (kept here as
the oracle, fine on short texts): 300 examples in `make test`, 3,000 in `make test-slow`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.library_file import FORMATS, PIECES
from core import tex_accents
from core.follows import normalise
from core.taste.library_file import plain_text, read_library
from core.tex_accents import decode_tex

# --- the oracle: the regexes the linear readers replace ---------------------------------------------------

_OLD_TOKEN_RE = re.compile(
    tex_accents._TOKEN_RE.pattern.replace(
        r"(?P<math>\$\$.+?\$\$|\$[^$]+?\$)|(?P<math_open>\\[(\[])",
        r"(?P<math>\$\$.+?\$\$|\$[^$]+?\$|\\\(.*?\\\)|\\\[.*?\\\])",
    ),
    re.DOTALL,
)
_OLD_MATH = re.compile(
    r"\$\$(?P<display>.+?)\$\$|\\\[(?P<bracket>.+?)\\\]|\\\((?P<paren>.+?)\\\)"
    r"|\\begin\{(?P<env>equation|align|eqnarray|gather|multline|displaymath|math)(?P<star>\*?)\}"
    r"(?P<environment>.+?)\\end\{(?P=env)(?P=star)\}"
    r"|\$(?!\s)(?P<inline>(?:[^$\\]|\\.)+?)(?<!\s)\$(?!\d)",
    re.DOTALL,
)
_OLD_REFERENCE = re.compile(
    r"\\(?:cite[a-zA-Z]*|[cC]?ref|eqref|autoref|pageref|label|begin|end)\*?\s*(?:\[[^\]]*\]\s*)*\{[^{}]*\}"
)
_OLD_RICH_TEXT = re.compile(r"</?(?:i|b|sub|sup|sc)>|<span\b[^>]*>|</span>", re.IGNORECASE)


def _old_decode_tex(s: str) -> str:
    assert "math_open" not in _OLD_TOKEN_RE.groupindex, "the oracle must be the old tokenizer"
    return _OLD_TOKEN_RE.sub(tex_accents._replace, s) if "\\" in s else s


def _old_strip_tex(s: str) -> str:
    if "\\" not in s and "$" not in s and "{" not in s and "}" not in s:
        return s

    def math(m: re.Match[str]) -> str:
        kinds = ("display", "bracket", "paren", "environment", "inline")
        return normalise._math(next(m.group(k) for k in kinds if m.group(k)))

    t = _OLD_MATH.sub(math, _old_decode_tex(s))
    t = normalise._CONTROL.sub(normalise._control, _OLD_REFERENCE.sub(" ", t))
    return normalise._ADJACENT_GROUPS.sub(" ", t).translate(normalise._BRACES)


# Pieces of TeX that open, close, escape and nest one another, and the odd space and digit.
_PIECES = [
    "\\[", "\\]", "\\(", "\\)", "$", "$$", "\\$", "\\\\", "\\", "{", "}", "{x}", "[", "]", "*", "_", "^",
    "\\begin{equation}", "\\end{equation}", "\\begin{align*}", "\\end{align*}", "\\end{align}",
    "\\begin{math}", "\\end{math}", "\\begin{", "\\end{", "\\begin", "\\cite", "\\citep", "\\ref",
    "\\Cref", "\\eqref", "\\label", "\\emph{", "\\mathrm{", "\\alpha", "\\,", "\\%", "\\'e", '\\"{o}',
    "\\v c", "{\\l}", "\\ss", "a", "x", "1", " ", "\t", "\n", "\u00a0", "\u0663", "é", "<span>", "<span",
    "</span>", ">", "<i>",
]  # fmt: skip
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


def _same_as_the_regexes(text: str) -> None:
    assert decode_tex(text) == _old_decode_tex(text)
    assert normalise.strip_tex(text) == _old_strip_tex(text)
    assert plain_text(text) == " ".join(_old_strip_tex(_OLD_RICH_TEXT.sub("", text)).split())


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_the_linear_readers_give_what_the_regexes_gave(text: str) -> None:
    _same_as_the_regexes(text)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(_TEXTS)
def test_the_linear_readers_give_what_the_regexes_gave_full(text: str) -> None:
    _same_as_the_regexes(text)


# --- linear time ------------------------------------------------------------------------------------------


def _repeat(piece: str) -> Callable[[int], str]:
    return lambda size: piece * (size // len(piece)) + "x"


def _nested(size: int) -> str:
    return "{" * (size // 2) + "}" * (size // 2)


# The benchmark's hostile texts and formats (bench/library_file.py), at the sizes of each test.
HOSTILE: dict[str, Callable[[int], str]] = {name: _repeat(piece) for name, piece in PIECES.items()}
HOSTILE["nested braces"] = _nested


def _cpu(read: Callable[[], object], runs: int) -> float:
    """The least CPU time of ``runs`` runs: the machine is shared, and noise only ever adds time."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        read()
        best = min(best, time.process_time() - start)
    return best


def _assert_linear(read: Callable[[int], object], small: int, large: int, what: str) -> None:
    small_cpu = max(_cpu(lambda: read(small), 3), 1e-3)
    large_cpu = _cpu(lambda: read(large), 2)
    assert large_cpu < 10 * small_cpu, (
        f"{what}: {large // 1000} KB took {large_cpu:.3f} s of CPU, {small // 1000} KB {small_cpu:.3f} s"
    )


def _reader(name: str, library_format: str) -> Callable[[int], object]:
    text, library = HOSTILE[name], FORMATS[library_format]

    def read(size: int) -> object:
        return read_library(library(text(size)), "library")

    read(1000)  # imports and caches warm
    return read


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("library_format", sorted(FORMATS))
def test_hostile_text_is_read_in_linear_time(name: str, library_format: str) -> None:
    # 48 KB of one of these took 21 s before: a quadratic reader is far over the bound at this size.
    _assert_linear(_reader(name, library_format), 16_000, 64_000, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("library_format", sorted(FORMATS))
def test_hostile_text_is_read_in_linear_time_at_a_megabyte(name: str, library_format: str) -> None:
    read = _reader(name, library_format)
    _assert_linear(read, 4_000, 16_000, name)  # a quadratic reader fails here, in seconds
    _assert_linear(read, 256_000, 1_000_000, name)
