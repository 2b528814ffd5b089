"""The chat command grammar (bot/commands.py) against a real SQLite store and the recorded arXiv feed.

Replies are compared word for word: they are the bots' user interface. Times are pinned to Thursday
28 Nov 2024, 15:00 UTC, the afternoon of the recorded feed's mailing.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.commands import split_command
from bot.commands_base import MAX_INPUT_CHARS, ChatContext, Problem
from bot.commands_follows import follow_items
from core.config import Settings
from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.models import SubscriberStatus
from core.schedule import next_due, next_slot, parse_schedule
from core.timezones import lookup
from notifiers.console.notifier import ConsoleNotifier
from tests.support.chat_commands import (  # noqa: F401  (fixtures)
    GROUP_ADMIN,
    GROUP_MEMBER,
    NOW,
    PRIVATE,
    SLACK,
    backdate,
    ingest_recorded_feed,
    migrated_template_fixture,
    open_copy,
    record_runs,
    say,
    store_fixture,
    subscribed_template_fixture,
)


@pytest.fixture
def subscribed_store(subscribed_template: Path, tmp_path: Path) -> Iterator[Database]:
    """A store holding the recorded feed and PRIVATE's two follows with their 19 matches."""
    yield from open_copy(subscribed_template, tmp_path)


# ---------------------------------------------------------------------------------------------------------
# A whole session, as the Telegram and Slack tests will see it


TRANSCRIPT = """\
> /start
Welcome to PaperTrail, Ada Lovelace! New arXiv papers matching this chat's follows will arrive in a digest daily 08:00 (UTC).
Next, follow something: /follow cat:cs.DC or /follow au:"Zeng Li". /try QUERY shows what a query would have matched lately; /help lists all commands.

> /follow cat:cs.DC
Now following: cat:cs.DC
New papers and revisions, in the digest daily 08:00 (UTC).
It sees papers announced from now on; /try cat:cs.DC shows what it would have matched lately. /follows lists it.

> /follow ti:"operating system" --instant
Now following: ti:"operating system"
New papers and revisions, sent at once.
It sees papers announced from now on; /try ti:"operating system" shows what it would have matched lately. /follows lists all 2.

> /follows
This chat follows 2 queries:
1. cat:cs.DC
2. ti:"operating system" · instant
Remove one with /unfollow NUMBER, add one with /follow QUERY.

> /try ti:"operating system"
ti:"operating system" would have matched 1 paper in the last 7 days:
2411.17710v1 Agent Centric Operating System -- a Comprehensive Review and Outlook for Operating System
    why: title: "operating system"
Follow it with /follow ti:"operating system".

> /status
Subscription telegram:4242: active
Digest: daily 08:00 (UTC); the next Fri 29 Nov 08:00 UTC (in 17 h), if anything matched
Follows: 2 · matches waiting: 19
Sources — arXiv: ok, checked 12 min ago; Hugging Face: ok, checked 3 h ago
/follows lists the follows; /digest now sends what is waiting.

> /timezone Europe/Berln
Unknown timezone "Europe/Berln". Did you mean Europe/Berlin or Europe/Dublin?
Send e.g. /timezone Europe/Berlin.

> /timezone Europe/Berlin
Timezone set to Europe/Berlin (now 16:00 CET there). Digests go out daily 08:00 (Europe/Berlin); the next Fri 29 Nov 08:00 CET (in 16 h), if anything matched.

> /digest now
The 19 waiting matches will go out with the next delivery pass, within about 1 min.

> /unfollow 5
There is no follow number 5: this chat has 2 follows, numbered 1 to 2. /follows lists them.

> /unfollow 2
Stopped following: ti:"operating system"
1 follow left; /follows lists them.

> /folow cat:cs.AI
Unknown command "folow". Did you mean /follow? /help lists all commands.
"""  # noqa: E501 - the replies as sent, one line each


async def test_a_session_reads_as_documented(db: Database) -> None:
    lines: list[str] = []

    def run(text: str) -> None:
        lines.append(f"> {text}\n{say(db, text).text}\n")

    for text in ("/start", "/follow cat:cs.DC", '/follow ti:"operating system" --instant', "/follows"):
        run(text)
    backdate(db, PRIVATE.address)
    await ingest_recorded_feed(db)
    record_runs(db)
    for text in (
        '/try ti:"operating system"',
        "/status",
        "/timezone Europe/Berln",
        "/timezone Europe/Berlin",
        "/digest now",
        "/unfollow 5",
        "/unfollow 2",
        "/folow cat:cs.AI",
    ):
        run(text)
    assert "\n".join(lines) == TRANSCRIPT


# ---------------------------------------------------------------------------------------------------------
# start, help


def test_start_creates_the_subscriber_with_the_default_schedule(db: Database) -> None:
    settings = Settings(default_schedule="weekdays 07:30", default_timezone="Europe/Berlin")
    reply = say(db, "/start", settings=settings)
    assert reply.ok and reply.command == "start"
    assert reply.text.startswith(
        "Welcome to PaperTrail, Ada Lovelace! New arXiv papers matching this chat's follows will arrive "
        "in a digest weekdays 07:30 (Europe/Berlin).\n"
    )
    subscriber = subscriber_records.get_subscriber(db, "telegram:4242")
    assert subscriber is not None
    assert (subscriber.schedule, subscriber.timezone, subscriber.status) == (
        "weekdays 07:30",
        "Europe/Berlin",
        SubscriberStatus.ACTIVE,
    )
    again = say(db, "/start", settings=settings)
    assert again.text == (
        "Welcome back. This chat follows 0 queries; digests go out weekdays 07:30 (Europe/Berlin).\n"
        "/follows lists them, /follow QUERY adds one, /help shows all commands."
    )


def test_help_lists_every_command_in_the_platforms_form(db: Database) -> None:
    reply = say(db, "help", SLACK)
    for name in (
        "start",
        "help",
        "follow",
        "unfollow",
        "follows",
        "try",
        "digest",
        "timezone",
        "pause",
        "resume",
    ):
        assert f"\n/papertrail {name}" in reply.text
    assert "/papertrail status — this subscription and the sources' health" in reply.text
    page = say(db, "/help follow").text
    assert page.startswith("/follow QUERY [--new-only] [--instant]\nQUERY uses arXiv's search syntax:\n")
    assert '  /follow au:"Yann LeCun" --new-only\n' in page
    wrong = say(db, "/help folows")
    assert wrong.error is Problem.NOT_FOUND
    assert wrong.text.startswith('There is no command "folows". Did you mean /help follows?\n/start — ')


# ---------------------------------------------------------------------------------------------------------
# follow, follows, unfollow


def test_follow_options_are_stored_and_listed(db: Database) -> None:
    say(db, "/follow cat:cs.DC")
    reply = say(db, '/follow au:"Zeng Li" --new-only —instant')  # a phone's dash works too
    assert reply.text.split("\n")[:2] == ['Now following: au:"Zeng Li"', "New papers only, sent at once."]
    listing = say(db, "/follows")
    assert listing.text == (
        "This chat follows 2 queries:\n"
        "1. cat:cs.DC\n"
        '2. au:"Zeng Li" · new papers only · instant\n'
        "Remove one with /unfollow NUMBER, add one with /follow QUERY."
    )
    assert [(f.number, f.query, f.new_only, f.instant) for f in listing.follows] == [
        (1, "cat:cs.DC", False, False),
        (2, 'au:"Zeng Li"', True, True),
    ]
    # The same query in another spelling, without options: its options go back to the defaults.
    updated = say(db, '/follow au:"Li, Zeng"')
    assert updated.text == (
        'Updated: au:"Zeng Li"\nNow new papers and revisions, in the digest daily 08:00 (UTC). '
        "/follows lists all 2."
    )
    unchanged = say(db, "/FOLLOW   cat:cs.dc")
    assert unchanged.text == (
        "Already following: cat:cs.DC (new papers and revisions, in the digest daily 08:00 (UTC)). "
        "/follows lists all 2."
    )
    assert [(f.query, f.new_only, f.instant) for f in follow_items(db, PRIVATE.address)] == [
        ("cat:cs.DC", False, False),
        ('au:"Zeng Li"', False, False),
    ]


def test_a_bad_query_points_at_its_position_and_stores_nothing(db: Database) -> None:
    reply = say(db, "/follow cat:cs.LG AND (graph OR")
    assert reply.error is Problem.BAD_QUERY
    assert [(b.text, b.monospace) for b in reply.blocks] == [
        ("That query does not parse: expected a search term after 'OR' at position 23", False),
        ("cat:cs.LG AND (graph OR\n                       ^", True),
        ("Fix it and send /follow again; /help follow shows examples.", False),
    ]
    typo = say(db, "/try cat:cs.LGG")
    assert (
        typo.blocks[0].text
        == "That query does not parse: unknown category 'cs.LGG' at position 4; did you mean cs.LG?"
    )
    assert typo.blocks[1].text == "cat:cs.LGG\n    ^"
    assert subscriber_records.get_subscriber(db, PRIVATE.address) is None
    option = say(db, "/follow cat:cs.DC --revisions")
    assert option.error is Problem.BAD_ARGUMENT
    assert option.text.startswith('Unknown option "--revisions". Options are --new-only and --instant')


def test_unfollow_by_number_or_by_query(db: Database) -> None:
    for query in ("cat:cs.DC", 'au:"Zeng Li"', 'ti:"policy lag"'):
        say(db, f"/follow {query}")
    out_of_range = say(db, "/unfollow 4")
    assert out_of_range.error is Problem.NOT_FOUND
    assert out_of_range.text == (
        "There is no follow number 4: this chat has 3 follows, numbered 1 to 3. /follows lists them."
    )
    assert say(db, "/unfollow 0").error is Problem.NOT_FOUND
    assert (
        say(db, "/unfollow 2").text == 'Stopped following: au:"Zeng Li"\n2 follows left; /follows lists them.'
    )
    # By query, in any spelling with the same normal form.
    assert say(db, '/unfollow ti:"Policy  LAG"').text.startswith('Stopped following: ti:"policy lag"\n')
    missing = say(db, "/unfollow cat:cs.AI")
    assert missing.text == (
        "This chat does not follow cat:cs.AI. /follows lists what it follows; remove one by its number, "
        "e.g. /unfollow 1."
    )
    assert [f.query for f in follow_items(db, PRIVATE.address)] == ["cat:cs.DC"]
    assert (
        say(db, "/unfollow #1").text
        == "Stopped following: cat:cs.DC\nNo follows left; /follow QUERY adds one."
    )
    assert say(db, "/unfollow 1").text == (
        "This chat follows nothing yet, so there is nothing to remove. /follow QUERY adds a follow."
    )


def test_long_follow_lists_come_in_pages(db: Database) -> None:
    for n in range(45):
        say(db, f"/follow ti:word{n}")
    first = say(db, "/follows")
    assert first.text.startswith("This chat follows 45 queries (page 1 of 3):\n1. ti:word0\n")
    assert first.text.endswith("/follows 2 shows the next page.")
    assert len(first.follows) == 20
    last = say(db, "/follows 3")
    assert [f.number for f in last.follows] == [41, 42, 43, 44, 45]
    assert last.text.endswith("Remove one with /unfollow NUMBER, add one with /follow QUERY.")


# ---------------------------------------------------------------------------------------------------------
# try


def test_try_caps_the_list_and_counts_the_rest(subscribed_store: Database) -> None:
    db = subscribed_store
    reply = say(db, "/try cat:cs.DC")
    lines = reply.text.split("\n")
    assert lines[0] == "cat:cs.DC would have matched 19 papers in the last 7 days; the newest 5:"
    assert lines[1:3] == [
        "2401.08895v4 cedar: Optimized and Unified Machine Learning Input Data Pipelines",
        "    why: category cs.DC",
    ]
    assert lines[-1] == "…and 14 more. Follow it with /follow cat:cs.DC."
    assert reply.suggestions == ("follow cat:cs.DC",)
    none = say(db, '/try ti:"no such phrase anywhere"', GROUP_MEMBER)  # anyone may try
    assert none.text.startswith('Nothing of the last 7 days matches ti:"no such phrase anywhere". ')
    assert subscriber_records.get_subscriber(db, GROUP_MEMBER.address) is None  # trying saves nothing


# ---------------------------------------------------------------------------------------------------------
# digest, timezone, pause, resume, status


def test_digest_schedule_forms(db: Database) -> None:
    reply = say(db, "/digest weekly Monday 9am")
    assert reply.text == (
        "Digests now go out weekly mon 09:00 (UTC); the next Mon 2 Dec 09:00 UTC (in 3 days), "
        "if anything matched."
    )
    subscriber = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert subscriber is not None and subscriber.schedule == "weekly mon 09:00"
    assert say(db, "/digest daily 7.30").text.startswith("Digests now go out daily 07:30 (UTC)")
    assert say(db, "/schedule weekdays 18:00").text.startswith("Digests now go out weekdays 18:00 (UTC)")
    assert say(db, "/digest instant").text == (
        "Digests now go out as soon as something matches; the next at the next delivery pass, "
        "if anything matched."
    )
    bad = say(db, "/digest daily 25:00")
    assert bad.error is Problem.BAD_ARGUMENT
    assert bad.text.startswith(
        "Cannot use \"daily 25:00\": time '25:00' in schedule 'daily 25:00' is not a valid 24-hour time. "
        "Write /digest daily 08:00"
    )
    assert say(db, "/digest hourly").text.startswith('Cannot read "hourly". Write /digest daily 08:00, ')
    stored = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert stored is not None and stored.schedule == "instant"


async def test_digest_now_sends_at_the_next_pass_whatever_the_schedule(subscribed_store: Database) -> None:
    db = subscribed_store
    out = io.StringIO()
    notifiers = {"telegram": ConsoleNotifier(out)}
    # Not due (today's 08:00 digest went out): a pass sends only the instant follow's match.
    reports = await send_due_digests(db, notifiers, Renderer(max_items=100), now=NOW)
    assert [(r.address, r.items) for r in reports] == [("telegram:4242", 1)]
    reply = say(db, "/digest now")
    assert reply.text == "The 18 waiting matches will go out with the next delivery pass, within about 1 min."
    assert say(db, "/digest now").text == "A digest with the 18 waiting matches is already on its way."
    reports = await send_due_digests(db, notifiers, Renderer(max_items=100), now=NOW)
    assert [(r.address, r.items, r.sent) for r in reports] == [("telegram:4242", 18, True)]
    assert say(db, "/digest now").text == (
        "Nothing is waiting: every match has been sent. /try QUERY shows what a query would match."
    )


def test_timezone_suggests_the_closest_names(db: Database) -> None:
    reply = say(db, "/timezone Europe/Berln")
    assert reply.error is Problem.BAD_ARGUMENT
    assert reply.suggestions == ("timezone Europe/Berlin", "timezone Europe/Dublin")
    assert subscriber_records.get_subscriber(db, PRIVATE.address) is None
    pst = say(db, "/timezone PST")
    assert pst.text == (
        'Unknown timezone "PST". Did you mean America/Los_Angeles? (PST is an abbreviation; write the zone '
        "of your city so daylight saving is right.)\nSend e.g. /timezone America/Los_Angeles."
    )
    nothing = say(db, "/timezone Atlantis")
    assert nothing.text.startswith('Unknown timezone "Atlantis". Write an IANA name, Area/City')
    # A bare city, in any case, is enough.
    assert say(db, "/timezone new york").text.startswith(
        "Timezone set to America/New_York (now 10:00 EST there). "
        "Digests go out daily 08:00 (America/New_York); the next Fri 29 Nov 08:00 EST (in 22 h)"
    )
    subscriber = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert subscriber is not None and subscriber.timezone == "America/New_York"
    assert say(db, "/timezone").text == (
        "This chat's timezone is America/New_York (now 10:00 EST there). "
        "Change it with /timezone Area/City, e.g. /timezone Europe/Berlin."
    )


def test_pause_and_resume(db: Database) -> None:
    assert say(db, "/pause").error is Problem.NOT_SUBSCRIBED
    say(db, "/follow cat:cs.DC")
    assert say(db, "/pause").text == (
        "Paused: no digests, and no new papers collected, until /resume. The follows are kept."
    )
    subscriber = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert subscriber is not None and subscriber.status == SubscriberStatus.PAUSED
    assert subscriber_records.active_follows(db) == []  # a paused subscriber is not matched
    assert say(db, "/digest off").text == "Digests are already paused. /resume restarts them."
    assert say(db, "/status").text.split("\n")[:2] == [
        "Subscription telegram:4242: paused by the chat",
        "Digest: daily 08:00 (UTC); none while paused",
    ]
    assert say(db, "/resume").text == (
        "Digests are on again. They go out daily 08:00 (UTC); the next Fri 29 Nov 08:00 UTC (in 17 h), "
        "if anything matched. Papers announced from now on are collected."
    )
    assert say(db, "/resume").text == "Digests are already on. /status shows when the next one goes out."
    # `digest off` then a new time: on again at that time.
    say(db, "/digest off")
    say(db, "/digest daily 06:00")
    subscriber = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert subscriber is not None and (subscriber.status, subscriber.schedule) == (
        SubscriberStatus.ACTIVE,
        "daily 06:00",
    )


def test_resume_after_a_failed_delivery_says_why_it_was_paused(db: Database) -> None:
    say(db, "/start")
    subscriber = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert subscriber is not None and subscriber.id is not None
    subscriber_records.update_subscriber(
        db,
        subscriber.id,
        status=SubscriberStatus.PAUSED,
        status_reason="Forbidden: bot was blocked by the user",
    )
    assert say(db, "/status").text.split("\n")[0] == (
        "Subscription telegram:4242: paused after a failed delivery: Forbidden: bot was blocked by the user"
    )
    assert say(db, "/resume").text.startswith(
        "Digests are on again (they were paused because: Forbidden: bot was blocked by the user). "
    )
    # Telegram sends /start when someone unblocks the bot: that resumes too.
    subscriber_records.update_subscriber(
        db, subscriber.id, status=SubscriberStatus.PAUSED, status_reason="Forbidden: blocked"
    )
    assert say(db, "/start").text == (
        "Welcome back. This chat follows 0 queries; digests go out daily 08:00 (UTC).\n"
        "Digests were paused (Forbidden: blocked); they are on again.\n"
        "/follows lists them, /follow QUERY adds one, /help shows all commands."
    )
    resumed = subscriber_records.get_subscriber(db, PRIVATE.address)
    assert resumed is not None and resumed.status == SubscriberStatus.ACTIVE
    # Not for a group member who may not change the subscription, nor for a pause the chat asked for.
    say(db, "/start", GROUP_ADMIN)
    group = subscriber_records.get_subscriber(db, GROUP_MEMBER.address)
    assert group is not None and group.id is not None
    subscriber_records.update_subscriber(
        db, group.id, status=SubscriberStatus.PAUSED, status_reason="Forbidden: kicked"
    )
    assert "paused (Forbidden: kicked): /resume" in say(db, "/start", GROUP_MEMBER).text
    group = subscriber_records.get_subscriber(db, GROUP_MEMBER.address)
    assert group is not None and group.status == SubscriberStatus.PAUSED
    say(db, "/pause")
    assert "Digests are paused: /resume restarts them." in say(db, "/start").text


def test_status_before_start_still_reports_the_sources(db: Database) -> None:
    record_runs(db)
    reply = say(db, "/status", GROUP_MEMBER)
    assert reply.error is Problem.NOT_SUBSCRIBED
    assert reply.text == (
        "This group has no subscription yet: send /start.\n"
        "Sources — arXiv: ok, checked 12 min ago; Hugging Face: ok, checked 3 h ago"
    )


# ---------------------------------------------------------------------------------------------------------
# groups, unknown commands, odd input


def test_group_members_may_list_but_not_change(db: Database) -> None:
    assert say(db, "/start", GROUP_MEMBER).text == (
        "PaperTrail is not set up in this group yet, and only its admins can set it up: "
        "ask one to send /start."
    )
    assert say(db, "/start@PaperTrailBot", GROUP_ADMIN).ok
    say(db, "/follow@PaperTrailBot cat:cs.DC", GROUP_ADMIN)
    refusal = (
        "Only admins of this group can change its follows and settings. "
        "Anyone can use /follows, /status, /try and /help."
    )
    for text in ("/follow cat:cs.AI", "/unfollow 1", "/digest now", "/digest daily 09:00", "/timezone Berlin",
                 "/pause", "/resume"):  # fmt: skip
        reply = say(db, text, GROUP_MEMBER)
        assert (reply.text, reply.error) == (refusal, Problem.NOT_ALLOWED), text
    for text in ("/follows", "/status", "/help", "/try cat:cs.DC", "/digest", "/timezone"):
        assert say(db, text, GROUP_MEMBER).error is None, text
    assert [f.query for f in follow_items(db, GROUP_MEMBER.address)] == ["cat:cs.DC"]
    subscriber = subscriber_records.get_subscriber(db, GROUP_MEMBER.address)
    assert subscriber is not None and (subscriber.schedule, subscriber.timezone) == ("daily 08:00", "UTC")
    slack = say(
        db,
        "follow cat:cs.AI",
        ChatContext("slack:C0999", "slack", can_change=False, is_group=True, prefix="/papertrail "),
    )
    assert slack.text.startswith(
        "Only admins of this channel can change its follows and settings. Anyone can use /papertrail follows"
    )


def test_unknown_commands_suggest_the_closest(db: Database) -> None:
    typo = say(db, "/folows")
    assert (typo.text, typo.suggestions) == (
        'Unknown command "folows". Did you mean /follows? /help lists all commands.',
        ("follows",),
    )
    assert say(db, "/list").command == "follows"  # an alias runs
    assert say(db, "unsubscribe").suggestions == ("pause",)
    query = say(db, 'au:"Zeng Li" cat:cs.DC')
    assert query.text == (
        'To follow that, send /follow au:"Zeng Li" cat:cs.DC — '
        'or /try au:"Zeng Li" cat:cs.DC to see what it matches.'
    )
    assert (
        say(db, "/xyzzy").text == 'Unknown command "xyzzy". /help lists the commands, e.g. /follow cat:cs.DC.'
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", Problem.EMPTY),
        ("   \n\t ", Problem.EMPTY),
        ("/", Problem.EMPTY),
        ("\x00\x1b[31m\u202e", Problem.UNKNOWN_COMMAND),
        ("x" * (MAX_INPUT_CHARS + 1), Problem.TOO_LONG),
        ("/follow " + "a " * 600, Problem.BAD_QUERY),
        ("/follow 数据 並列計算", None),
        ("／ＦＯＬＬＯＷ cat:cs.DC", None),
        ("/follow\ncat:cs.DC\n--new-only", None),
        ("/unfollow 99999999999999999999999", Problem.NOT_FOUND),
        ("/follows 0", None),
        ("/timezone " + "é" * 500, Problem.BAD_ARGUMENT),
    ],
)
def test_odd_input_always_gets_a_reply(db: Database, text: str, error: Problem | None) -> None:
    reply = say(db, text)
    assert reply.error is error, reply.text


def test_oversized_input_is_refused_politely(db: Database) -> None:
    reply = say(db, "/follow " + "x" * 10_000)
    assert reply.text == (
        "That message is 10,008 characters long; a command can be at most 2,000 "
        "(a follow query at most 1,000). Send a shorter one; /help lists the commands."
    )


def test_control_characters_never_reach_a_reply_or_the_store(db: Database) -> None:
    reply = say(db, "/follow ti:\u202eevil\x07 cat:cs.DC")
    assert "\u202e" not in reply.text and "\x07" not in reply.text
    assert [f.query for f in follow_items(db, PRIVATE.address)] == ["ti:evil cat:cs.DC"]


def test_split_command_forms() -> None:
    assert split_command("/follow@PaperTrailBot  cat:cs.DC\n au:Li") == ("follow", "cat:cs.DC au:Li")
    assert split_command("/papertrail FOLLOW x") == ("follow", "x")
    assert split_command("papertrail") == ("", "")
    assert split_command("status?") == ("status", "")


def test_a_broken_store_gets_an_apology_not_an_exception(db: Database) -> None:
    db.engine.dispose()
    with db.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE follow"))
    reply = say(db, "/follow cat:cs.DC")
    assert reply.error is Problem.INTERNAL
    assert (
        reply.text == "Sorry, something went wrong on PaperTrail's side. Please try again in a few minutes."
    )


# ---------------------------------------------------------------------------------------------------------
# the pure helpers: next digest time, timezone lookup


def test_next_due_and_next_slot_in_the_subscribers_zone() -> None:
    weekly = parse_schedule("weekly mon 09:00")
    assert next_slot(weekly, "Europe/Berlin", NOW) == datetime(2024, 12, 2, 8, 0, tzinfo=UTC)
    daily = parse_schedule("daily 08:00")
    # Today's 08:00 already passed and nothing went out since the day before: due now.
    assert next_due(daily, "UTC", NOW, NOW - timedelta(days=1)) == NOW
    assert next_due(daily, "UTC", NOW, NOW.replace(hour=8)) == datetime(2024, 11, 29, 8, 0, tzinfo=UTC)
    assert next_due(parse_schedule("instant"), "UTC", NOW, NOW) == NOW
    # Across the end of daylight saving in New York (3 Nov 2024): 08:00 local is 13:00 UTC afterwards.
    before = datetime(2024, 11, 2, 14, 0, tzinfo=UTC)
    assert next_slot(daily, "America/New_York", before) == datetime(2024, 11, 3, 13, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("typed", "zone", "suggestions"),
    [
        ("europe/berlin", "Europe/Berlin", ()),
        ("Berlin", "Europe/Berlin", ()),
        ("São Paulo", "America/Sao_Paulo", ()),
        ("Indianapolis", "America/Indiana/Indianapolis", ()),
        ("UTC+2", "Etc/GMT-2", ()),
        ("utc", "UTC", ()),
        ("Europe/Berln", None, ("Europe/Berlin", "Europe/Dublin")),
        ("Asia/Tokio", None, ("Asia/Tokyo", "Asia/Tomsk")),
        ("IST", None, ("Asia/Kolkata", "Europe/Dublin", "Asia/Jerusalem")),
        ("EST", None, ("America/New_York",)),
        ("UTC+5:30", None, ("Asia/Kolkata", "Asia/Kathmandu", "Australia/Adelaide")),
    ],
)
def test_timezone_lookup(typed: str, zone: str | None, suggestions: tuple[str, ...]) -> None:
    found = lookup(typed)
    assert (found.zone, found.suggestions) == (zone, suggestions)
