"""A signed Slack request posted again is refused: the same ``unfollow 1`` removes one follow, not two.

The requests go to the real web app (papertrail.web.app.build_app, which mounts the Slack app's route) with
Starlette's TestClient, signed as Slack signs them; Bolt talks to the fake Slack Web API. A second web app
over its own engine on the same database stands for a second web process. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from bot.slack import EVENTS_PATH, REPLAY_MEMORY
from core.follows.manage import follow
from core.models import utcnow
from core.store.facade import Store, make_engine
from tests.fakes.slack_api import FakeSlack
from tests.support.slack_bot import ADA, SECRET, TOKEN, command_body, signed_headers, slack_fixture  # noqa: F401
from tests.support.web import client_for

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def queries(store: Store) -> list[str]:
    subscriber = store.subscribers.get_subscriber(f"slack:{ADA}")
    assert subscriber is not None and subscriber.id is not None
    return [f.query for f in store.subscribers.follows_of(subscriber.id)]


@pytest.fixture
def second_store(db_url: str, store: Store) -> Iterator[Store]:
    """Another engine on the test's database (``store`` made the schema): a second process's store."""
    other = Store(make_engine(db_url))
    yield other
    other.engine.dispose()


def test_a_replayed_unfollow_is_refused_by_every_process(
    slack: FakeSlack,
    store: Store,
    second_store: Store,
) -> None:
    for query in ("cat:cs.DC", "cat:cs.LG", "cat:cs.AI"):
        follow(store, f"slack:{ADA}", query)
    settings = {"slack_bot_token": TOKEN, "slack_signing_secret": SECRET, "slack_api_url": slack.base_url}
    body = command_body(slack, "unfollow 1")
    headers = {**signed_headers(body), **FORM}
    with client_for(store, **settings) as web, client_for(second_store, **settings) as other_web:
        first = web.post(EVENTS_PATH, content=body.encode(), headers=headers)
        assert first.status_code == 200
        assert "Stopped following" in first.json()["text"]
        assert queries(store) == ["cat:cs.LG", "cat:cs.AI"]
        again = web.post(EVENTS_PATH, content=body.encode(), headers=headers)
        elsewhere = other_web.post(EVENTS_PATH, content=body.encode(), headers=headers)
        # The same command typed again is a new request (Slack gives it its own trigger_id): it runs.
        typed_again = command_body(slack, "unfollow 1")
        fresh = web.post(
            EVENTS_PATH, content=typed_again.encode(), headers={**signed_headers(typed_again), **FORM}
        )
    assert (again.status_code, again.content) == (200, b"")
    assert (elsewhere.status_code, elsewhere.content) == (200, b"")
    assert fresh.status_code == 200 and "Stopped following" in fresh.json()["text"]
    assert queries(store) == ["cat:cs.AI"]


def test_a_badly_signed_request_is_not_remembered(slack: FakeSlack, store: Store) -> None:
    """A forged copy is refused by Bolt (401) without spending the genuine request's signature."""
    follow(store, f"slack:{ADA}", "cat:cs.DC")
    settings = {"slack_bot_token": TOKEN, "slack_signing_secret": SECRET, "slack_api_url": slack.base_url}
    body = command_body(slack, "unfollow 1")
    headers = {**signed_headers(body), **FORM}
    with client_for(store, **settings) as web:
        forged = web.post(EVENTS_PATH, content=body.encode() + b"&x=1", headers=headers)
        genuine = web.post(EVENTS_PATH, content=body.encode(), headers=headers)
    assert forged.status_code == 401
    assert genuine.status_code == 200 and "Stopped following" in genuine.json()["text"]


def test_remembered_signatures_are_forgotten_after_the_window(store: Store) -> None:
    now = utcnow()
    assert store.replays.first_use(
        "v0=old", now - REPLAY_MEMORY - timedelta(seconds=1), now=now, keep=REPLAY_MEMORY
    )
    assert store.replays.first_use("v0=new", now, now=now, keep=REPLAY_MEMORY)
    assert not store.replays.first_use("v0=new", now, now=now, keep=REPLAY_MEMORY)
    later = now + timedelta(seconds=1)
    # Purged as the next request came: the table holds what the window needs, not every request ever.
    assert store.replays.first_use(
        "v0=old", now - REPLAY_MEMORY - timedelta(seconds=1), now=later, keep=REPLAY_MEMORY
    )
