"""The chat commands of learned recommendations, ``recommend [on [N]|off]`` and ``try recommended``, on
SQLite and PostgreSQL over the recorded arXiv day, in English and Chinese."""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.commands import handle
from bot.commands_base import ChatContext, Problem, Reply
from core.config import Settings
from core.db import Database
from core.follows import subscriber_records
from core.follows.index import match_new
from core.models import LIKE, utcnow
from core.papers import paper_records
from core.taste import taste_records
from core.taste.training import retrain
from core.taste.votes import cast_vote
from tests.support.likes import LIKES, earlier, later, liked_papers

PRIVATE = ChatContext("telegram:4242", chat_name="Ada Lovelace")
GROUP_MEMBER = ChatContext("telegram:-100200300", is_group=True, can_change=False, chat_name="Lab")
GROUP_ADMIN = ChatContext("telegram:-100200300", is_group=True, can_change=True, chat_name="Lab")


def say(db: Database, text: str, ctx: ChatContext = PRIVATE, *, now: datetime | None = None) -> Reply:
    reply = handle(db, Settings().chat(), ctx, text, now=now or utcnow())
    assert reply.text.strip(), f"empty reply to {text!r}"
    return reply


def stored_day(db: Database) -> datetime:
    """The earlier half of the day stored two days ago, the later half an hour ago; returns now."""
    now = utcnow()
    paper_records.save_versions(db, earlier(), now=now - timedelta(days=2))
    paper_records.save_versions(db, later(), now=now - timedelta(hours=1))
    match_new(db, now=now)
    return now


def like(db: Database, address: str, count: int, now: datetime) -> int:
    """``count`` liked galaxy-astrophysics papers (one retrain at the end); returns the subscriber id."""
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    for paper in liked_papers(count):
        taste_records.vote(db, subscriber.id, paper.arxiv_id, LIKE, now=now)
    retrain(db, subscriber.id, now=now)
    return subscriber.id


def test_recommend_before_any_subscription(db: Database) -> None:
    reply = say(db, "/recommend")
    assert reply.error is Problem.NOT_SUBSCRIBED
    assert "has no subscription yet" in reply.text


def test_recommend_shows_the_state_and_refuses_on_without_three_likes(db: Database) -> None:
    now = stored_day(db)
    say(db, "/start")
    shown = say(db, "/recommend", now=now)
    assert shown.ok
    assert shown.text == (
        "Recommendations are off in this chat.\n"
        "Liked: 0, disliked: 0, from your library: 0. Recommendations need 3 liked papers first, and this "
        "chat has 0. Like papers with the 👍 under each digest item or /like ARXIV_ID, or import a reference "
        "library (papertrail import library, or the manage page of an email subscription).\n"
        "/recommend on N turns them on with up to N per digest (1 to 20, 5 when not said), /recommend off "
        "turns them off, /try recommended shows what the last 7 days would have brought."
    )
    sid = like(db, PRIVATE.address, 2, now)
    refused = say(db, "/recommend on", now=now)
    assert refused.error is Problem.BAD_ARGUMENT and "and this chat has 2." in refused.text
    assert subscriber_records.get_subscriber(db, PRIVATE.address).recommend is None  # type: ignore[union-attr]
    # The third like (through the vote step every channel calls) trains the model; now it turns on.
    cast_vote(db, sid, liked_papers(3)[2].arxiv_id, LIKE, now=now)
    on = say(db, "/recommend on", now=now)
    assert on.ok and on.text.startswith(
        "Recommendations are on: up to 5 papers per digest that your follows did not bring"
    )
    assert on.suggestions == ("try recommended",)
    assert subscriber_records.get_subscriber(db, PRIVATE.address).recommend == 5  # type: ignore[union-attr]
    shown = say(db, "/recommend", now=now)
    assert shown.text.startswith(
        "Recommendations are on in this chat: up to 5 papers per digest.\n"
        "Liked: 3, disliked: 0, from your library: 0. The model is trained on them."
    )


def test_recommend_on_n_and_off(db: Database) -> None:
    now = stored_day(db)
    say(db, "/start")
    like(db, PRIVATE.address, 3, now)

    def setting() -> int | None:
        subscriber = subscriber_records.get_subscriber(db, PRIVATE.address)
        assert subscriber is not None
        return subscriber.recommend

    assert say(db, "/recommend on 12", now=now).text.startswith("Recommendations are on: up to 12 papers")
    assert setting() == 12
    assert say(db, "/recommend 1", now=now).text.startswith("Recommendations are on: up to 1 paper per")
    assert setting() == 1
    for bad in (
        "/recommend on 0",
        "/recommend on 21",
        "/recommend maybe",
        "/recommend on 5 6",
        "/recommend -3",
    ):
        reply = say(db, bad, now=now)
        assert reply.error is Problem.BAD_ARGUMENT, bad
        assert "Write /recommend on, /recommend on 10 (1 to 20) or /recommend off." in reply.text
    assert setting() == 1
    off = say(db, "/recommend off", now=now)
    assert off.text == (
        "Recommendations are off. The papers you liked are kept: /recommend on turns them on again."
    )
    assert setting() is None
    # The likes and the model stay.
    assert (
        taste_records.vote_counts(db, subscriber_records.get_subscriber(db, PRIVATE.address).id or 0)[0] == 3  # type: ignore[union-attr]
    )
    assert say(db, "/recommend", now=now).text.endswith(
        "/try recommended shows what the last 7 days would have brought."
    )


def test_only_admins_turn_recommendations_on_in_a_group(db: Database) -> None:
    now = stored_day(db)
    say(db, "/start", GROUP_ADMIN)
    like(db, GROUP_ADMIN.address, 3, now)
    refused = say(db, "/recommend on", GROUP_MEMBER, now=now)
    assert refused.error is Problem.NOT_ALLOWED
    assert say(db, "/recommend", GROUP_MEMBER, now=now).text.startswith(
        "Recommendations are off in this group."
    )
    assert say(db, "/recommend on 3", GROUP_ADMIN, now=now).ok
    assert say(db, "/recommend", GROUP_MEMBER, now=now).text.startswith(
        "Recommendations are on in this group: up to 3 papers per digest."
    )


def test_try_recommended_lists_what_the_week_would_have_brought(db: Database) -> None:
    now = stored_day(db)
    say(db, "/start")
    without = say(db, "/try recommended", now=now)
    assert without.error is Problem.NOT_FOUND and "Recommendations need 3 liked papers first" in without.text
    like(db, PRIVATE.address, LIKES, now)
    reply = say(db, "/try recommended", now=now)
    assert reply.ok
    lines = reply.text.split("\n")
    assert lines[0].startswith("Your model would have recommended")
    listed = [line.split("v1 ", 1)[0] for line in lines[1:] if line[:1].isdigit()]
    assert 1 <= len(listed) <= 5
    assert not set(listed) & {p.arxiv_id for p in liked_papers()}
    # The whole week counts, the earlier half too.
    assert set(listed) <= {p.arxiv_id for p in (*earlier(), *later())}
    assert reply.text.count("why: ") == len(listed)
    assert "which you liked" in reply.text
    assert lines[-1] == "/recommend on puts such papers in your digests."
    # Try does not save anything, and another spelling of the word works too.
    assert say(db, "/try Recommendations", now=now).text == reply.text


def test_try_recommended_in_chinese(db: Database) -> None:
    now = stored_day(db)
    say(db, "/start")
    say(db, "/language zh")
    like(db, PRIVATE.address, LIKES, now)
    reply = say(db, "/try recommended", now=now)
    assert reply.text.startswith("你的模型会从最近 7 天的论文中推荐")
    assert "原因：" in reply.text and "与你喜欢的" in reply.text
    shown = say(db, "/recommend", now=now)
    assert shown.text.startswith("本会话的推荐已关闭。\n喜欢：9，不喜欢：0，来自文献库：0。模型已据此训练。")
