"""The Slack app's own posts go through the digests' rate limiter and their 429 handling: a burst of late
replies to one channel is posted at the channel's pace, every reply delivered, against a fake Slack that
enforces the per-channel limit; a 429's Retry-After is waited out and the post sent again, for a reply to a
response_url and for an App Home publish alike."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.config import Settings
from core.db import Database
from notifiers.slack.notifier import SlackNotifier
from papertrail.service.context import build_context
from tests.fakes.slack_api import INTERVAL_TOLERANCE, NORMAL, FakeSlack, fake_slack, rate_limited
from tests.support.slack_bot import (
    ADA,
    BOB,
    CHANNELS,
    DM,
    LAB,
    SECRET,
    TOKEN,
    USERS,
    command_body,
    event_body,
    make_bot,
    post,
    serve,
    slack_fixture,
)

__all__ = ["slack_fixture"]  # a fixture, asked for by name

pytestmark = pytest.mark.net

BURST = 4
INTERVAL = 0.5
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(name="paced_slack")
def paced_slack_fixture() -> Iterator[FakeSlack]:
    with fake_slack(token=TOKEN, enforce_interval=INTERVAL) as fake:
        fake.users.update(USERS)
        fake.channels.update(CHANNELS)
        yield fake


def test_a_burst_of_replies_to_one_channel_is_paced_and_none_is_lost(
    paced_slack: FakeSlack, sqlite_store: Database
) -> None:
    settings = Settings(
        slack_bot_token=TOKEN, slack_api_url=paced_slack.base_url, slack_channel_interval=INTERVAL
    )
    notifier = SlackNotifier(settings.slack())
    # ack_budget 0: every reply is late, so the app posts it to the response_url itself.
    bot = make_bot(paced_slack, sqlite_store, ack_budget=0.0, limiter=notifier.limiter)
    with serve(bot) as client:
        for _ in range(BURST):
            assert post(client, command_body(paced_slack, "help", BOB, LAB), FORM).status_code == 200
        replies = paced_slack.wait_for("response", count=BURST)
    assert paced_slack.rate_limited == 0  # paced before posting, never refused
    assert len(replies) == BURST and all(reply.params["text"] for reply in replies)
    gaps = [later.time - earlier.time for earlier, later in itertools.pairwise(replies)]
    assert min(gaps) >= INTERVAL - INTERVAL_TOLERANCE


def test_a_429_on_a_reply_is_waited_out_and_the_reply_posted_again(
    slack: FakeSlack, sqlite_store: Database
) -> None:
    with serve(make_bot(slack, sqlite_store, ack_budget=0.0)) as client:
        assert post(client, command_body(slack, "help", ADA, DM), FORM).status_code == 200
        slack.wait_for("response")
        # The next command asks users.info, then posts its reply: Slack refuses that for a second.
        slack.script(NORMAL, rate_limited(1))
        assert post(client, command_body(slack, "status", ADA, DM), FORM).status_code == 200
        _, refused, posted = slack.wait_for("response", count=3)
    assert refused.params == posted.params  # the same reply, posted again
    assert posted.time - refused.time >= 1 - INTERVAL_TOLERANCE


def test_a_429_on_an_app_home_publish_is_waited_out(slack: FakeSlack, sqlite_store: Database) -> None:
    opened = {"type": "app_home_opened", "user": ADA, "tab": "home", "channel": DM}
    with serve(make_bot(slack, sqlite_store)) as client:
        assert post(client, event_body(opened), "application/json").status_code == 200
        slack.wait_for("views.publish")
        # The next opening asks users.info (Ada chose no language), then publishes: Slack refuses that once.
        slack.script(NORMAL, rate_limited(1))
        assert post(client, event_body(opened), "application/json").status_code == 200
        _, refused, published = slack.wait_for("views.publish", count=3)
    assert refused.params == published.params
    assert published.time - refused.time >= 1 - INTERVAL_TOLERANCE


async def test_the_shell_gives_the_app_the_digest_notifiers_limiter(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/shell.db", slack_bot_token=TOKEN, slack_signing_secret=SECRET
    )
    ctx = build_context(settings, console=io.StringIO())
    try:
        notifier = ctx.notifiers["slack"]
        assert isinstance(notifier, SlackNotifier)
        assert ctx.slack_bot().limiter is notifier.limiter
        assert ctx.slack_bot() is ctx.slack_bot()  # one app per process: the web and bots roles share it
    finally:
        await ctx.aclose()
