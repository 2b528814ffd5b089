"""Votes from a Slack digest: the real notifier (slack_sdk) posts a digest of recorded papers to the fake
Web API, and the real Slack app (Bolt, behind its Starlette route, every request signed) answers clicks on
its 👍 / 👎 buttons and on the Undo button of its answer.

The digest comes out of the real pipeline: a person (in a DM) or a channel follows a query, the recorded
arXiv day of 28 Nov 2024 is ingested, and ``send_due_digests`` delivers through :class:`SlackNotifier`. A
click carries the action id and value of the very button the digest posted.
"""

from __future__ import annotations

import asyncio
from typing import Any

from core.config import Settings
from core.db import Database
from core.delivery.digests import send_due_digests
from core.delivery.render import Renderer
from core.follows import subscriber_records
from core.models import DISLIKE, LIKE
from core.taste.votes import votes
from notifiers.slack.notifier import SlackNotifier
from tests.fakes.slack_api import FakeSlack
from tests.support.chat_commands import NOW, backdate, ingest_recorded_feed
from tests.support.slack_bot import (
    ADA,
    BOB,
    DM,
    EVE,
    LAB,
    TOKEN,
    click_body,
    make_bot,
    post,
    serve,
    slack_fixture,
    slash,
)

__all__ = ["slack_fixture"]  # fixtures, asked for by name

PAPER = "2411.17710v1"  # the recorded day's one paper with "operating system" in its title
FORM = "application/x-www-form-urlencoded"


def deliver(slack: FakeSlack, db: Database, address: str) -> list[dict[str, Any]]:
    """Ingest the recorded day and deliver ``address``'s digest through the bot; the posted blocks."""
    backdate(db, address)
    asyncio.run(ingest_recorded_feed(db))
    settings = Settings(slack_bot_token=TOKEN, slack_api_url=slack.base_url, slack_channel_interval=0)

    async def send() -> None:
        notifier = SlackNotifier(settings.slack())
        try:
            reports = await send_due_digests(
                db, {"slack": notifier}, Renderer(), now=NOW, force=True, address=address
            )
        finally:
            await notifier.aclose()
        assert [(r.items, r.sent) for r in reports] == [(1, True)]

    asyncio.run(send())
    blocks: list[dict[str, Any]] = slack.messages()[-1].params["blocks"]
    return blocks


def vote_buttons(blocks: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(label, action id, value) of the digest's vote buttons."""
    return [
        (e["text"]["text"], e["action_id"], e["value"])
        for b in blocks
        if b["type"] == "actions"
        for e in b["elements"]
    ]


def where(channel: str, name: str, response: str) -> dict[str, Any]:
    """A click's place: a message in ``channel``, answered through the response_url named ``response``."""
    return {
        "container": {"type": "message", "message_ts": "1700000000.000001", "channel_id": channel},
        "channel": {"id": channel, "name": name},
        "response_url": response,
    }


def vote_of(db: Database, address: str) -> list[tuple[str, int, int]]:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    return [(v.arxiv_id, v.version, v.value) for v in votes(db, subscriber.id)]


def test_a_digest_vote_is_recorded_answered_privately_and_undone(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    db = sqlite_store
    with serve(make_bot(slack, db)) as client:
        slash(client, slack, 'follow ti:"operating system"', ADA, DM)
        blocks = deliver(slack, db, f"slack:{ADA}")
        # Under the paper: 👍 and 👎, each carrying the version it votes on.
        assert vote_buttons(blocks) == [("👍", "papertrail_like", PAPER), ("👎", "papertrail_dislike", PAPER)]

        place = where(DM, "directmessage", slack.response_url("vote"))
        assert post(client, click_body(slack, "papertrail_like", PAPER, ADA, place), FORM).status_code == 200
        (answer,) = slack.wait_for("response")
        assert vote_of(db, f"slack:{ADA}") == [("2411.17710", 1, LIKE)]
        # Ephemeral, beside the digest (not replacing it), with the Undo button.
        assert (answer.params["response_type"], answer.params["replace_original"]) == ("ephemeral", False)
        assert answer.params["text"].startswith(
            f"👍 Liked {PAPER}: Agent Centric Operating System -- a Comprehensive Review and Outlook…\n"
        )
        (undo,) = answer.params["blocks"][-1]["elements"]
        assert (undo["text"]["text"], undo["action_id"], undo["value"]) == (
            f"/papertrail unvote {PAPER}",
            "papertrail_run_0",
            f"unvote {PAPER}",
        )

        pressed = click_body(slack, undo["action_id"], undo["value"], ADA, place)
        assert post(client, pressed, FORM).status_code == 200
        undone = slack.wait_for("response", count=2)[-1]
        assert undone.params["text"].startswith(f"Vote on {PAPER} taken back.")
        assert vote_of(db, f"slack:{ADA}") == []

        # 👎 works the same way; a click on the digest again replaces the vote.
        post(client, click_body(slack, "papertrail_dislike", PAPER, ADA, place), FORM)
        slack.wait_for("response", count=3)  # the answer goes out once the vote is recorded
        assert vote_of(db, f"slack:{ADA}") == [("2411.17710", 1, DISLIKE)]
        post(client, click_body(slack, "papertrail_like", PAPER, ADA, place), FORM)
        changed = slack.wait_for("response", count=4)[-1]
        assert changed.params["text"].startswith(f"👍 Liked {PAPER} (it was 👎 before): ")
        assert vote_of(db, f"slack:{ADA}") == [("2411.17710", 1, LIKE)]


def test_in_a_channel_only_its_admins_vote_and_everyone_is_answered_privately(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    db = sqlite_store
    with serve(make_bot(slack, db)) as client:
        slash(client, slack, 'follow ti:"operating system"', BOB, LAB)  # Bob created #lab: an admin
        deliver(slack, db, f"slack:{LAB}")
        place = where(LAB, "lab", slack.response_url("lab"))

        post(client, click_body(slack, "papertrail_like", PAPER, EVE, place), FORM)
        (refused,) = slack.wait_for("response")
        assert refused.params["response_type"] == "ephemeral"
        assert refused.params["text"].startswith("Only admins of this channel can vote for it")
        assert vote_of(db, f"slack:{LAB}") == []

        post(client, click_body(slack, "papertrail_dislike", PAPER, BOB, place), FORM)
        voted = slack.wait_for("response", count=2)[-1]
        # A vote is the voter's business: ephemeral even in a channel (a change of follows is in_channel).
        assert voted.params["response_type"] == "ephemeral"
        assert voted.params["text"].startswith(f"👎 Disliked {PAPER}: ")
        assert vote_of(db, f"slack:{LAB}") == [("2411.17710", 1, DISLIKE)]
        assert (
            subscriber_records.get_subscriber(db, f"slack:{EVE}") is None
        )  # the member's click made nothing of hers
