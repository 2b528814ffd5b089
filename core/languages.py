"""Languages: which ones PaperTrail speaks, the translations, and turning platform codes into one of them.

English is the source language: every message is written in English in the code and the templates, marked
for translation, and translated in gettext catalogs (``locale/<language>/LC_MESSAGES/<area>.po``, one file
per area: ``bot``, ``digest``, ``web``). The catalogs are read with Babel when first needed and merged,
so no compiled ``.mo`` file is kept in the repository.

Conventions (docs/i18n.md):

* Python: ``t.gettext("Sent {count} digests", count=n)`` or ``t.ngettext(singular, plural, n, ...)`` on a
  :class:`Translator`; values fill ``str.format`` fields *after* translation, so the catalog sees the
  placeholders. ``N_("...")`` marks a string kept in a constant and translated where it is shown.
* Jinja2 templates: ``{{ _("New papers") }}`` and ``{% trans %}`` blocks with ``%(name)s`` fields. Values
  passed to them are escaped for the template's format by :func:`install_jinja` (HTML, Slack mrkdwn), like
  every other printed value.
"""

from __future__ import annotations

import gettext as _gettext
import io
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import markupsafe

from core.resources import resource_dir

if TYPE_CHECKING:
    from babel.messages.catalog import Catalog

LANGUAGES = ("en", "zh")
"""The languages PaperTrail speaks: English and Simplified Chinese."""
DEFAULT_LANGUAGE = "en"
"""The source language of the catalogs: every message id, ``str()`` of a phrase, the logs and the operator's
command line are in it. Not the language of readers who chose none: that is the operator's
``Settings.default_language`` (``PAPERTRAIL_DEFAULT_LANGUAGE``), passed to :func:`reader_language`."""
LANGUAGE_NAMES = {"en": "English", "zh": "中文"}
"""Each language named in itself, for language switches and the ``language`` command."""
LANGUAGE_TAGS = {"en": "en", "zh": "zh-Hans"}
"""Each language's BCP 47 tag, for ``<html lang>`` and ``Content-Language``: our Chinese is Simplified."""

_TAG = re.compile(r"^[A-Za-z]{1,8}(?:[-_][A-Za-z0-9]{1,8})*$")


def N_(message: str) -> str:
    """Mark ``message`` for translation without translating it (it is translated where it is shown)."""
    return message


def normalize_language(code: str | None) -> str | None:
    """One of :data:`LANGUAGES` for an IETF or POSIX code (``zh-CN``, ``zh_Hans``, ``en-US``), else None.

    Every Chinese variant maps to ``zh``: Simplified Chinese is the nearest we have for Traditional readers
    too, and much nearer than English.
    """
    if not code:
        return None
    code = code.strip()
    if not _TAG.match(code):
        return None
    primary = re.split(r"[-_]", code, maxsplit=1)[0].lower()
    return primary if primary in LANGUAGES else None


def reader_language(*choices: str | None, default: str) -> str:
    """The language to speak to a reader: the first of ``choices`` PaperTrail speaks, else ``default``.

    ``choices`` go from the strongest to the weakest (a reader's own choice, then what their platform
    reports); each may be a regional code (``zh-CN``) or None. ``default`` is the operator's
    ``Settings.default_language``, passed by every caller rather than read from a global, so that two
    settings in one process (tests, a second app) never leak into each other.
    """
    check_language(default)
    for choice in choices:
        language = normalize_language(choice)
        if language is not None:
            return language
    return default


def negotiate(accept_language: str | None, default: str = DEFAULT_LANGUAGE) -> str:
    """The best of :data:`LANGUAGES` for an HTTP ``Accept-Language`` header (RFC 9110 quality values);
    ``default`` when it names none (a web page passes the operator's default language)."""
    best, best_q = default, 0.0
    for position, entry in enumerate((accept_language or "").split(",")[:32]):
        tag, _, params = entry.strip().partition(";")
        language = normalize_language(tag)
        if language is None:
            continue
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        # Earlier entries win ties: a header lists what the reader prefers first.
        if q > best_q or (q == best_q and position == 0):
            best, best_q = language, q
    return best if best_q > 0 else default


def check_language(language: str) -> str:
    """``language`` when PaperTrail speaks it; ValueError saying which ones it does otherwise."""
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}: use one of {', '.join(LANGUAGES)}")
    return language


def catalog_files(language: str) -> list[Path]:
    """The ``.po`` files of ``language``, by area (empty for English, the source language)."""
    folder = resource_dir("locale") / language / "LC_MESSAGES"
    return sorted(folder.glob("*.po")) if folder.is_dir() else []


def read_catalog(language: str) -> Catalog:
    """Every area's catalog of ``language`` merged into one (later areas do not override earlier ones)."""
    # Babel only when a catalog is read: a process that speaks English alone never needs it (~10 ms).
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po

    merged = Catalog(locale=language, domain="papertrail")
    for path in catalog_files(language):
        with path.open("rb") as file:
            for message in read_po(file, locale=language):
                if message.id and message.id not in merged:
                    merged[message.id] = message
    return merged


@cache
def translations(language: str) -> _gettext.NullTranslations:
    """gettext translations for ``language``; English (and an unknown code) translates to itself."""
    if language == DEFAULT_LANGUAGE or language not in LANGUAGES:
        return _gettext.NullTranslations()
    from babel.messages.mofile import write_mo

    buffer = io.BytesIO()
    # Fuzzy entries (guesses from a catalog update) are left out: English is better than a wrong guess.
    write_mo(buffer, read_catalog(language), use_fuzzy=False)
    buffer.seek(0)
    return _gettext.GNUTranslations(buffer)


class Translator:
    """Translates the marked messages of one language and fills their ``{name}`` fields."""

    def __init__(self, language: str) -> None:
        self.language = language if language in LANGUAGES else DEFAULT_LANGUAGE
        self._translations = translations(self.language)

    def gettext(self, message: str, /, **values: object) -> str:
        """``message`` in this language, with ``values`` filled into its ``{name}`` fields."""
        text = self._translations.gettext(message)
        return text.format(**values) if values else text

    def ngettext(self, singular: str, plural: str, n: int, /, **values: object) -> str:
        """The form of ``singular``/``plural`` for ``n`` in this language; ``{n}`` and ``values`` filled."""
        return self._translations.ngettext(singular, plural, n).format(n=f"{n:,}", **values)


def listing(t: Translator, items: Iterable[str]) -> str:
    """``items`` listed as ``t``'s language lists them: ``A, B, C`` in English, ``A、B、C`` in Chinese.

    Every list of items a reader sees is joined here (or by :class:`Listed` and :class:`Alternatives`,
    which call it): Chinese separates the items of an enumeration with the enumeration comma "、" and
    keeps "，" for clauses, so the separator is a translated message, not a literal ", ".
    """
    return t.gettext(", ").join(items)


class Listed(tuple[str, ...]):
    """Items named in a message (``A, B, C``: the days, the archives), listed in the reader's language
    when the message is said (:func:`listing`); a :class:`Phrase` value built where no reader is known."""

    __slots__ = ()

    def said(self, t: Translator) -> str:
        """The items joined as ``t``'s language lists them."""
        return listing(t, self)

    def shortened(self, limit: int) -> Listed:
        """The first items that fit in about ``limit`` characters, and ``…`` for the rest (a reply names
        a few newsletters, not all of them)."""
        kept: list[str] = []
        used = 0
        for item in self:
            used += len(item) + (2 if kept else 0)
            if used > limit and kept:
                return Listed((*kept, "…"))
            kept.append(item)
        return self


class Alternatives(tuple[str, ...]):
    """Choices offered in a message (``X``, ``X or Y``, ``X, Y or Z``), joined in the reader's language."""

    __slots__ = ()

    def said(self, t: Translator) -> str:
        """The choices joined as ``t``'s language joins them."""
        if len(self) <= 1:
            return "".join(self)
        return t.gettext("{options} or {last}", options=listing(t, self[:-1]), last=self[-1])


class Phrase:
    """A message marked for translation and its field values: said in English by ``str()``, in any
    language by :meth:`said`. Core code that words a problem for a reader (a follow that does not parse)
    raises one of these instead of a finished English sentence, so that each edge can say it in its
    reader's language without knowing the English wording.
    """

    __slots__ = ("template", "values")

    def __init__(self, template: str, /, **values: object) -> None:
        self.template = template
        self.values = values

    def said(self, t: Translator) -> str:
        """The message in ``t``'s language, each value that is itself a phrase or choices said too."""
        return t.gettext(self.template, **{name: _said(value, t) for name, value in self.values.items()})

    def shortened(self, limit: int) -> Phrase:
        """The phrase with every text value cut to ``limit`` characters (``…`` marks a cut): what it quotes
        from a reader's input can be long, and a reply or a form error should stay short."""
        return Phrase(
            self.template, **{name: _shortened(value, limit) for name, value in self.values.items()}
        )

    def __str__(self) -> str:
        return self.said(translator(DEFAULT_LANGUAGE))

    def __repr__(self) -> str:
        return f"Phrase({self.template!r}, **{self.values!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Phrase) and (self.template, self.values) == (other.template, other.values)

    def __hash__(self) -> int:
        return hash(self.template)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled with its values (an exception carrying it crosses process boundaries).
        return (_phrase, (self.template, self.values))


def _phrase(template: str, values: dict[str, object]) -> Phrase:
    return Phrase(template, **values)


def _shortened(value: object, limit: int) -> object:
    if isinstance(value, (Phrase, Listed)):
        return value.shortened(limit)
    if isinstance(value, str) and len(value) > limit:
        return value[: max(limit - 1, 0)].rstrip() + "…"
    return value


def _said(value: object, t: Translator) -> object:
    return value.said(t) if isinstance(value, (Phrase, Listed, Alternatives)) else value


class Worded(Exception):
    """An error worded for a reader: what is wrong (``problem``) and what to do (``hint``), as phrases.

    ``str()`` is the English (the CLI and the logs print it); :meth:`said` words it in any language.
    """

    def __init__(self, problem: Phrase, hint: Phrase | None = None) -> None:
        self.problem = problem
        self.hint = hint
        super().__init__(str(self))

    def said(self, t: Translator, *, limit: int | None = None) -> str:
        """``problem; hint`` in ``t``'s language; with ``limit``, quoted values cut to that length."""
        problem = self.problem.shortened(limit) if limit else self.problem
        if self.hint is None:
            return problem.said(t)
        hint = self.hint.shortened(limit) if limit else self.hint
        return t.gettext("{problem}; {hint}", problem=problem.said(t), hint=hint.said(t))

    def __str__(self) -> str:
        return self.said(translator(DEFAULT_LANGUAGE))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problem, self.hint))


class Refusal(Worded, ValueError):
    """A value PaperTrail refuses (a schedule, a timezone, an address), worded for the reader."""


def said(error: BaseException, t: Translator, *, limit: int = 120) -> str:
    """What ``error`` says, in ``t``'s language when it is worded for readers, else its (English) text.

    What a worded error quotes (the reader's own input) is cut to ``limit`` characters.
    """
    if isinstance(error, Worded):
        return error.said(t, limit=limit)
    say = getattr(error, "said", None)  # core.follows.query.QueryError: it quotes single tokens
    return str(say(t)) if callable(say) else str(error)


def translator(language: str | None) -> Translator:
    """A :class:`Translator` for ``language``, English for None or a language PaperTrail does not speak."""
    return _translator(language if language in LANGUAGES else DEFAULT_LANGUAGE)


@cache
def _translator(language: str) -> Translator:
    return Translator(language)


EscapeValue = Callable[[jinja2.runtime.Context, object], object]


def install_jinja(env: jinja2.Environment, language: str, escape_value: EscapeValue | None = None) -> None:
    """Give ``env`` (created with the ``jinja2.ext.i18n`` extension) the translations of ``language``.

    Like Jinja's "newstyle" gettext (``_("…%(name)s…", name=value)`` and ``{% trans %}`` blocks format
    their own fields), but every value passes ``escape_value`` first, the same finalize the template
    applies to what it prints, and is HTML-escaped in autoescaped templates: a translated sentence can
    carry a title or an address without opening a hole in any channel.
    """
    source = translations(language)

    def fill(context: jinja2.runtime.Context, text: str, values: Mapping[str, object]) -> str:
        cleaned = {k: escape_value(context, v) if escape_value else v for k, v in values.items()}
        if context.eval_ctx.autoescape:
            return markupsafe.Markup(text) % {k: markupsafe.escape(v) for k, v in cleaned.items()}
        return text % cleaned

    @jinja2.pass_context
    def gettext(context: jinja2.runtime.Context, message: str, /, **values: object) -> str:
        return fill(context, source.gettext(message), values)

    @jinja2.pass_context
    def ngettext(
        context: jinja2.runtime.Context, singular: str, plural: str, n: int, /, **values: object
    ) -> str:
        values.setdefault("num", n)
        return fill(context, source.ngettext(singular, plural, n), values)

    env.newstyle_gettext = True  # type: ignore[attr-defined]
    env.globals.update(gettext=gettext, _=gettext, ngettext=ngettext, language=language)
