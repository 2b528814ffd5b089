"""Chinese enumerations: the items of a list are separated by "、", clauses by "，".

Two halves: the catalogs (a translation must not list with "，" what its English lists with commas), and
the one list-joining helper (core.languages.listing, with Listed and Alternatives on top) that every
list built
in code for a reader goes through.
"""

from __future__ import annotations

import re

import pytest

from core import languages as i18n
from core.delivery.render import changes_text, digest_subject
from core.schedule import parse_schedule
from tests import i18n_messages

EN, ZH = i18n.translator("en"), i18n.translator("zh")
# A capitalised word of letters only: a proper name (PaperTrail, Telegram), not an option or a command.
_NAME = re.compile(r"[A-Z][a-z]+[A-Za-z]*")


def comma_separated_items(english: str, chinese: str) -> list[tuple[str, str]]:
    """The pairs of items the English separates with ", " that the Chinese separates with "，" (or ",").

    The heuristic: an item is a word next to an English ", " that the translation keeps as it is (a
    command, an option, a field, a zone, a {placeholder}): the translator did not translate it, so it is
    a literal listed in both. Next to each other in the Chinese, such two items must be separated by "、".
    A word the translation does not keep (prose: "Hello, {title}", "{state}, checked") is not an item,
    nor is a proper name, which prose keeps too ("Welcome to PaperTrail, {name}!").
    """
    wrong = []
    for comma in re.finditer(", ", english):
        before = english[: comma.start()].split()
        after = english[comma.end() :].split()
        if not before or not after:
            continue
        first, second = before[-1].lstrip("(["), after[0].rstrip(".,;?!)]")
        if not all(word and word in chinese and not _NAME.fullmatch(word) for word in (first, second)):
            continue
        if re.search(re.escape(first) + r"\s*[，,]\s*" + re.escape(second), chinese):
            wrong.append((first, second))
    return wrong


def test_the_heuristic_finds_a_list_separated_by_clause_commas() -> None:
    assert comma_separated_items("use {a}, {b} or {c}", "用 {a}，{b} 或 {c}") == [("{a}", "{b}")]
    assert comma_separated_items("use {a}, {b} or {c}", "用 {a}、{b} 或 {c}") == []
    assert comma_separated_items(
        "Options are 'instant', 'daily 08:00'.", "可用 'instant'，'daily 08:00'。"
    ) == [("'instant'", "'daily")]
    # Prose around a comma is not a list: the words next to it are translated.
    assert comma_separated_items("Hello, {title}!", "{title}，大家好！") == []
    assert comma_separated_items("{source}: {state}, checked just now", "{source}：{state}，刚刚检查") == []
    assert comma_separated_items("Welcome to PaperTrail, {name}!", "欢迎使用 PaperTrail，{name}！") == []


def test_no_chinese_translation_lists_items_with_clause_commas() -> None:
    wrong = []
    for area in ("bot", "digest", "web"):
        for entry in i18n_messages.catalog("zh", area):
            if not entry.id:
                continue
            english = entry.id if isinstance(entry.id, str) else entry.id[0]
            strings = [entry.string] if isinstance(entry.string, str) else list(entry.string or ())
            for chinese in strings:
                for pair in comma_separated_items(english, chinese):
                    wrong.append(f"{area}: {english!r} -> {chinese!r}: {pair[0]}，{pair[1]}")
    assert not wrong, 'list items take "、" in Chinese, not "，":\n' + "\n".join(wrong)


@pytest.mark.parametrize(
    ("items", "english", "chinese"),
    [
        ((), "", ""),
        (("cs",), "cs", "cs"),
        (("cs", "math"), "cs, math", "cs、math"),
        (("mon", "tue", "wed"), "mon, tue, wed", "mon、tue、wed"),
    ],
)
def test_listing_joins_items_as_each_language_lists_them(
    items: tuple[str, ...], english: str, chinese: str
) -> None:
    assert i18n.listing(EN, items) == english
    assert i18n.listing(ZH, iter(items)) == chinese  # any iterable, read once
    assert i18n.Listed(items).said(EN) == english and i18n.Listed(items).said(ZH) == chinese


def test_choices_list_all_but_the_last_and_then_say_or() -> None:
    choices = i18n.Alternatives(("daily", "weekly", "off"))
    assert choices.said(EN) == "daily, weekly or off"
    assert choices.said(ZH) == "daily、weekly 或 off"
    assert i18n.Alternatives(("a", "b")).said(ZH) == "a 或 b"


def test_a_listed_value_is_said_in_the_phrase_s_language_and_cut_by_items() -> None:
    phrase = i18n.Phrase("newsletters: {names}", names=i18n.Listed(("dc-weekly", "ml-daily")))
    assert str(phrase) == "newsletters: dc-weekly, ml-daily"
    assert phrase.said(ZH) == "现有简报：dc-weekly、ml-daily"
    many = i18n.Listed(f"letter-{n:02d}" for n in range(30))
    short = i18n.Phrase("newsletters: {names}", names=many).shortened(40).said(ZH)
    assert short == "现有简报：letter-00、letter-01、letter-02、…"


def test_lists_built_in_code_read_with_the_enumeration_comma_in_chinese() -> None:
    with pytest.raises(i18n.Refusal) as caught:
        parse_schedule("weekly funday 09:00")
    assert "days are mon, tue, wed, thu, fri, sat, sun" in str(caught.value)
    assert "可用的星期为 mon、tue、wed、thu、fri、sat、sun" in caught.value.said(ZH)
    assert changes_text(["title", "DOI"], "zh") == "标题、DOI"
    assert changes_text(["title", "DOI"], "en") == "title, DOI"
    subject = digest_subject(2, 1, language="zh", including=["A", "B"])
    assert subject == "PaperTrail：2 篇新论文、1 篇修订（含 A、B）"
