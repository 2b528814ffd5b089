"""Why a follow query does not parse, in the reader's language.

:class:`core.query.QueryError` says what was expected and where in English (``message``, ``position``,
``hint``), for the CLI and the logs as much as for chats. The chat replies recognise each of its forms here
and say it again through the catalog; what they quote from the query (a field, a word, a category) is a
value, never part of a message id. A form not known here is shown as the parser wrote it: in English, the
reply reads exactly as ``str(error)``.
"""

from __future__ import annotations

import re

from core.i18n import N_, Translator
from core.query import QueryError

# (pattern of the parser's text, the message to show): the pattern's named groups fill the message's fields.
_MESSAGES = tuple(
    (re.compile(pattern), message)
    for pattern, message in (
        (r"unterminated quoted phrase", N_("unterminated quoted phrase")),
        (r"empty quoted phrase", N_("empty quoted phrase")),
        (r"unknown field '(?P<field>.*):'", N_("unknown field '{field}:'")),
        (
            r"""expected a word or "phrase" after '(?P<field>.*):'""",
            N_("""expected a word or "phrase" after '{field}:'"""),
        ),
        (r"wildcards are not supported", N_("wildcards are not supported")),
        (r"a leading '-' does not exclude", N_("a leading '-' does not exclude")),
        (r"nothing to search for in '(?P<value>.*)'", N_("nothing to search for in '{value}'")),
        (r"no name in '(?P<value>.*)'", N_("no name in '{value}'")),
        (r"not a category: '(?P<value>.*)'", N_("not a category: '{value}'")),
        (r"unknown arXiv archive '(?P<archive>.*)'", N_("unknown arXiv archive '{archive}'")),
        (r"unknown category '(?P<category>.*)'", N_("unknown category '{category}'")),
        (r"not an arXiv id: '(?P<value>.*)'", N_("not an arXiv id: '{value}'")),
        (r"unexpected version suffix '(?P<version>.*)'", N_("unexpected version suffix '{version}'")),
        (r"empty query", N_("empty query")),
        (r"unexpected '\)'", N_("unexpected ')'")),
        (r"unexpected '(?P<text>.*)'", N_("unexpected '{text}'")),
        (r"too many search terms", N_("too many search terms")),
        (r"expected a closing '\)'", N_("expected a closing ')'")),
        (r"query nested too deeply", N_("query nested too deeply")),
        (r"empty parentheses", N_("empty parentheses")),
        (r"expected a search term after '(?P<word>.*)'", N_("expected a search term after '{word}'")),
        (r"expected a search term before '(?P<word>.*)'", N_("expected a search term before '{word}'")),
        (r"query too long", N_("query too long")),
    )
)
_HINTS = tuple(
    (re.compile(pattern), message)
    for pattern, message in (
        (r'add a closing "', N_('add a closing "')),
        (
            r"all: is not supported; a word without a field searches the title and the abstract",
            N_("all: is not supported; a word without a field searches the title and the abstract"),
        ),
        (r"write id:(?P<id>\S+) to follow that paper", N_("write id:{id} to follow that paper")),
        (r"a link is not a query", N_("a link is not a query")),
        (r"fields are cat:, au:, ti:, abs:, id:", N_("fields are cat:, au:, ti:, abs:, id:")),
        (r"words match whole words; cat: accepts cs\.\*", N_("words match whole words; cat: accepts cs.*")),
        (r"write NOT word to exclude", N_("write NOT word to exclude")),
        (r"TeX math and commands are not searched", N_("TeX math and commands are not searched")),
        (r"words are made of letters and digits", N_("words are made of letters and digits")),
        (r'write e\.g\. au:Li or au:"Zeng Li"', N_('write e.g. au:Li or au:"Zeng Li"')),
        (r"write e\.g\. cat:cs\.DC or cat:cs\.\*", N_("write e.g. cat:cs.DC or cat:cs.*")),
        (
            r"(?P<archive>\S+) is now (?P<new>\S+): write cat:(?P=new)",
            N_("{archive} is now {new}: write cat:{new}"),
        ),
        (r"archives are (?P<archives>.+)", N_("archives are {archives}")),
        (
            r"see arxiv\.org/category_taxonomy, or write cat:(?P<archive>\S+)\.\* for all of (?P=archive)",
            N_("see arxiv.org/category_taxonomy, or write cat:{archive}.* for all of {archive}"),
        ),
        (
            r"(?P<archive>\S+) has no subject classes: write cat:(?P=archive)",
            N_("{archive} has no subject classes: write cat:{archive}"),
        ),
        (
            r'write a word, a "phrase" or a field such as cat:cs\.DC',
            N_('write a word, a "phrase" or a field such as cat:cs.DC'),
        ),
        (r"it has no matching '\('", N_("it has no matching '('")),
        (r"the limit is (?P<limit>\d+)", N_("the limit is {limit}")),
        (r"the limit is (?P<limit>\d+) levels", N_("the limit is {limit} levels")),
        (r"the limit is (?P<limit>\d+) characters", N_("the limit is {limit} characters")),
        (r"found '(?P<text>.*)'", N_("found '{text}'")),
        (
            r"the '\(' at position (?P<position>\d+) is still open",
            N_("the '(' at position {position} is still open"),
        ),
        (
            r"write e\.g\. id:2411\.17700 or id:quant-ph/0201082",
            N_("write e.g. id:2411.17700 or id:quant-ph/0201082"),
        ),
        (r"drop it: id:(?P<id>\S+) follows every version", N_("drop it: id:{id} follows every version")),
    )
)
_DID_YOU_MEAN = re.compile(r"did you mean (?P<options>.+)\?")


def _say(t: Translator, text: str, table: tuple[tuple[re.Pattern[str], str], ...]) -> str:
    for pattern, message in table:
        if m := pattern.fullmatch(text):
            return t.gettext(message, **m.groupdict()) if m.groupdict() else t.gettext(message)
    return text


def _hint(t: Translator, hint: str) -> str:
    if m := _DID_YOU_MEAN.fullmatch(hint):
        options = re.split(r", | or ", m["options"])
        if len(options) == 1:
            return t.gettext("did you mean {option}?", option=options[0])
        shown = t.gettext("{options} or {last}", options=t.gettext(", ").join(options[:-1]), last=options[-1])
        return t.gettext("did you mean {option}?", option=shown)
    return _say(t, hint, _HINTS)


def describe(t: Translator, error: QueryError) -> str:
    """``expected a search term after 'OR' at position 23``, in ``t``'s language."""
    said = t.gettext(
        "{problem} at position {position}", problem=_say(t, error.message, _MESSAGES), position=error.position
    )
    if error.hint:
        said = t.gettext("{problem}; {hint}", problem=said, hint=_hint(t, error.hint))
    return said


__all__ = ["describe"]
