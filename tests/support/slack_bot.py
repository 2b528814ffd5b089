"""The Slack bot against the fake Slack API: users, channels, signed requests."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette

from core.config import Settings
from core.db import Database
from notifiers.slack.chat import (
    EVENTS_PATH,
    SlackBot,
)
from tests.fakes.slack_api import FakeSlack, fake_slack
from tests.support.chat_commands import NOW

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx (installed) works the same here.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


SECRET = "8f742231b10e8888abcd99yez56789d0"


TOKEN = "xoxb-test-token-0123456789"


APP_TOKEN = "xapp-1-A0APP-0123456789"


# The fake workspace: Ada writes to PaperTrail in a DM; in #lab (created by Bob, PaperTrail a member) Eve
# is an ordinary member and Root a workspace admin; #news was created by Eve and PaperTrail is not in it.
ADA, BOB, EVE, ROOT = "U0ADA", "U0BOB", "U0EVE", "U0ROOT"


DM, LAB, NEWS = "D0ADA", "C0LAB", "C0NEWS"


USERS: dict[str, dict[str, Any]] = {
    ADA: {"id": ADA, "name": "ada", "locale": "en-GB", "profile": {"real_name": "Ada Lovelace"}},
    BOB: {"id": BOB, "name": "bob", "locale": "en-US", "profile": {"real_name": "Bob"}},
    EVE: {"id": EVE, "name": "eve", "locale": "de-DE", "profile": {"real_name": "Eve <b>"}},
    ROOT: {"id": ROOT, "name": "root", "is_admin": True, "profile": {"real_name": "Root"}},
}


CHANNELS: dict[str, dict[str, Any]] = {
    LAB: {"id": LAB, "name": "lab", "is_channel": True, "creator": BOB, "is_member": True},
    NEWS: {"id": NEWS, "name": "news", "is_channel": True, "creator": EVE, "is_member": False},
}


WHERE = {DM: "directmessage", LAB: "lab", NEWS: "news"}


@pytest.fixture(name="slack")
def slack_fixture() -> Iterator[FakeSlack]:
    with fake_slack(token=TOKEN, app_token=APP_TOKEN) as fake:
        fake.users.update(USERS)
        fake.channels.update(CHANNELS)
        yield fake


def make_bot(slack: FakeSlack, db: Database, **options: Any) -> SlackBot:
    settings = Settings(slack_bot_token=TOKEN, slack_signing_secret=SECRET, slack_api_url=slack.base_url)
    options.setdefault("clock", lambda: NOW)
    return SlackBot(settings.slack_bot(), db, **options)


@contextmanager
def serve(bot: SlackBot) -> Iterator[TestClient]:
    """The app's routes in a Starlette app; the portal's event loop lives as long as the block."""
    with TestClient(Starlette(routes=bot.routes())) as client:
        yield client


def signed_headers(body: str | bytes, *, secret: str = SECRET, age: float = 0.0) -> dict[str, str]:
    """Slack's signature headers: HMAC-SHA256 over ``v0:{timestamp}:{body}`` (bytes signed as they are)."""
    stamp = str(int(time.time() - age))
    raw = body.encode() if isinstance(body, str) else body
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256).hexdigest()
    if isinstance(body, str):  # the same as slack_sdk's own signer, which the tests' bodies should agree with
        assert SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body) == f"v0={digest}"
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}


def post(client: TestClient, body: str, content_type: str, **signing: Any) -> httpx.Response:
    headers = {**signed_headers(body, **signing), "Content-Type": content_type}
    response: httpx.Response = client.post(EVENTS_PATH, content=body.encode(), headers=headers)
    return response


# Slack gives every command its own trigger_id and every event its own event_id, so no two requests are
# byte-identical: the app refuses a signed request it has seen (a replay) without running it.
_ONCE = itertools.count(1)


def command_body(
    slack: FakeSlack, text: str, user: str = ADA, channel: str = DM, command: str = "/papertrail"
) -> str:
    """A slash command's form body, as Slack posts it."""
    return urlencode(
        {
            "token": "legacy-verification-token",
            "team_id": "T0001",
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": WHERE.get(channel, "somewhere"),
            "user_id": user,
            "user_name": USERS.get(user, {}).get("name", "someone"),
            "command": command,
            "text": text,
            "api_app_id": "A0APP",
            "response_url": slack.response_url(f"{user}-{channel}"),
            "trigger_id": f"1.2.{next(_ONCE)}",
        }
    )


def slash(
    client: TestClient, slack: FakeSlack, text: str, user: str = ADA, channel: str = DM
) -> dict[str, Any]:
    """Send ``/papertrail text`` and return the JSON answer (after checking it is one)."""
    response = post(client, command_body(slack, text, user, channel), "application/x-www-form-urlencoded")
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert answer["text"].strip() and answer["blocks"]
    return answer


def event_body(event: dict[str, Any]) -> str:
    return json.dumps(
        {
            "token": "legacy-verification-token",
            "team_id": "T0001",
            "api_app_id": "A0APP",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{next(_ONCE):04d}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": "T0001", "user_id": "U0BOT", "is_bot": True}],
        }
    )


def click_body(slack: FakeSlack, action_id: str, value: str, user: str, where: dict[str, Any]) -> str:
    """A block_actions payload (form field ``payload``), as Slack posts a button click."""
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": USERS[user]["name"], "team_id": "T0001"},
        "api_app_id": "A0APP",
        "team": {"id": "T0001", "domain": "fake"},
        "trigger_id": f"1.2.{next(_ONCE)}",
        "actions": [
            {"type": "button", "action_id": action_id, "block_id": "b1", "value": value, "action_ts": "1"}
        ],
        **where,
    }
    return urlencode({"payload": json.dumps(payload)})
