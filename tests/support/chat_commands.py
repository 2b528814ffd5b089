"""The chat commands' stores (a migrated template copied per test), the recorded feed, a fixed clock."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import col

from bot.commands import handle
from bot.commands_base import ChatContext, Reply
from core.config import Settings
from core.db import Database, make_engine
from core.follows import subscriber_records
from core.models import Follow, RunState
from core.papers import run_records
from core.papers.pipeline import ingest_once
from ingest.arxiv_rss import ArxivRssSource
from ingest.http import HttpClient
from tests.conftest import BIG_FEED, migrated_store
from tests.servers import Reply as HttpReply
from tests.servers import feed_server

NOW = datetime(2024, 11, 28, 15, 0, tzinfo=UTC)


PRIVATE = ChatContext("telegram:4242", chat_name="Ada Lovelace")


GROUP_MEMBER = ChatContext("telegram:-100200300", is_group=True, can_change=False, chat_name="Lab")


GROUP_ADMIN = ChatContext("telegram:-100200300", is_group=True, can_change=True, chat_name="Lab")


SLACK = ChatContext("slack:C0123ABC", platform="slack", is_group=True, prefix="/papertrail ")


@pytest.fixture(name="migrated_template", scope="module")
def migrated_template_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with every migration applied, made once per module."""
    path = tmp_path_factory.mktemp("template") / "papertrail.db"
    for _ in migrated_store(f"sqlite:///{path}"):
        pass  # the generator migrates, then disposes the engine (which folds the WAL into the file)
    return path


def open_copy(template: Path, tmp_path: Path) -> Iterator[Database]:
    """A store on a copy of a prepared SQLite file: much faster than migrating (and ingesting) again."""
    path = tmp_path / "papertrail.db"
    shutil.copyfile(template, path)
    engine = make_engine(f"sqlite:///{path}")
    yield Database(engine)
    engine.dispose()


@pytest.fixture(name="db")
def store_fixture(migrated_template: Path, tmp_path: Path) -> Iterator[Database]:
    """A fresh migrated SQLite store."""
    yield from open_copy(migrated_template, tmp_path)


@pytest.fixture(name="subscribed_template", scope="module")
def subscribed_template_fixture(migrated_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded feed ingested after PRIVATE followed cat:cs.DC and ti:"operating system" --instant."""
    for prepared in open_copy(migrated_template, tmp_path_factory.mktemp("subscribed")):
        say(prepared, "/follow cat:cs.DC")
        say(prepared, '/follow ti:"operating system" --instant')
        backdate(prepared, PRIVATE.address)
        asyncio.run(ingest_recorded_feed(prepared))
        # Closing the last connection checkpoints the WAL into the file the tests copy: without it the
        # copies miss whatever the last automatic checkpoint had not moved yet.
        prepared.engine.dispose()
        return Path(str(prepared.engine.url.database))
    raise AssertionError("unreachable")


def say(db: Database, text: str, ctx: ChatContext = PRIVATE, settings: Settings | None = None) -> Reply:
    reply = handle(db, (settings or Settings()).chat(), ctx, text, now=NOW)
    assert reply.text.strip(), f"empty reply to {text!r}"
    return reply


async def ingest_recorded_feed(db: Database) -> None:
    """The recorded mailing of 28 Nov 2024, first seen just before NOW (matched by follows added earlier)."""
    with feed_server(HttpReply(200, BIG_FEED.read_bytes())) as server:
        async with HttpClient("t", timeout=10) as http:
            report = await ingest_once(db, ArxivRssSource(http, server.url), now=NOW - timedelta(minutes=12))
    assert report.error is None


def backdate(db: Database, address: str) -> None:
    """Make the subscriber and its follows two days old, with today's 08:00 UTC digest already sent."""
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    subscriber_records.update_subscriber(
        db, subscriber.id, created_at=NOW - timedelta(days=2), last_digest_at=NOW.replace(hour=8)
    )
    with db.session() as session:
        session.execute(
            sa.update(Follow)
            .where(col(Follow.subscriber_id) == subscriber.id)
            .values(created_at=NOW - timedelta(days=2))
        )


def record_runs(db: Database) -> None:
    """Source checks as the status line reports them: arXiv 12 min ago (serving today's mailing), HF 3 h ago.

    ``ingest_once`` stamps a run's end with the wall clock, so the checks are recorded at pinned times here.
    """
    arxiv = run_records.start_run(db, "arxiv-rss", now=NOW - timedelta(minutes=12))
    run_records.finish_run(
        db,
        arxiv,
        RunState.NOT_MODIFIED,
        now=NOW - timedelta(minutes=12),
        cursor="2024-11-28T00:00:00-05:00",
    )
    hf = run_records.start_run(db, "hf-daily", now=NOW - timedelta(hours=3))
    run_records.finish_run(db, hf, RunState.OK, now=NOW - timedelta(hours=3))
