"""Fuzzing the chat command grammar: whatever a chat sends, the reply is there and the store stays sound.

Properties, over arbitrary text and over command-shaped text (real command words, typos, prefixes,
queries, numbers, schedules, timezones, options, control characters, huge inputs):

* ``handle`` never raises and never answers "internal error": every input has a designed answer;
* the reply is non-empty, at most MAX_REPLY_CHARS, and free of control and bidi-override characters;
* the store stays consistent: only the chats' own addresses exist, every schedule and timezone reads,
  every stored follow parses to its stored normal form, follows are unique per subscriber;
* a group member who is not an admin changes nothing (not even the group's language, from theirs);
* every stored language is one PaperTrail speaks, and every reply says which language it is in.

One store serves all the examples of a test, so state builds up the way a long chat builds it up.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlmodel import select

from bot.commands import COMMANDS, MAX_INPUT_CHARS, MAX_REPLY_CHARS, ChatContext, Problem, handle
from bot.commands_help import ALIASES, HINTS
from core.config import Settings
from core.delivery.schedule import parse_schedule, zone
from core.follows.query import parse
from core.i18n.languages import LANGUAGES
from core.models import Follow, Subscriber, SubscriberStatus
from core.store.facade import Store
from tests.test_commands import migrated_template, store

__all__ = ["migrated_template", "store"]  # fixtures shared with test_commands

NOW = datetime(2024, 11, 28, 15, 0, tzinfo=UTC)
FUZZ = settings(
    max_examples=120,
    derandomize=True,
    deadline=None,  # about results, never about time
    # One store for all examples is the point: state accumulates as in a real chat.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
CONTEXTS = (
    ChatContext("telegram:4242"),
    ChatContext("telegram:-100200300", is_group=True, can_change=True),
    ChatContext("telegram:-100200300", is_group=True, can_change=False, language="zh-CN"),
    ChatContext("slack:C0123ABC", platform="slack", is_group=True, prefix="/papertrail "),
    ChatContext("telegram:4343", language="zh-hans"),
    ChatContext("slack:U0ZH", platform="slack", language="zh-TW", prefix="/papertrail "),
)
MEMBER = CONTEXTS[2]
_SHOWN_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

NAMES = [info.name for info in COMMANDS] + list(ALIASES)
NEAR_MISSES = [*HINTS, "folow", "unfolow", "statsu", "papertrail"]
ARGUMENTS = st.one_of(
    st.text(max_size=80),
    st.sampled_from(
        [
            "cat:cs.DC", 'au:"Zeng Li"', 'ti:"policy lag"', "cat:cs.LG AND (graph OR", "id:2411.17710",
            "cat:cs.* ANDNOT cat:cs.LG", "((((", '"', "NOT", "cat:cs.LGG", "数据", "now", "off", "on",
            "instant",
            "daily 08:00", "daily 8pm", "daily 25:61", "weekly mon 9", "weekly xyz 09:00", "weekdays 7.30",
            "Europe/Berlin", "Europe/Berln", "berlin", "UTC+2", "UTC+5:30", "PST", "1", "2", "0", "-1", "#3",
            "999999999999999999999", "follow", "2 3", "", "en", "zh", "中文", "zh-TW", "english", "fr",
        ]
    ),
)  # fmt: skip
OPTIONS = st.lists(
    st.sampled_from(["--new-only", "--instant", "—instant", "-new-only", "--bogus", "--"]), max_size=3
)
# Between the words: spaces, newlines, full-width space, and control characters that are stripped.
GAPS = st.sampled_from(
    [" ", " ", " ", "  ", "\n", "\t", "\r\n", " \x00 ", " \x1b[2J ", " \u202e", " \u200b ", "　"]
)


@st.composite
def command_text(draw: st.DrawFn) -> str:
    """Text shaped like a command: prefix, command word (or a near miss), arguments, options, odd gaps."""
    prefix = draw(st.sampled_from(["", "/", "/", "/", "/papertrail ", "／"]))
    word = draw(st.sampled_from(NAMES) if draw(st.integers(0, 4)) else st.sampled_from(NEAR_MISSES))
    word = draw(st.sampled_from([word, word, word.upper(), word + "@PaperTrailBot", word[:-1] or word]))
    parts = [prefix + word, draw(ARGUMENTS), *draw(OPTIONS)]
    return "".join(part + draw(GAPS) for part in parts).rstrip(" ")


def snapshot(store: Store, address: str) -> tuple[object, ...]:
    """What a chat's subscription is, to compare before and after a command."""
    subscriber = store.subscribers.get_subscriber(address)
    if subscriber is None or subscriber.id is None:
        return ()
    follows = tuple((f.query, f.revisions, f.instant) for f in store.subscribers.follows_of(subscriber.id))
    return (
        subscriber.schedule,
        subscriber.timezone,
        subscriber.status,
        subscriber.status_reason,
        subscriber.language,
        follows,
    )


def check(store: Store, ctx: ChatContext, text: str) -> None:
    before = snapshot(store, MEMBER.address) if ctx is MEMBER else ()
    reply = handle(store, Settings().chat(), ctx, text, now=NOW)
    event(f"{reply.command or '-'}: {reply.error or 'ok'}")  # --hypothesis-show-statistics shows the mix
    assert reply.error is not Problem.INTERNAL, (text, reply.text)
    assert reply.text.strip(), text
    assert len(reply.text) <= MAX_REPLY_CHARS, text
    assert not _SHOWN_CONTROL.search(reply.text), (text, reply.text)
    assert reply.language in LANGUAGES, text
    if ctx is MEMBER:
        assert snapshot(store, MEMBER.address) == before, text
    assert_consistent(store)


def assert_consistent(store: Store) -> None:
    """Only the chats' own subscribers exist, and every stored setting and follow reads back."""
    with store.session() as session:
        subscribers = list(session.exec(select(Subscriber)))
        follows = list(session.exec(select(Follow)))
    assert {s.address for s in subscribers} <= {ctx.address for ctx in CONTEXTS}
    for subscriber in subscribers:
        parse_schedule(subscriber.schedule)
        zone(subscriber.timezone)
        assert subscriber.status in set(SubscriberStatus)
        assert subscriber.language in (None, *LANGUAGES)
    assert len({(f.subscriber_id, f.canonical) for f in follows}) == len(follows)
    for follow in follows:
        assert parse(follow.query).canonical() == follow.canonical


@FUZZ
@given(
    text=st.one_of(
        st.text(max_size=300), st.text(min_size=MAX_INPUT_CHARS - 5, max_size=MAX_INPUT_CHARS + 5)
    ),
    which=st.sampled_from(CONTEXTS),
)
def test_any_text_gets_a_reply(store: Store, text: str, which: ChatContext) -> None:
    check(store, which, text)


@FUZZ
@given(text=command_text(), which=st.sampled_from(CONTEXTS))
def test_command_shaped_text_gets_a_reply(store: Store, text: str, which: ChatContext) -> None:
    check(store, which, text)


def test_the_fuzzed_store_is_not_trivially_empty(store: Store) -> None:
    """The properties above mean something only if commands do change the store: they do."""
    for text in ("/follow cat:cs.DC --instant", "/digest weekly mon 9", "/timezone berlin", "/pause"):
        assert handle(store, Settings().chat(), CONTEXTS[0], text, now=NOW).ok, text
    assert snapshot(store, CONTEXTS[0].address) == (
        "weekly mon 09:00",
        "Europe/Berlin",
        SubscriberStatus.PAUSED,
        "paused from the chat",
        None,  # the platform named no language
        (("cat:cs.DC", True, True),),
    )
