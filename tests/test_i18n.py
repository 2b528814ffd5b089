"""Languages: the catalogs are complete and consistent, codes map to languages, values stay escaped."""

from __future__ import annotations

import re

import jinja2
import pytest

from core import languages as i18n
from tests import i18n_messages

FIELDS = re.compile(r"\{(\w*)[^{}]*\}|%\((\w+)\)[sd]")


def _fields(text: str) -> set[str]:
    return {a or b for a, b in FIELDS.findall(text)}


@pytest.fixture(scope="module")
def marked() -> dict[str, list[i18n_messages.Marked]]:
    return i18n_messages.extract()


def test_every_marked_message_has_a_chinese_translation(
    marked: dict[str, list[i18n_messages.Marked]],
) -> None:
    missing = []
    for area, messages in marked.items():
        have = i18n_messages.catalog("zh", area)
        for message in messages:
            entry = have.get(i18n_messages.key(message.msgid))
            if entry is None or not entry.string or entry.fuzzy:
                missing.append(f"{area}: {message.where}: {message.msgid!r}")
    assert not missing, "untranslated (run python -m tests.i18n_messages):\n" + "\n".join(missing)


def test_translations_keep_every_placeholder() -> None:
    wrong = []
    for area in ("bot", "digest", "web"):
        for entry in i18n_messages.catalog("zh", area):
            if not entry.id:
                continue
            ids = [entry.id] if isinstance(entry.id, str) else list(entry.id)
            strings = [entry.string] if isinstance(entry.string, str) else list(entry.string or ())
            # A plural's translation may leave the count out ("{n}" is filled either way) but no other field.
            wanted = set().union(*(_fields(text) for text in ids))
            for text in strings:
                if _fields(text) - wanted or (_fields(ids[0]) - {"n", "num"}) - _fields(text):
                    wrong.append(f"{area}: {entry.id!r} -> {text!r}")
    assert not wrong, "placeholders differ:\n" + "\n".join(wrong)


def test_catalogs_hold_no_unused_entries(marked: dict[str, list[i18n_messages.Marked]]) -> None:
    unused = []
    for area, messages in marked.items():
        used = {i18n_messages.key(m.msgid) for m in messages}
        unused += [
            f"{area}: {e.id!r}"
            for e in i18n_messages.catalog("zh", area)
            if e.id and i18n_messages.key(e.id) not in used
        ]
    assert not unused


def test_a_message_in_two_areas_is_translated_alike() -> None:
    seen: dict[str, tuple[str, object]] = {}
    differ = []
    for area in ("bot", "digest", "web"):
        for entry in i18n_messages.catalog("zh", area):
            if not entry.id:
                continue
            key = i18n_messages.key(entry.id)
            if key in seen and seen[key][1] != entry.string:
                differ.append(f"{key!r}: {seen[key][0]} and {area}")
            seen.setdefault(key, (area, entry.string))
    assert not differ


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("zh", "zh"),
        ("zh-CN", "zh"),
        ("zh_Hans", "zh"),
        ("zh-hant-TW", "zh"),
        ("en", "en"),
        ("en-GB", "en"),
        ("EN_us", "en"),
        ("fr", None),
        ("", None),
        (None, None),
        ("zh;DROP", None),
    ],
)
def test_platform_codes_map_to_a_language(code: str | None, language: str | None) -> None:
    assert i18n.normalize_language(code) == language


@pytest.mark.parametrize(
    ("header", "language"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        ("fr-FR, zh;q=0.5, en;q=0.4", "zh"),
        ("fr-FR, de", "en"),
        ("zh;q=0", "en"),
        ("zh;q=bogus, en;q=0.1", "en"),
        ("", "en"),
        (None, "en"),
    ],
)
def test_accept_language_picks_the_best_language(header: str | None, language: str) -> None:
    assert i18n.negotiate(header) == language


def test_translator_translates_and_fills_fields() -> None:
    assert i18n.translator("en").gettext("{n} digests", n=3) == "3 digests"
    # Unknown languages fall back to English rather than failing.
    assert i18n.translator("fr").language == "en"
    assert i18n.translator(None).ngettext("{n} paper", "{n} papers", 1) == "1 paper"


def test_check_language_names_the_choices() -> None:
    with pytest.raises(ValueError, match="en, zh"):
        i18n.check_language("de")


def _env(language: str, autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(autoescape=autoescape, extensions=["jinja2.ext.i18n"])

    def shout(context: jinja2.runtime.Context, value: object) -> object:
        return value.replace("&", "&amp;") if isinstance(value, str) else value

    i18n.install_jinja(env, language, shout)
    return env


def test_jinja_values_in_translated_sentences_are_escaped_for_the_format() -> None:
    html = _env("en", autoescape=True).from_string('{{ _("Digest for %(who)s", who=who) }}')
    assert html.render(who="<b>x</b>") == "Digest for &lt;b&gt;x&lt;/b&gt;"
    # The template's own escaping function runs on every value (here: the mrkdwn ampersand rule).
    text = _env("en", autoescape=False).from_string("{% trans who=who %}Digest for {{ who }}{% endtrans %}")
    assert text.render(who="a & b") == "Digest for a &amp; b"
    plural = _env("en", autoescape=False).from_string(
        "{% trans count=n %}{{ count }} item{% pluralize %}{{ count }} items{% endtrans %}"
    )
    assert plural.render(n=2) == "2 items"


def test_a_refusal_says_itself_in_each_language_and_survives_pickling() -> None:
    import pickle

    from core.schedule import parse_schedule

    with pytest.raises(i18n.Refusal) as caught:
        parse_schedule("hourly " + "x" * 300)
    error = caught.value
    assert isinstance(error, ValueError)  # callers that catch ValueError keep working
    english = str(error)
    assert english.startswith("cannot read schedule 'hourly xxx") and "; use 'instant'" in english
    chinese = error.said(i18n.translator("zh"))
    assert chinese.startswith("无法读取时间设置“hourly") and "；请使用 'instant'" in chinese
    # What it quotes from the reader's input is cut on request; the English text stays whole for the logs.
    short = i18n.said(error, i18n.translator("en"), limit=20)
    assert "cannot read schedule 'hourly xxxxxxxxxxxx…'" in short and len(short) < len(english)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is i18n.Refusal and str(again) == english


def test_choices_are_joined_as_each_language_joins_them() -> None:
    phrase = i18n.Phrase("did you mean {option}?", option=i18n.Alternatives(("cs.DC", "cs.DL", "cs.DS")))
    assert str(phrase) == "did you mean cs.DC, cs.DL or cs.DS?"
    assert phrase.said(i18n.translator("zh")) == "你是想写 cs.DC、cs.DL 或 cs.DS 吗？"


def test_english_counts_say_one_or_many_never_s_in_brackets() -> None:
    from core.english import counted

    assert counted(1, "version") == "1 version"
    assert counted(0, "version") == "0 versions"
    assert counted(2, "match", "matches") == "2 matches"
    assert counted(12345, "paper", grouped=True) == "12,345 papers"
