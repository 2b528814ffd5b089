"""The ``language`` command: the language PaperTrail speaks in a chat, and choosing it.

``language`` shows the chat's language and the choices; ``language en`` / ``language zh`` stores one in
``Subscriber.language`` (names and platform codes work too: ``english``, ``Chinese``, ``中文``, ``zh-CN``).
The choice decides the replies, the digests and the AI reading guides of the chat, and the platform's
language (Telegram's ``language_code``, Slack's locale) never overrides it.
"""

from __future__ import annotations

import unicodedata

from bot.commands_base import Call, Problem, Reply, cut
from core.follows import subscribers
from core.follows.subscribers import SubscriberSettings
from core.languages import LANGUAGE_NAMES, LANGUAGES, N_, Translator, normalize_language, translator

# Names people write for a language, folded (NFKC, casefold); codes go through normalize_language.
_NAMES = {
    "english": "en", "英文": "en", "英语": "en", "inglés": "en", "anglais": "en", "englisch": "en",
    "chinese": "zh", "中文": "zh", "汉语": "zh", "漢語": "zh", "简体中文": "zh", "簡體中文": "zh",
    "繁體中文": "zh", "繁体中文": "zh", "普通话": "zh", "mandarin": "zh", "zhongwen": "zh",
    "simplified chinese": "zh", "chinese simplified": "zh",
}  # fmt: skip


def language_of(text: str) -> str | None:
    """The language (``en``/``zh``) that ``text`` names, as a code or a name; None for anything else."""
    word = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return _NAMES.get(word) or normalize_language(word)


# How ``language`` explains a language nobody chose: the platform's, or the operator's default when the
# platform names none PaperTrail speaks. One whole sentence per default language (Chinese orders it).
_FROM_SETTINGS = {
    "en": N_(
        "PaperTrail speaks {language} in {place}, the language of your Telegram or Slack settings "
        "(or English when they name none)."
    ),
    "zh": N_(
        "PaperTrail speaks {language} in {place}, the language of your Telegram or Slack settings "
        "(or Chinese when they name none)."
    ),
}


def choices(t: Translator, p: str) -> str:
    """``{p}language en (English) or {p}language zh (中文)``: every language and how to choose it."""
    return t.gettext(" or ").join(f"{p}language {code} ({LANGUAGE_NAMES[code]})" for code in LANGUAGES)


def language(call: Call) -> Reply:
    """``language``: show the chat's language; ``language CODE|NAME``: choose it."""
    t, p = call.t, call.p
    if not call.args:
        subscriber = call.subscriber()
        chosen = subscriber is not None and subscriber.language in LANGUAGES
        said = (
            t.gettext(
                "PaperTrail speaks {language} in {place}.",
                language=LANGUAGE_NAMES[call.language],
                place=call.place,
            )
            if chosen
            else t.gettext(
                _FROM_SETTINGS[call.settings.default_language],
                language=LANGUAGE_NAMES[call.language],
                place=call.place,
            )
        )
        return call.reply(
            said,
            t.gettext(
                "Change it with {choices}. Replies, digests and AI reading guides follow it.",
                choices=choices(t, p),
            ),
            suggestions=tuple(f"language {code}" for code in LANGUAGES if code != call.language),
        )
    chosen_language = language_of(call.args)
    if chosen_language is None:
        return call.reply(
            t.gettext(
                'PaperTrail does not speak "{typed}". Choose {choices}.',
                typed=cut(call.args, 40),
                choices=choices(t, p),
            ),
            error=Problem.BAD_ARGUMENT,
            suggestions=tuple(f"language {code}" for code in LANGUAGES),
        )
    subscriber = call.ensure_subscriber()
    already = subscriber.language == chosen_language
    if not already:
        subscribers.change_settings(call.db, subscriber.id or 0, SubscriberSettings(language=chosen_language))
    # The answer is in the language just chosen: it is the first reply the chat gets in it.
    new = translator(chosen_language)
    name, place = LANGUAGE_NAMES[chosen_language], call.ctx.place(new, capital=True)
    said = (
        new.gettext("{Place} uses {language} already.", Place=place, language=name)
        if already
        else new.gettext("{Place} now uses {language}.", Place=place, language=name)
    )
    return call.reply(
        said,
        new.gettext(
            "Replies and digests, with their AI reading guides where this server makes them, "
            "are in {language} from now on.",
            language=name,
        ),
        language=chosen_language,
    )


__all__ = ["choices", "language", "language_of"]
