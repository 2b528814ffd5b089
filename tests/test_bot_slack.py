"""The Slack app (notifiers/slack/chat.py) through Bolt, end to end on loopback.

Slash commands, events and button clicks are signed the way Slack signs them (HMAC-SHA256 over
``v0:{timestamp}:{body}``) and posted to the app's Starlette route with Starlette's TestClient; Bolt
verifies them and the app talks to the fake Slack Web API (tests/fakes/slack_api.py) with the real
AsyncWebClient: users.info, conversations.info, views.publish, and the command's response_url. Socket
Mode runs against a fake Socket Mode WebSocket server. The store is real SQLite; times are pinned to
Thursday 28 Nov 2024, 15:00 UTC, the afternoon of the recorded feed's mailing (as in test_commands).
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bot.commands_base import Block
from bot.commands_follows import follow_items
from core.config import Settings
from core.db import Database
from core.follows import subscriber_records
from notifiers.slack.chat import (
    EVENTS_PATH,
    SlackBot,
    SlackSetupError,
    command_prefix,
    serves_http,
    uses_socket_mode,
)
from notifiers.slack.chat_format import MAX_SECTION_CHARS, block_sections
from notifiers.slack.chat_workspace import Conversation
from tests.fakes.slack_api import FakeSlack, api_error, fake_socket_mode
from tests.support.chat_commands import NOW, backdate, ingest_recorded_feed, record_runs
from tests.support.command_text import command_text
from tests.support.slack_bot import (
    ADA,
    APP_TOKEN,
    BOB,
    DM,
    EVE,
    LAB,
    NEWS,
    ROOT,
    SECRET,
    TOKEN,
    click_body,
    command_body,
    event_body,
    make_bot,
    post,
    serve,
    signed_headers,
    slack_fixture,  # noqa: F401  (fixtures)
    slash,
)

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx (installed) works the same here.
    warnings.simplefilter("ignore")


def shown(answer: dict[str, Any]) -> str:
    """An answer as the transcript shows it: response type, mrkdwn text, buttons."""
    lines = [f"[{answer['response_type']}]", answer["text"]]
    buttons = [e["text"]["text"] for b in answer["blocks"] if b["type"] == "actions" for e in b["elements"]]
    if buttons:
        lines.append("buttons: " + " | ".join(buttons))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# A whole session


TRANSCRIPT = """\
> /papertrail start    (Ada, in a DM with PaperTrail)
[ephemeral]
Welcome to PaperTrail, Ada Lovelace! New arXiv papers matching this chat's follows will arrive in a digest daily 08:00 (UTC).
Next, follow something: /papertrail follow cat:cs.DC or /papertrail follow au:"Zeng Li". /papertrail try QUERY shows what a query would have matched lately; /papertrail help lists all commands.
buttons: /papertrail help follow | /papertrail try cat:cs.DC

> /papertrail follow cat:cs.DC    (Ada, in a DM with PaperTrail)
[ephemeral]
Now following: cat:cs.DC
New papers and revisions, in the digest daily 08:00 (UTC).
It sees papers announced from now on; /papertrail try cat:cs.DC shows what it would have matched lately. /papertrail follows lists it.
buttons: /papertrail try cat:cs.DC

> /papertrail follow ti:"operating system" --instant    (Ada, in a DM with PaperTrail)
[ephemeral]
Now following: ti:"operating system"
New papers and revisions, sent at once.
It sees papers announced from now on; /papertrail try ti:"operating system" shows what it would have matched lately. /papertrail follows lists all 2.
buttons: /papertrail try ti:"operating system"

> /papertrail follows    (Ada, in a DM with PaperTrail)
[ephemeral]
This chat follows 2 queries:
1. cat:cs.DC
2. ti:"operating system" · instant
Remove one with /papertrail unfollow NUMBER, add one with /papertrail follow QUERY.

> /papertrail try ti:"operating system"    (Ada, in a DM with PaperTrail)
[ephemeral]
ti:"operating system" would have matched 1 paper in the last 7 days:
2411.17710v1 Agent Centric Operating System -- a Comprehensive Review and Outlook for Operating System
    why: title: "operating system"
Follow it with /papertrail follow ti:"operating system".
buttons: /papertrail follow ti:"operating system"

> /papertrail status    (Ada, in a DM with PaperTrail)
[ephemeral]
Subscription slack:U0ADA: active
Digest: daily 08:00 (UTC); the next Fri 29 Nov 08:00 UTC (in 17 h), if anything matched
Follows: 2 · matches waiting: 19
Sources — arXiv: ok, checked 12 min ago; Hugging Face: ok, checked 3 h ago
/papertrail follows lists the follows; /papertrail digest now sends what is waiting.

> /papertrail follow cat:cs.LG AND (graph OR    (Ada, in a DM with PaperTrail)
[ephemeral]
That query does not parse: expected a search term after 'OR' at position 23
```cat:cs.LG AND (graph OR
                       ^```
Fix it and send /papertrail follow again; /papertrail help follow shows examples.

> /papertrail statsu    (Ada, in a DM with PaperTrail)
[ephemeral]
Unknown command "statsu". Did you mean /papertrail status? /papertrail help lists all commands.
buttons: /papertrail status

> /papertrail cat:cs.AI au:Li    (Ada, in a DM with PaperTrail)
[ephemeral]
To follow that, send /papertrail follow cat:cs.AI au:Li — or /papertrail try cat:cs.AI au:Li to see what it matches.
buttons: /papertrail follow cat:cs.AI au:Li | /papertrail try cat:cs.AI au:Li

> /papertrail follow cat:cs.DC    (Bob, who created #lab)
[in_channel]
This channel is now subscribed.
Now following: cat:cs.DC
New papers and revisions, in the digest daily 08:00 (UTC).
It sees papers announced from now on; /papertrail try cat:cs.DC shows what it would have matched lately. /papertrail follows lists it.

> /papertrail follow cat:cs.AI    (Eve, a member of #lab)
[ephemeral]
Only admins of this channel can change its follows and settings. Anyone can use /papertrail follows, /papertrail status, /papertrail try and /papertrail help.

> /papertrail follows    (Eve, a member of #lab)
[ephemeral]
This channel follows 1 query:
1. cat:cs.DC
Remove one with /papertrail unfollow NUMBER, add one with /papertrail follow QUERY.

> /papertrail digest weekly mon 9am    (Root, a workspace admin, in #lab)
[in_channel]
Digests now go out weekly mon 09:00 (UTC); the next Mon 2 Dec 09:00 UTC (in 3 days), if anything matched.

> /papertrail start    (Eve, who created #news, where PaperTrail is not a member)
[in_channel]
Welcome to PaperTrail, #news! New arXiv papers matching this channel's follows will arrive in a digest daily 08:00 (UTC).
Next, follow something: /papertrail follow cat:cs.DC or /papertrail follow au:"Zeng Li". /papertrail try QUERY shows what a query would have matched lately; /papertrail help lists all commands.
PaperTrail is not in this channel yet, so digests cannot be posted here: /invite <@U0BOT>
"""  # noqa: E501 - the replies as sent, one line each

IN_DM = "Ada, in a DM with PaperTrail"


async def test_a_slack_session_reads_as_documented(slack: FakeSlack, sqlite_store: Database) -> None:
    db = sqlite_store
    turns: list[str] = []
    with serve(make_bot(slack, db)) as client:

        def run(text: str, who: str = IN_DM, user: str = ADA, channel: str = DM) -> None:
            turns.append(
                f"> /papertrail {text}    ({who})\n{shown(slash(client, slack, text, user, channel))}\n"
            )

        for text in ("start", "follow cat:cs.DC", 'follow ti:"operating system" --instant', "follows"):
            run(text)
        backdate(db, f"slack:{ADA}")
        await ingest_recorded_feed(db)
        record_runs(db)
        for text in (
            'try ti:"operating system"',
            "status",
            "follow cat:cs.LG AND (graph OR",
            "statsu",
            "cat:cs.AI au:Li",
        ):
            run(text)
        run("follow cat:cs.DC", "Bob, who created #lab", BOB, LAB)
        run("follow cat:cs.AI", "Eve, a member of #lab", EVE, LAB)
        run("follows", "Eve, a member of #lab", EVE, LAB)
        run("digest weekly mon 9am", "Root, a workspace admin, in #lab", ROOT, LAB)
        run("start", "Eve, who created #news, where PaperTrail is not a member", EVE, NEWS)
    assert "\n".join(turns) == TRANSCRIPT


def test_replies_are_sections_with_the_monospace_block_fenced(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        answer = slash(client, slack, "follow cat:cs.LG AND (graph OR")
    assert answer["blocks"] == [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "verbatim": True, "text": text},
        }
        for text in (
            "That query does not parse: expected a search term after 'OR' at position 23",
            f"```cat:cs.LG AND (graph OR\n{' ' * 23}^```",
            "Fix it and send /papertrail follow again; /papertrail help follow shows examples.",
        )
    ]
    assert answer["unfurl_links"] is False and answer["unfurl_media"] is False


# ---------------------------------------------------------------------------------------------------------
# Where a command applies, and who may change what


def test_a_dm_manages_the_persons_own_subscription_and_a_channel_the_channels(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    db = sqlite_store
    with serve(make_bot(slack, db)) as client:
        slash(client, slack, 'follow au:"Zeng Li"', ADA, DM)
        slash(client, slack, "follow cat:cs.DC", BOB, LAB)
        # A DM with another person (channel_name "directmessage") is still the sender's own subscription.
        slash(client, slack, "follow ti:scheduling", BOB, "D0BOBANDADA")
    assert [f.query for f in follow_items(db, f"slack:{ADA}")] == ['au:"Zeng Li"']
    assert [f.query for f in follow_items(db, f"slack:{LAB}")] == ["cat:cs.DC"]
    assert [f.query for f in follow_items(db, f"slack:{BOB}")] == ["ti:scheduling"]
    assert subscriber_records.get_subscriber(db, "slack:D0BOBANDADA") is None
    # users.info is asked for the locale, conversations.info only about channels.
    assert {call.params["user"] for call in slack.calls_to("users.info")} == {ADA, BOB}
    assert all(call.params["include_locale"] in ("1", "true") for call in slack.calls_to("users.info"))
    assert [call.params["channel"] for call in slack.calls_to("conversations.info")] == [LAB]


async def test_the_context_carries_the_locale_and_the_channels_rule(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    bot = make_bot(slack, sqlite_store)
    dm = await bot.chat_context(Conversation(EVE, "D0EVE", "directmessage"), "/papertrail ")
    assert (dm.address, dm.can_change, dm.is_group, dm.language, dm.chat_name) == (
        f"slack:{EVE}",
        True,
        False,
        "de-DE",
        "Eve <b>",
    )
    verdicts = {}
    for user in (ADA, BOB, EVE, ROOT, "U0NOBODY"):
        conversation = Conversation(user, LAB, "lab")
        ctx = await bot.chat_context(conversation, "/papertrail ", await bot.workspace.channel(LAB))
        assert (ctx.address, ctx.is_group, ctx.chat_name) == (f"slack:{LAB}", True, "#lab")
        verdicts[user] = ctx.can_change
    # The channel's creator and workspace admins; nobody else, and nobody users.info does not know.
    assert verdicts == {ADA: False, BOB: True, EVE: False, ROOT: True, "U0NOBODY": False}
    # A private channel PaperTrail is not in: conversations.info says channel_not_found.
    private = await bot.workspace.channel("G0SECRET")
    assert (private.creator, private.is_member) == ("", False)


def test_a_member_cannot_change_a_channel_but_may_read_it(slack: FakeSlack, sqlite_store: Database) -> None:
    db = sqlite_store
    with serve(make_bot(slack, db)) as client:
        slash(client, slack, "follow cat:cs.DC --instant", BOB, LAB)
        for text in ("unfollow 1", "pause", "digest daily 9", "timezone Europe/Berlin", "follow cat:cs.AI"):
            refused = slash(client, slack, text, EVE, LAB)
            assert refused["response_type"] == "ephemeral"
            assert refused["text"].startswith("Only admins of this channel can change its follows"), text
        for text in ("follows", "status", "digest", "timezone", "try cat:cs.DC", "help"):
            assert not slash(client, slack, text, EVE, LAB)["text"].startswith("Only admins"), text
        # The same member manages her own DM freely.
        own = slash(client, slack, "follow cat:cs.AI", EVE, "D0EVE")
        assert own["text"].startswith("This chat is now subscribed.\nNow following: cat:cs.AI\n")
    subscriber = subscriber_records.get_subscriber(db, f"slack:{LAB}")
    assert subscriber is not None and subscriber.schedule == "daily 08:00"
    assert [(f.query, f.instant) for f in follow_items(db, f"slack:{LAB}")] == [("cat:cs.DC", True)]


def test_without_the_lookup_scopes_a_channel_is_read_only(
    slack: FakeSlack, sqlite_store: Database, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        slash(client, slack, "help", BOB, LAB)  # Bolt's auth.test happens once, before the script
        slack.script(api_error("missing_scope"), api_error("missing_scope"))  # conversations.info, users.info
        refused = slash(client, slack, "follow cat:cs.DC", BOB, LAB)
        slack.script(api_error("missing_scope"))  # users.info: a DM needs no permission from Slack
        own = slash(client, slack, "follow cat:cs.DC", BOB, "D0BOB")
    assert refused["text"].startswith("Only admins of this channel can change")
    assert own["text"].startswith("This chat is now subscribed.")
    warnings = [r.getMessage() for r in caplog.records if r.name == "notifiers.slack.chat_workspace"]
    assert warnings[0] == (
        "slack: conversations.info failed (missing_scope); in channels the sender counts as no admin; "
        "the app needs the scopes users:read, channels:read and groups:read (docs/slack-app.md)"
    )
    assert len(warnings) == 3 and TOKEN not in caplog.text


def test_a_renamed_command_is_used_in_every_example(slack: FakeSlack, sqlite_store: Database) -> None:
    assert command_prefix("/pt") == "/pt "
    assert command_prefix("not a command") == "/papertrail "
    with serve(make_bot(slack, sqlite_store)) as client:
        body = command_body(slack, "follows", command="/pt")
        answer = post(client, body, "application/x-www-form-urlencoded").json()
    assert answer["text"] == (
        "This chat follows nothing yet. Add a follow with /pt follow QUERY, e.g. /pt follow cat:cs.DC; "
        "/pt help follow shows the query language."
    )


# ---------------------------------------------------------------------------------------------------------
# Signatures


def test_requests_without_a_valid_signature_are_refused(slack: FakeSlack, sqlite_store: Database) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        body = command_body(slack, "follow cat:cs.DC")
        form = "application/x-www-form-urlencoded"
        wrong_secret = post(client, body, form, secret="not-the-secret")
        too_old = post(client, body, form, age=5 * 60 + 30)
        from_the_future = post(client, body, form, age=-(5 * 60 + 30))
        unsigned = client.post(EVENTS_PATH, content=body, headers={"Content-Type": form})
        headers = signed_headers(body)
        tampered = client.post(
            EVENTS_PATH, content=body.replace("cs.DC", "cs.AI"), headers={**headers, "Content-Type": form}
        )
        garbage_stamp = client.post(
            EVENTS_PATH,
            content=body,
            headers={**headers, "X-Slack-Request-Timestamp": "yesterday", "Content-Type": form},
        )
        just_in_time = post(client, body, form, age=5 * 60 - 30)
    for response in (wrong_secret, too_old, from_the_future, unsigned, tampered, garbage_stamp):
        assert response.status_code == 401, response.text
    assert just_in_time.status_code == 200
    # Only the one accepted request reached the commands.
    assert [f.query for f in follow_items(sqlite_store, f"slack:{ADA}")] == ["cat:cs.DC"]
    assert len(slack.calls_to("users.info")) == 1


def test_unparsable_bodies_are_refused_without_a_500(slack: FakeSlack, sqlite_store: Database) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        for body, kind in (
            (b"\xff\xfe not utf-8", "application/x-www-form-urlencoded"),
            (b"payload=%7Bnot-json", "application/x-www-form-urlencoded"),
            (b"[1, 2, 3]", "application/json"),
        ):
            headers = {**signed_headers(body), "Content-Type": kind}
            response = client.post(EVENTS_PATH, content=body, headers=headers)
            assert response.status_code == 400, (body, response.status_code)


def test_failures_inside_are_answered_with_an_apology_not_a_500(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    def broken_clock() -> datetime:
        raise RuntimeError("a bug around the grammar")

    with serve(make_bot(slack, sqlite_store, clock=broken_clock)) as client:
        apology = slash(client, slack, "status")
    with sqlite_store.session() as session:  # the database loses a table: the grammar apologises itself
        session.execute(sa.text("DROP TABLE follow"))
    with serve(make_bot(slack, sqlite_store)) as client:
        also = slash(client, slack, "follow cat:cs.DC")
    for answer in (apology, also):
        assert answer["response_type"] == "ephemeral"
        assert (
            answer["text"]
            == "Sorry, something went wrong on PaperTrail's side. Please try again in a few minutes."
        )
    # A malformed id (not a payload Slack sends) is answered too.
    with serve(make_bot(slack, sqlite_store)) as client:
        odd = slash(client, slack, "help", "not-a-user", DM)
    assert odd["text"] == "PaperTrail cannot tell which Slack conversation this command came from."


def test_events_url_verification_is_answered(slack: FakeSlack, sqlite_store: Database) -> None:
    body = json.dumps(
        {
            "token": "t",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
            "type": "url_verification",
        }
    )
    with serve(make_bot(slack, sqlite_store)) as client:
        response = post(client, body, "application/json")
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


# ---------------------------------------------------------------------------------------------------------
# Escaping


HOSTILE = 'ti:"<!channel> & <https://evil.example|click here>" OR abs:"a>b"'


def test_hostile_query_text_is_escaped_in_replies(slack: FakeSlack, sqlite_store: Database) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        followed = slash(client, slack, f"follow {HOSTILE}")
        broken = slash(client, slack, 'try ti:"<b>&amp;" AND (```<!here>')
        listing = slash(client, slack, "follows")
    assert followed["text"].split("\n")[1] == (
        'Now following: ti:"&lt;!channel&gt; &amp; &lt;https://evil.example|click here&gt;" OR abs:"a&gt;b"'
    )
    for answer in (followed, broken, listing):
        texts = [answer["text"]] + [b["text"]["text"] for b in answer["blocks"] if b["type"] == "section"]
        for text in texts:
            assert "<" not in text and ">" not in text, text
            assert not re.search(r"&(?!amp;|lt;|gt;)", text), text
    # The fence around the caret is not ended early by backticks in the query.
    caret = broken["blocks"][1]["text"]["text"]
    assert caret.startswith("```") and caret.endswith("```") and caret.count("```") == 2
    assert "`\u200b`\u200b`\u200b&lt;!here&gt;" in caret


def test_long_blocks_are_split_into_sections_without_breaking_an_entity() -> None:
    pieces = block_sections(Block("&" * 2500 + "\n" + "<" * 10))
    assert all(len(piece) <= MAX_SECTION_CHARS for piece in pieces)
    assert "".join(pieces).replace("\n", "") == "&amp;" * 2500 + "&lt;" * 10
    for piece in pieces:
        assert re.fullmatch(r"(&amp;|&lt;|\n)+", piece), piece[-10:]
    fenced = block_sections(Block("x" * 7000, monospace=True))
    assert len(fenced) == 3 and all(p.startswith("```") and p.endswith("```") for p in fenced)
    assert all(len(p) <= MAX_SECTION_CHARS for p in fenced)


# ---------------------------------------------------------------------------------------------------------
# App Home and buttons


def test_app_home_lists_the_follows_escaped(slack: FakeSlack, sqlite_store: Database) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        slash(client, slack, "follow cat:cs.DC")
        slash(client, slack, f"follow {HOSTILE} --new-only --instant")
        opened = {"type": "app_home_opened", "user": ADA, "channel": DM, "tab": "home", "event_ts": "1.0"}
        messages_tab = {**opened, "tab": "messages"}
        assert post(client, event_body(messages_tab), "application/json").status_code == 200
        assert post(client, event_body(opened), "application/json").status_code == 200
        (published,) = slack.wait_for("views.publish")
        assert post(client, event_body({**opened, "user": EVE}), "application/json").status_code == 200
        _, empty = slack.wait_for("views.publish", count=2)
    assert empty.params["view"]["blocks"][1]["text"]["text"] == (
        "*You follow nothing yet.* Send /papertrail follow QUERY in the Messages tab, e.g. "
        "/papertrail follow cat:cs.DC. Digests arrive in this app's Messages tab."
    )
    assert published.params["user_id"] == ADA
    view = published.params["view"]
    assert view["type"] == "home"
    texts = [
        b["text"]["text"] if b["type"] in ("section", "header") else b["elements"][0]["text"]
        for b in view["blocks"]
        if b["type"] != "divider"
    ]
    assert texts[:4] == [
        "PaperTrail",
        "*Your follows* (2). Digests arrive in this app's Messages tab, daily 08:00 (UTC).",
        "*1.* cat:cs.DC",
        '*2.* ti:"&lt;!channel&gt; &amp; &lt;https://evil.example|click here&gt;" OR abs:"a&gt;b"'
        " · _new papers only · instant_",
    ]
    assert texts[4].startswith("*Commands.* In a direct message with PaperTrail they manage your own follows")
    assert "\n/papertrail follow QUERY [--new-only] [--instant] — follow a topic" in texts[4]
    buttons = [b["accessory"] for b in view["blocks"] if "accessory" in b]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        ("papertrail_unfollow_1", "unfollow cat:cs.DC"),
        ("papertrail_unfollow_2", f"unfollow {HOSTILE}"),
    ]


def test_the_home_unfollow_button_removes_the_follow_and_republishes(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        slash(client, slack, "follow cat:cs.DC")
        slash(client, slack, "follow ti:scheduling")
        home = {"container": {"type": "view", "view_id": "V0HOME"}, "view": {"id": "V0HOME", "type": "home"}}
        body = click_body(slack, "papertrail_unfollow_1", "unfollow cat:cs.DC", ADA, home)
        assert post(client, body, "application/x-www-form-urlencoded").status_code == 200
        (published,) = slack.wait_for("views.publish")
    blocks = published.params["view"]["blocks"]
    assert blocks[1]["elements"][0]["text"] == (
        "Stopped following: cat:cs.DC\n1 follow left; /papertrail follows lists them."
    )
    assert [b["text"]["text"] for b in blocks if "accessory" in b] == ["*1.* ti:scheduling"]
    assert [f.query for f in follow_items(sqlite_store, f"slack:{ADA}")] == ["ti:scheduling"]


# ---------------------------------------------------------------------------------------------------------
# Languages

LI, LI_DM, ZH_LAB = "U0LI", "D0LI", "C0ZHLAB"
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_a_chinese_speaker_gets_chinese_replies_and_a_chinese_app_home(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    slack.users[LI] = {"id": LI, "name": "li", "locale": "zh-CN", "profile": {"real_name": "Li Wei"}}
    slack.channels[ZH_LAB] = {
        "id": ZH_LAB,
        "name": "zh-lab",
        "is_channel": True,
        "creator": LI,
        "is_member": False,
    }
    opened = {"type": "app_home_opened", "user": LI, "channel": LI_DM, "tab": "home", "event_ts": "1.0"}
    with serve(make_bot(slack, sqlite_store)) as client:
        # Before any command, the App Home speaks the person's Slack locale.
        assert post(client, event_body(opened), "application/json").status_code == 200
        (empty,) = slack.wait_for("views.publish")
        answer = slash(client, slack, "follow cat:cs.DC --new-only", LI, LI_DM)
        helped = slash(client, slack, "help", LI, LI_DM)
        assert post(client, event_body(opened), "application/json").status_code == 200
        _, published = slack.wait_for("views.publish", count=2)
        in_channel = slash(client, slack, "follow cat:cs.AI", LI, ZH_LAB)
    assert empty.params["view"]["blocks"][1]["text"]["text"] == (
        "*你还没有任何关注。* 在“消息”标签页发送 /papertrail follow QUERY，"
        "例如 /papertrail follow cat:cs.DC。"
        "摘要会发送到本应用的“消息”标签页。"
    )
    assert answer["response_type"] == "ephemeral"
    assert answer["text"] == (
        "本会话已订阅。\n已关注：cat:cs.DC\n仅新论文，随摘要发送：每天 08:00（UTC）。\n"
        "它会匹配从现在起公布的论文；/papertrail try cat:cs.DC 显示它最近会匹配到的论文。"
        "/papertrail follows 可查看。"
    )
    assert [b["text"]["text"] for b in answer["blocks"][-1]["elements"]] == ["/papertrail try cat:cs.DC"]
    assert "\n/papertrail language [en|zh] — 回复、摘要和导读所用的语言\n" in helped["text"]
    subscriber = subscriber_records.get_subscriber(sqlite_store, f"slack:{LI}")
    assert subscriber is not None and subscriber.language == "zh"
    blocks = published.params["view"]["blocks"]
    texts = [b["text"]["text"] if b["type"] == "section" else "" for b in blocks]
    assert texts[1] == "*你的关注* （1）。摘要会发送到本应用的“消息”标签页，时间：每天 08:00（UTC）。"
    assert texts[2] == "*1.* cat:cs.DC · _仅新论文_"
    assert [b["accessory"]["text"]["text"] for b in blocks if "accessory" in b] == ["取消关注"]
    assert texts[4].startswith(
        "*命令。* 在与 PaperTrail 的私信中，命令管理你自己的关注；在频道中，管理该频道的关注。\n"
    )
    assert "/papertrail follow QUERY [--new-only] [--instant] — 关注一个主题、一位作者或一篇论文" in texts[4]
    assert blocks[-1]["elements"][0]["text"] == "/papertrail help follow 介绍查询语法并附有示例。"
    # A change to a channel goes to the channel, with the note that the app must be invited, in Chinese.
    assert in_channel["response_type"] == "in_channel"
    assert in_channel["text"].startswith("本频道已订阅。\n已关注：cat:cs.AI\n")
    assert in_channel["text"].endswith(
        "PaperTrail 还不在这个频道中，因此无法在这里发布摘要：/invite <@U0BOT>"
    )


def test_a_channel_member_is_refused_in_their_language_until_the_channel_has_one(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    slack.users[LI] = {"id": LI, "name": "li", "locale": "zh-TW", "profile": {"real_name": "Li Wei"}}
    with serve(make_bot(slack, sqlite_store)) as client:
        slash(client, slack, "follow cat:cs.DC", ROOT, LAB)  # a workspace admin without a locale
        refused = slash(client, slack, "pause", LI, LAB)
        listed = slash(client, slack, "follows", LI, LAB)
        slash(client, slack, "language en", ROOT, LAB)
        english = slash(client, slack, "follows", LI, LAB)
    assert refused["response_type"] == "ephemeral"
    assert refused["text"].startswith("只有本频道的管理员可以更改关注和设置。")
    assert listed["text"].startswith("本频道关注了 1 个查询：")
    assert english["text"].startswith("This channel follows 1 query:")
    assert not CJK.search(english["text"])


def test_a_suggestion_button_runs_its_command_for_whoever_clicks(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        suggested = slash(client, slack, "statsu")
        (button,) = suggested["blocks"][-1]["elements"]
        message = {
            "container": {"type": "message", "channel_id": LAB, "is_ephemeral": True},
            "channel": {"id": LAB, "name": "lab"},
            "response_url": slack.response_url("click"),
        }
        body = click_body(slack, button["action_id"], "follow cat:cs.DC", EVE, message)
        assert post(client, body, "application/x-www-form-urlencoded").status_code == 200
        body = click_body(slack, button["action_id"], button["value"], EVE, message)
        assert post(client, body, "application/x-www-form-urlencoded").status_code == 200
        refused, status = slack.wait_for("response", count=2)
    assert (button["action_id"], button["value"]) == ("papertrail_run_0", "status")
    assert refused.params["replace_original"] is False
    assert refused.params["text"].startswith("Only admins of this channel can change")
    assert status.params["text"].startswith("This channel has no subscription yet: send /papertrail start.")
    assert subscriber_records.get_subscriber(sqlite_store, f"slack:{LAB}") is None


def test_a_slow_reply_is_acknowledged_and_sent_to_the_response_url(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    with serve(make_bot(slack, sqlite_store, ack_budget=0.0)) as client:
        body = command_body(slack, "follow cat:cs.DC", BOB, LAB)
        acknowledged = post(client, body, "application/x-www-form-urlencoded")
        (late,) = slack.wait_for("response")
    assert acknowledged.status_code == 200 and acknowledged.text == ""
    assert late.params["response_type"] == "in_channel"
    assert late.params["text"].startswith("This channel is now subscribed.\nNow following: cat:cs.DC\n")


# ---------------------------------------------------------------------------------------------------------
# Fuzzing


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    text=st.one_of(st.text(max_size=200), command_text(), st.just("&<>" * 700)),
    where=st.sampled_from([(ADA, DM), (BOB, LAB), (EVE, LAB), (EVE, NEWS)]),
)
def test_any_slash_command_text_gets_an_escaped_reply(
    slack: FakeSlack, sqlite_store: Database, text: str, where: tuple[str, str]
) -> None:
    with serve(make_bot(slack, sqlite_store)) as client:
        response = post(client, command_body(slack, text, *where), "application/x-www-form-urlencoded")
    assert response.status_code == 200, (text, response.text)
    answer = response.json()
    assert answer["text"].strip() and answer["response_type"] in ("ephemeral", "in_channel")
    assert "Sorry, something went wrong" not in answer["text"], text
    for block in answer["blocks"]:
        if block["type"] == "section":
            mrkdwn = block["text"]["text"]
            assert 0 < len(mrkdwn) <= MAX_SECTION_CHARS
            assert not re.search(r"&(?!amp;|lt;|gt;)", mrkdwn), (text, mrkdwn)
            assert "<" not in mrkdwn.replace("<@U0BOT>", "") and ">" not in mrkdwn.replace("<@U0BOT>", "")


# ---------------------------------------------------------------------------------------------------------
# Socket Mode and set-up


async def test_socket_mode_answers_commands_and_events_then_stops_cleanly(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    settings = Settings(slack_bot_token=TOKEN, slack_app_token=APP_TOKEN, slack_api_url=slack.base_url)
    assert uses_socket_mode(settings.slack_bot()) and not serves_http(settings.slack_bot())
    bot = SlackBot(settings.slack_bot(), sqlite_store, clock=lambda: NOW)
    async with fake_socket_mode() as socket:
        slack.socket_url = socket.url
        stop = asyncio.Event()
        running = asyncio.create_task(bot.run_socket_mode(stop))
        fields = dict(
            team_id="T0001", channel_id=DM, channel_name="directmessage", user_id=ADA, command="/papertrail",
            text="follow cat:cs.DC", response_url=slack.response_url(), trigger_id="1.2.3",
        )  # fmt: skip
        ack = await socket.send("slash_commands", fields)
        opened = {"type": "app_home_opened", "user": ADA, "channel": DM, "tab": "home", "event_ts": "1.0"}
        event_ack = await socket.send("events_api", json.loads(event_body(opened)))
        (published,) = await asyncio.to_thread(slack.wait_for, "views.publish")
        stop.set()
        await asyncio.wait_for(running, 10)
        assert socket.closed.is_set() and socket.connections == 1
    assert ack["payload"]["response_type"] == "ephemeral"
    assert ack["payload"]["text"].startswith("This chat is now subscribed.\nNow following: cat:cs.DC\n")
    assert event_ack == {"envelope_id": event_ack["envelope_id"]}
    assert published.params["view"]["blocks"][2]["text"]["text"] == "*1.* cat:cs.DC"
    # The first WebSocket URL was asked with the app-level token, not the bot token.
    (opened_call,) = slack.calls_to("apps.connections.open")
    assert opened_call.headers["Authorization"] == f"Bearer {APP_TOKEN}"


async def test_socket_mode_with_a_refused_app_token_says_what_to_fix(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    settings = Settings(slack_bot_token=TOKEN, slack_app_token="xapp-wrong", slack_api_url=slack.base_url)
    with pytest.raises(SlackSetupError, match=r"invalid_auth.*PAPERTRAIL_SLACK_APP_TOKEN") as caught:
        await SlackBot(settings.slack_bot(), sqlite_store).run_socket_mode(asyncio.Event())
    assert "xapp-wrong" not in str(caught.value)


def test_missing_settings_are_named(sqlite_store: Database) -> None:
    with pytest.raises(SlackSetupError, match="PAPERTRAIL_SLACK_BOT_TOKEN"):
        SlackBot(Settings().slack_bot(), sqlite_store)
    client = AsyncWebClient(token=TOKEN, base_url="http://127.0.0.1:9/api/")
    with pytest.raises(SlackSetupError, match="PAPERTRAIL_SLACK_SIGNING_SECRET"):
        SlackBot(Settings(slack_bot_token=TOKEN).slack_bot(), sqlite_store, client=client).routes()
    assert not serves_http(Settings(slack_bot_token=TOKEN, slack_signing_secret=" ").slack_bot())
    assert serves_http(Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET).slack_bot())


def test_building_the_app_leaves_papertrails_own_log_levels_alone(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    # Bolt sets the level of a logger named after the app; named "papertrail" it silenced papertrail.* INFO.
    import logging

    ours = logging.getLogger("papertrail")
    before = ours.level
    try:
        make_bot(slack, sqlite_store)
        assert ours.level == before
    finally:
        ours.setLevel(before)
