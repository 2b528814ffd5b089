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

from bot.commands import handle
from bot.commands_base import MAX_INPUT_CHARS, MAX_REPLY_CHARS, ChatContext, Problem
from core.config import Settings
from core.db import Database
from core.follows import subscriber_records
from core.follows.query import parse
from core.languages import LANGUAGES
from core.models import Follow, Subscriber, SubscriberStatus
from core.schedule import parse_schedule, zone
from tests.support.chat_commands import migrated_template_fixture, store_fixture
from tests.support.command_text import command_text

__all__ = ["migrated_template_fixture", "store_fixture"]  # fixtures, asked for by name

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


def snapshot(db: Database, address: str) -> tuple[object, ...]:
    """What a chat's subscription is, to compare before and after a command."""
    subscriber = subscriber_records.get_subscriber(db, address)
    if subscriber is None or subscriber.id is None:
        return ()
    follows = tuple(
        (f.query, f.revisions, f.instant) for f in subscriber_records.follows_of(db, subscriber.id)
    )
    return (
        subscriber.schedule,
        subscriber.timezone,
        subscriber.status,
        subscriber.status_reason,
        subscriber.language,
        follows,
    )


def check(db: Database, ctx: ChatContext, text: str) -> None:
    before = snapshot(db, MEMBER.address) if ctx is MEMBER else ()
    reply = handle(db, Settings().chat(), ctx, text, now=NOW)
    event(f"{reply.command or '-'}: {reply.error or 'ok'}")  # --hypothesis-show-statistics shows the mix
    assert reply.error is not Problem.INTERNAL, (text, reply.text)
    assert reply.text.strip(), text
    assert len(reply.text) <= MAX_REPLY_CHARS, text
    assert not _SHOWN_CONTROL.search(reply.text), (text, reply.text)
    assert reply.language in LANGUAGES, text
    if ctx is MEMBER:
        assert snapshot(db, MEMBER.address) == before, text
    assert_consistent(db)


def assert_consistent(db: Database) -> None:
    """Only the chats' own subscribers exist, and every stored setting and follow reads back."""
    with db.session() as session:
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
def test_any_text_gets_a_reply(db: Database, text: str, which: ChatContext) -> None:
    check(db, which, text)


@FUZZ
@given(text=command_text(), which=st.sampled_from(CONTEXTS))
def test_command_shaped_text_gets_a_reply(db: Database, text: str, which: ChatContext) -> None:
    check(db, which, text)


def test_the_fuzzed_store_is_not_trivially_empty(db: Database) -> None:
    """The properties above mean something only if commands do change the store: they do."""
    for text in ("/follow cat:cs.DC --instant", "/digest weekly mon 9", "/timezone berlin", "/pause"):
        assert handle(db, Settings().chat(), CONTEXTS[0], text, now=NOW).ok, text
    assert snapshot(db, CONTEXTS[0].address) == (
        "weekly mon 09:00",
        "Europe/Berlin",
        SubscriberStatus.PAUSED,
        "paused from the chat",
        None,  # the platform named no language
        (("cat:cs.DC", True, True),),
    )
