"""A signed Slack request posted again is refused: the same ``unfollow 1`` removes one follow, not two.

The requests go to the real web app (papertrail.web.app.build_app, which mounts the Slack app's route) with
Starlette's TestClient, signed as Slack signs them; Bolt talks to the fake Slack Web API. A second web app
over its own engine on the same database stands for a second web process. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from core import replay_records
from core.db import Database, make_engine
from core.follows import subscriber_records
from core.follows.manage import follow
from core.models import utcnow
from notifiers.slack.chat import EVENTS_PATH, REPLAY_MEMORY
from tests.fakes.slack_api import FakeSlack
from tests.support.slack_bot import ADA, SECRET, TOKEN, command_body, signed_headers, slack_fixture  # noqa: F401
from tests.support.web import client_for

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def queries(db: Database) -> list[str]:
    subscriber = subscriber_records.get_subscriber(db, f"slack:{ADA}")
    assert subscriber is not None and subscriber.id is not None
    return [f.query for f in subscriber_records.follows_of(db, subscriber.id)]


@pytest.fixture
def second_store(db_url: str, db: Database) -> Iterator[Database]:
    """Another engine on the test's database (``store`` made the schema): a second process's store."""
    other = Database(make_engine(db_url))
    yield other
    other.engine.dispose()


def test_a_replayed_unfollow_is_refused_by_every_process(
    slack: FakeSlack,
    db: Database,
    second_store: Database,
) -> None:
    for query in ("cat:cs.DC", "cat:cs.LG", "cat:cs.AI"):
        follow(db, f"slack:{ADA}", query)
    settings = {"slack_bot_token": TOKEN, "slack_signing_secret": SECRET, "slack_api_url": slack.base_url}
    body = command_body(slack, "unfollow 1")
    headers = {**signed_headers(body), **FORM}
    with client_for(db, **settings) as web, client_for(second_store, **settings) as other_web:
        first = web.post(EVENTS_PATH, content=body.encode(), headers=headers)
        assert first.status_code == 200
        assert "Stopped following" in first.json()["text"]
        assert queries(db) == ["cat:cs.LG", "cat:cs.AI"]
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
    assert queries(db) == ["cat:cs.AI"]


def test_a_badly_signed_request_is_not_remembered(slack: FakeSlack, db: Database) -> None:
    """A forged copy is refused by Bolt (401) without spending the genuine request's signature."""
    follow(db, f"slack:{ADA}", "cat:cs.DC")
    settings = {"slack_bot_token": TOKEN, "slack_signing_secret": SECRET, "slack_api_url": slack.base_url}
    body = command_body(slack, "unfollow 1")
    headers = {**signed_headers(body), **FORM}
    with client_for(db, **settings) as web:
        forged = web.post(EVENTS_PATH, content=body.encode() + b"&x=1", headers=headers)
        genuine = web.post(EVENTS_PATH, content=body.encode(), headers=headers)
    assert forged.status_code == 401
    assert genuine.status_code == 200 and "Stopped following" in genuine.json()["text"]


def test_remembered_signatures_are_forgotten_after_the_window(db: Database) -> None:
    now = utcnow()
    assert replay_records.first_use(
        db, "v0=old", now - REPLAY_MEMORY - timedelta(seconds=1), now=now, keep=REPLAY_MEMORY
    )
    assert replay_records.first_use(db, "v0=new", now, now=now, keep=REPLAY_MEMORY)
    assert not replay_records.first_use(db, "v0=new", now, now=now, keep=REPLAY_MEMORY)
    later = now + timedelta(seconds=1)
    # Purged as the next request came: the table holds what the window needs, not every request ever.
    assert replay_records.first_use(
        db, "v0=old", now - REPLAY_MEMORY - timedelta(seconds=1), now=later, keep=REPLAY_MEMORY
    )
