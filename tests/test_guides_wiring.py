"""AI guides in the running service: ingest -> match -> one guide per reader language -> shown in the digest.

Real parts throughout: the recorded arXiv feed served on loopback, the fake OpenAI-compatible endpoint,
SQLite, the scheduler's job object and the console notifier.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from core.config import Settings
from core.delivery.digests import send_due_digests
from core.follows import subscriber_records
from core.follows.manage import follow
from core.guides import guide_records
from core.models import Match, utcnow
from ingest.llm import ChatClient
from papertrail.cli.app import app
from papertrail.service.context import AppContext, build_context
from papertrail.service.runtime import Jobs
from tests.conftest import BIG_FEED
from tests.fakes.openai_api import DEFAULT_GUIDE, DEFAULT_GUIDE_ZH, FakeOpenAI, fake_openai, server_error
from tests.servers import Reply, closed_port, feed_server

QUERY = "cat:cs.OS"  # three papers of the recorded day: a few guides, not hundreds


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with fake_openai() as server:
        yield server


def _context(tmp_path: Path, feed_url: str, llm_url: str | None, out: io.StringIO) -> AppContext:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/guides.db",
        arxiv_rss_url=feed_url,
        hf_api_url=f"http://127.0.0.1:{closed_port()}/api/",
        arxiv_api_url=f"http://127.0.0.1:{closed_port()}/api/query",
        http_backoff=0.01,
        llm_url=llm_url,
        llm_model="fake-model",
    )
    ctx = build_context(settings, console=out)
    for address, language in (("console:ada", "en"), ("console:li", "zh"), ("console:bo", "zh")):
        follow(ctx.db, address, QUERY)
        subscriber = subscriber_records.get_subscriber(ctx.db, address)
        assert subscriber is not None and subscriber.id is not None
        subscriber_records.update_subscriber(ctx.db, subscriber.id, language=language)
    return ctx


def _matched_versions(ctx: AppContext) -> list[int]:
    with ctx.db.session() as session:
        return sorted(set(session.exec(select(Match.version_id))))


async def test_each_matched_version_gets_one_guide_per_reader_language_shown_in_their_digest(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    out = io.StringIO()
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        ctx = _context(tmp_path, feed.url, fake.url, out)
        try:
            await Jobs(ctx).ingest("arxiv-rss")
            matched = _matched_versions(ctx)
            assert 1 <= len(matched) <= 3
            # One request per version and language: two Chinese readers share one Chinese guide.
            assert len(fake.requests) == 2 * len(matched)
            assert sorted(guide_records.guides_for(ctx.db, matched, "en")) == matched
            assert sorted(guide_records.guides_for(ctx.db, matched, "zh")) == matched
            assert guide_records.count_guided_versions_since(ctx.db, utcnow() - timedelta(hours=24)) == len(
                matched
            )

            await Jobs(ctx).guides()  # cached: a second run asks nothing
            assert len(fake.requests) == 2 * len(matched)

            await send_due_digests(ctx.db, ctx.notifiers, ctx.renderer, force=True)
        finally:
            await ctx.aclose()
    digests = out.getvalue().split("--- digest for ")
    english = next(d for d in digests if d.startswith("console:ada"))
    chinese = next(d for d in digests if d.startswith("console:li"))
    assert DEFAULT_GUIDE["tldr"] in english and DEFAULT_GUIDE_ZH["tldr"] not in english
    assert DEFAULT_GUIDE_ZH["tldr"] in chinese and DEFAULT_GUIDE["tldr"] not in chinese


async def test_without_an_endpoint_nothing_is_asked_and_digests_have_no_guides(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    out = io.StringIO()
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        ctx = _context(tmp_path, feed.url, None, out)
        try:
            assert ctx.guide_model is None
            await Jobs(ctx).ingest("arxiv-rss")
            await send_due_digests(ctx.db, ctx.notifiers, ctx.renderer, force=True)
        finally:
            await ctx.aclose()
    assert fake.requests == []
    assert "console:ada" in out.getvalue() and DEFAULT_GUIDE["tldr"] not in out.getvalue()


async def test_a_failing_endpoint_does_not_hold_up_the_digest(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script(*[server_error()] * 100)
    out = io.StringIO()
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        ctx = _context(tmp_path, feed.url, fake.url, out)
        assert ctx.guide_model is not None
        await ctx.guide_model.aclose()
        ctx.guide_model = ChatClient(ctx.settings.llm(), backoff=0.01)  # the production back-off is seconds
        try:
            await Jobs(ctx).ingest("arxiv-rss")
            reports = await send_due_digests(ctx.db, ctx.notifiers, ctx.renderer, force=True)
        finally:
            await ctx.aclose()
    assert fake.requests  # it tried
    assert guide_records.guides_for(ctx.db, _matched_versions(ctx), "en") == {}
    assert {r.address for r in reports if r.sent} == {"console:ada", "console:li", "console:bo"}


def test_the_guides_command_makes_them_once_and_explains_when_off(
    tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    off = runner.invoke(app, ["guides"])
    assert off.exit_code == 2 and "PAPERTRAIL_LLM_URL" in off.stderr  # configuration: README, exit codes
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as feed:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", feed.url)
        assert runner.invoke(app, ["follow", "console:me", QUERY]).exit_code == 0
        assert runner.invoke(app, ["ingest"]).exit_code == 0
    monkeypatch.setenv("PAPERTRAIL_LLM_URL", fake.url)
    bad = runner.invoke(app, ["guides", "--language", "fr"])
    assert bad.exit_code == 2 and "en, zh" in bad.stderr
    monkeypatch.setenv("PAPERTRAIL_LLM_MODEL", "fake-model")

    first = runner.invoke(app, ["guides"])
    again = runner.invoke(app, ["guides"])
    status = runner.invoke(app, ["status", "--json"])

    made = len(fake.requests)
    assert first.exit_code == 0 and f"en: {made} guides made, 0 failed" in first.stdout
    assert again.exit_code == 0 and "en: 0 guides made" in again.stdout and len(fake.requests) == made
    assert json.loads(status.stdout)["last_24h"]["ai_guides"] == made
