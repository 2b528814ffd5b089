"""The vote commands (bot/commands_votes.py) through the one grammar, on a real SQLite store holding the
recorded arXiv day of 28 Nov 2024 (as in tests/test_commands.py, whose templates each test copies).

Replies are compared word for word; the digest buttons' press (:func:`press_vote`) is checked for the
toggle a Telegram keyboard relies on.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.commands_base import ChatContext, Problem
from bot.commands_votes import LIKES_SHOWN, press_vote
from core.config import Settings
from core.db import Database
from core.follows import subscriber_records
from core.models import DISLIKE, LIKE
from core.papers import paper_records
from core.taste import taste_records
from core.taste.taste_records import SeedIn
from core.taste.votes import votes
from tests.support.chat_commands import (
    GROUP_ADMIN,
    GROUP_MEMBER,
    NOW,
    PRIVATE,
    SLACK,
    migrated_template_fixture,
    open_copy,
    say,
    subscribed_template_fixture,
)

__all__ = ["migrated_template_fixture", "subscribed_template_fixture"]  # fixtures, asked for by name

PAPER = "2411.17710"
TITLE = "Agent Centric Operating System -- a Comprehensive Review and Outlook…"  # as replies cut it
ZH_PRIVATE = ChatContext("telegram:4343", chat_name="李雷", language="zh-CN")


@pytest.fixture
def db(subscribed_template: Path, tmp_path: Path) -> Iterator[Database]:
    """The recorded day stored, PRIVATE subscribed (two follows): a copy per test."""
    yield from open_copy(subscribed_template, tmp_path)


def subscriber_id(db: Database, address: str) -> int:
    found = subscriber_records.get_subscriber(db, address)
    assert found is not None and found.id is not None
    return found.id


TRANSCRIPT = f"""\
> /likes
This chat has not voted on any paper yet. Vote with /like ID or /dislike ID, or with the 👍 and 👎 buttons under the papers of a digest.

> /like {PAPER}
👍 Liked {PAPER}v1: {TITLE}
Votes teach PaperTrail what this chat reads; /likes lists them, /unvote {PAPER}v1 takes this one back.

> /like https://arxiv.org/abs/{PAPER}v1
👍 {PAPER}v1 was liked already: {TITLE}
Votes teach PaperTrail what this chat reads; /likes lists them, /unvote {PAPER}v1 takes this one back.

> /dislike arXiv:{PAPER}
👎 Disliked {PAPER}v1 (it was 👍 before): {TITLE}
Votes teach PaperTrail what this chat reads; /likes lists them, /unvote {PAPER}v1 takes this one back.

> /likes
This chat voted on 1 paper: 👍 0 · 👎 1
👎 {PAPER}v1 {TITLE}
/unvote ID takes a vote back.

> /unvote {PAPER}
Vote on {PAPER} taken back.
/like {PAPER} or /dislike {PAPER} votes again; /likes lists the votes.

> /unvote {PAPER}
This chat has no vote on {PAPER}. /likes lists its votes.

> /like
Say which paper: /like 2306.03564, an arXiv id (add v2 for one version; without it, the newest version PaperTrail stored).

> /dislike cat:cs.DC
"cat:cs.DC" is not an arXiv id. An id looks like 2306.03564 or 2306.03564v2 (hep-th/9901001 for papers before 2007); a link to arxiv.org/abs/… works too. Example: /dislike 2306.03564

> /like 2501.00001
PaperTrail has not stored 2501.00001: votes go to papers it has collected from arXiv. /follow id:2501.00001 watches it, so this chat hears when it is announced or revised.

> /like {PAPER}v3
PaperTrail has no v3 of {PAPER}; it has stored v1. /like {PAPER} votes on the newest.
"""  # noqa: E501 - the replies as sent, one line each


def test_a_vote_session_reads_as_documented(db: Database) -> None:
    lines = []
    for text in (
        "/likes",
        f"/like {PAPER}",
        f"/like https://arxiv.org/abs/{PAPER}v1",
        f"/dislike arXiv:{PAPER}",
        "/likes",
        f"/unvote {PAPER}",
        f"/unvote {PAPER}",
        "/like",
        "/dislike cat:cs.DC",
        "/like 2501.00001",
        f"/like {PAPER}v3",
    ):
        lines.append(f"> {text}\n{say(db, text).text}\n")
    assert "\n".join(lines) == TRANSCRIPT
    assert votes(db, subscriber_id(db, PRIVATE.address)) == []


def test_replies_offer_undo_and_say_what_went_wrong(db: Database) -> None:
    liked = say(db, f"/like {PAPER}")
    assert (liked.command, liked.error, liked.suggestions) == ("like", None, (f"unvote {PAPER}v1",))
    assert say(db, "/like 2501.00001").suggestions == ("follow id:2501.00001",)
    assert say(db, f"/dislike {PAPER}v7").suggestions == (f"dislike {PAPER}",)
    for text, problem in (
        ("/like", Problem.BAD_ARGUMENT),
        ("/like 2306", Problem.BAD_ARGUMENT),
        ("/like 2501.00001", Problem.NOT_FOUND),
        ("/unvote 2501.00001", Problem.NOT_FOUND),
        ("/like 2411.17710", None),
    ):
        assert say(db, text).error is problem, text
    # The vote is the chat's, on the version the reply names; voting again replaces it.
    (view,) = votes(db, subscriber_id(db, PRIVATE.address))
    assert (view.arxiv_id, view.version, view.value) == (PAPER, 1, LIKE)
    # Other names for the commands: "unlike" runs unvote, typos and synonyms are suggested.
    assert say(db, f"/unlike {PAPER}").command == "unvote"
    assert say(db, f"/upvote {PAPER}").suggestions == (f"like {PAPER}",)
    assert say(db, f"/dislik {PAPER}").suggestions == (f"dislike {PAPER}",)


def test_a_chat_without_a_subscription_is_told_to_start(db: Database) -> None:
    other = ChatContext("telegram:999", chat_name="Bob")
    for text in (f"/like {PAPER}", f"/dislike {PAPER}", f"/unvote {PAPER}", "/likes"):
        reply = say(db, text, other)
        assert reply.error is Problem.NOT_SUBSCRIBED, text
        assert reply.text.startswith("This chat has no subscription yet. Send /start"), text
    assert subscriber_records.get_subscriber(db, other.address) is None  # a vote never creates a subscription


def test_in_a_group_only_admins_vote_and_anyone_lists(db: Database) -> None:
    say(db, "/start", GROUP_ADMIN)
    refused = say(db, f"/like {PAPER}", GROUP_MEMBER)
    assert (refused.text, refused.error) == (
        "Only admins of this group can vote for it: its votes teach PaperTrail what this group reads. "
        "Anyone can use /likes, /follows, /status, /try and /help.",
        Problem.NOT_ALLOWED,
    )
    assert say(db, f"/unvote {PAPER}", GROUP_MEMBER).error is Problem.NOT_ALLOWED
    assert say(db, f"/dislike {PAPER}", GROUP_ADMIN).text.startswith(f"👎 Disliked {PAPER}v1: ")
    listing = say(db, "/likes", GROUP_MEMBER)
    assert listing.error is None
    assert listing.text.startswith(f"This group voted on 1 paper: 👍 0 · 👎 1\n👎 {PAPER}v1 Agent Centric")
    # The group's vote is not the private chat's.
    assert votes(db, subscriber_id(db, PRIVATE.address)) == []


def test_slack_examples_use_its_command(db: Database) -> None:
    say(db, "/papertrail start", SLACK)
    reply = say(db, f"/papertrail like {PAPER}", SLACK)
    assert reply.text.endswith(
        f"/papertrail likes lists them, /papertrail unvote {PAPER}v1 takes this one back."
    )
    assert reply.suggestions == (f"unvote {PAPER}v1",)  # a command line, without the prefix


def test_chinese_replies(db: Database) -> None:
    say(db, "/start", ZH_PRIVATE)
    assert say(db, f"/like {PAPER}", ZH_PRIVATE).text == (
        f"👍 已喜欢 {PAPER}v1：{TITLE}\n"
        f"投票让 PaperTrail 了解本会话爱读什么；/likes 列出所有投票，/unvote {PAPER}v1 撤回这一票。"
    )
    assert say(db, "/likes", ZH_PRIVATE).text == (
        f"本会话对 1 篇论文投了票：👍 1 · 👎 0\n👍 {PAPER}v1 {TITLE}\n/unvote ID 撤回一票。"
    )
    assert say(db, "/like 2306", ZH_PRIVATE).text.startswith("“2306”不是 arXiv 编号。")


def test_likes_lists_the_newest_and_counts_the_rest(db: Database) -> None:
    sid = subscriber_id(db, PRIVATE.address)
    papers = [row.paper_id for row in paper_records.versions_since(db, NOW - timedelta(days=1))][
        : LIKES_SHOWN + 5
    ]
    assert len(papers) == LIKES_SHOWN + 5
    for minute, paper in enumerate(papers):
        taste_records.vote(
            db, sid, paper, DISLIKE if minute % 5 == 0 else LIKE, now=NOW + timedelta(minutes=minute)
        )
    taste_records.add_seeds(db, sid, [SeedIn("title:a paper", None, "A paper", "Its abstract")], now=NOW)
    reply = say(db, "/likes")
    lines = reply.text.split("\n")
    assert lines[0] == "This chat voted on 25 papers: 👍 20 · 👎 5"
    listed = lines[1 : 1 + LIKES_SHOWN]
    assert [line.split(" ")[1].split("v")[0] for line in listed] == papers[::-1][:LIKES_SHOWN]  # newest first
    assert listed[0].startswith("👍 ") and listed[-1].startswith("👎 ")  # papers[5] was disliked
    assert lines[1 + LIKES_SHOWN :] == [
        "…and 5 older votes.",
        "1 paper imported from a library counts as liked too.",
        "/unvote ID takes a vote back.",
    ]


def test_a_digest_button_does_what_the_keyboard_shows(db: Database) -> None:
    settings = Settings()
    sid = subscriber_id(db, PRIVATE.address)

    def press(
        value: int, ctx: ChatContext = PRIVATE, version: int = 1, *, chosen: bool = False
    ) -> tuple[str, int | None]:
        pressed = press_vote(db, settings.chat(), ctx, PAPER, version, value, chosen=chosen, now=NOW)
        return pressed.text, pressed.vote

    assert press(LIKE) == (f"👍 Liked {PAPER}v1. Press again to take it back.", LIKE)
    assert press(DISLIKE) == (f"👎 Disliked {PAPER}v1. Press again to take it back.", DISLIKE)
    assert [v.value for v in votes(db, sid)] == [DISLIKE]
    # The chosen button ("👎 ✓") pressed again takes the vote back.
    assert press(DISLIKE, chosen=True) == (f"Vote on {PAPER}v1 taken back.", 0)
    assert votes(db, sid) == []
    # A paper liked with the command before its digest came: the digest's plain 👍 keeps the like.
    say(db, f"/like {PAPER}")
    assert press(LIKE) == (f"👍 Liked {PAPER}v1. Press again to take it back.", LIKE)
    assert [v.value for v in votes(db, sid)] == [LIKE]
    assert press(LIKE, chosen=True)[1] == 0
    # Refused, with the reason: a version not stored, a group member, a chat without a subscription.
    assert press(LIKE, version=4) == (f"PaperTrail has not stored {PAPER}v4.", None)
    say(db, "/start", GROUP_ADMIN)
    member = press_vote(db, settings.chat(), GROUP_MEMBER, PAPER, 1, LIKE, now=NOW)
    assert (member.vote, member.error) == (None, Problem.NOT_ALLOWED)
    assert member.text.startswith("Only admins of this group can vote for it")
    gone = press_vote(db, settings.chat(), ChatContext("telegram:31337"), PAPER, 1, LIKE, now=NOW)
    assert (gone.text, gone.error) == (
        "This chat has no subscription any more: /start sets it up again.",
        Problem.NOT_SUBSCRIBED,
    )
    chinese = press_vote(db, settings.chat(), ZH_PRIVATE, PAPER, 1, LIKE, now=NOW)
    assert (chinese.text, chinese.language) == ("本会话已没有订阅：/start 可重新设置。", "zh")


def test_a_failing_store_gets_an_apology_not_an_exception(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paper_records, "versions_of", None)  # any failure inside
    pressed = press_vote(db, Settings().chat(), PRIVATE, PAPER, 1, LIKE, now=NOW)
    assert (pressed.vote, pressed.error) == (None, Problem.INTERNAL)
    assert pressed.text.startswith("Sorry, the vote was not recorded")
