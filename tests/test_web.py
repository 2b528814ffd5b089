"""The web app through Starlette's test client, against real SQLite and PostgreSQL stores.

The read-only pages run over a store seeded from the recorded corpus (tests/web_seed.py) once per module
and database; every number they show is compared with the database, counted with plain SQL. The
unsubscribe and manage flows, which write, get a small store of their own per test.
"""

from __future__ import annotations

import asyncio
import functools
import html
import re
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import markupsafe
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from core.config import Settings
from core.db import Database, make_engine
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.guides import guide_records
from core.ledger import ledger_records
from core.models import Digest, DigestState, Follow, RunState, SubscriberStatus, UTCDateTime, utcnow
from core.overview import dashboard_records
from core.overview.status import source_statuses
from core.papers import paper_records, run_records
from core.people import tokens
from core.values import PaperIn
from ingest.arxiv_rss_parse import parse_feed
from papertrail.service.source_names import SOURCE_NAMES
from papertrail.web.app import build_app
from tests.conftest import BIG_FEED, POSTGRES_URL, migrated_store, postgres_available
from tests.servers import closed_port
from tests.support.web import KEY, client_for, web_context
from tests.web_seed import (
    DASHBOARD_COUNTS,
    HOSTILE_AUTHOR,
    HOSTILE_ERROR,
    HOSTILE_GUIDES,
    HOSTILE_ID,
    HOSTILE_PICK_ID,
    HOSTILE_PICK_TITLE,
    HOSTILE_REVISED_TITLE,
    HOSTILE_TITLE,
    expected_numbers,
    papers_with_category,
    seed_store,
)

with warnings.catch_warnings():
    # Starlette 1.x suggests httpx2 for its test client; httpx (installed) works the same for these tests.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def esc(text: str, quote: bool = True) -> str:
    """``text`` as Jinja's autoescape prints it (quotes too, unless ``quote`` is False)."""
    escaped = str(markupsafe.escape(text))
    return escaped if quote else escaped.replace("&#34;", '"').replace("&#39;", "'")


# -- the seeded store, once per module and database -------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """A store seeded from the recorded corpus (see tests/web_seed.py) on each database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('web')}/web.db"
        for db in migrated_store(url):
            asyncio.run(seed_store(db))
            yield db
        return
    if not postgres_available():
        pytest.skip(f"PostgreSQL unreachable at {POSTGRES_URL}")
    schema = f"pt_web_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        for db in migrated_store(f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"):
            asyncio.run(seed_store(db))
            yield db
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def client(seeded: Database) -> TestClient:
    """A test client over the seeded store."""
    return client_for(seeded)


def shown_counts(page: str) -> dict[str, int]:
    """Every ``data-count`` number on a page."""
    return {
        name: int(value.replace(",", ""))
        for name, value in re.findall(r'data-count="(\w+)"[^>]*>([\d,]+)<', page)
    }


def links_of(page: str) -> dict[str, str]:
    """The target of each linked number on the status page."""
    return {
        name: html.unescape(href) for href, name in re.findall(r'<a href="([^"]+)" data-count="(\w+)"', page)
    }


def listed_ids(page: str) -> list[str]:
    """The paper ids of a browser page, in order."""
    return re.findall(r'<li data-paper="([^"]+)">', page)


# -- the status page -------------------------------------------------------------------------------------


def test_status_page_numbers_equal_the_database(client: TestClient, seeded: Database) -> None:
    response = client.get("/")
    assert response.status_code == 200
    page = response.text
    expected = expected_numbers(seeded, utcnow())
    shown = shown_counts(page)
    for name in DASHBOARD_COUNTS:
        assert shown[name] == getattr(expected, name), name
    # The corpus makes every one of them non-zero, so an always-zero page cannot pass.
    assert min(shown.values()) > 0
    # Each 24-hour and library number links to the list it counts: the list is exactly that long.
    for name, href in links_of(page).items():
        listed = client.get(href)
        assert listed.status_code == 200, href
        assert shown_counts(listed.text)["total"] == shown[name], (name, href)
    # The chart's numbers, day by day.
    for day, (new, revised, ai) in expected.per_day.items():
        row = re.search(rf'<tr data-day="{day.isoformat()}">(.*?)</tr>', page)
        assert row is not None, day
        assert [int(v.replace(",", "")) for v in re.findall(r'class="num">([\d,]+)<', row[1])] == [
            new,
            revised,
            ai,
        ]
    assert '<meta http-equiv="refresh" content="60">' in page
    assert 'role="img"' in page and "<title id=" in page and "<desc id=" in page


def test_the_chart_counts_the_days_of_the_display_zone(seeded: Database) -> None:
    """In Asia/Shanghai the chart's days end at 16:00 UTC: each day's numbers are Shanghai's day's."""
    page = client_for(seeded, display_timezone="Asia/Shanghai").get("/?lang=zh").text
    expected = expected_numbers(seeded, utcnow(), ZoneInfo("Asia/Shanghai"))
    for day, numbers in expected.per_day.items():
        row = re.search(rf'<tr data-day="{day.isoformat()}">(.*?)</tr>', page)
        assert row is not None, day
        assert tuple(int(v.replace(",", "")) for v in re.findall(r'class="num">([\d,]+)<', row[1])) == numbers
    assert "<th>日期（北京时间）</th>" in page


def test_status_page_states_and_escaping(client: TestClient, seeded: Database) -> None:
    page = client.get("/").text
    now = utcnow()
    settings = Settings()
    judged = source_statuses(
        dashboard_records.status(seeded, now, sources=SOURCE_NAMES),
        now=now,
        holidays=settings.holiday_dates,
        grace=timedelta(hours=settings.arxiv_stale_grace_hours),
    )
    shown = dict(re.findall(r'<tr data-source="([^"]+)" data-state="(\w+)">', page))
    assert shown == {item.facts.source: item.verdict.state.value for item in judged}
    assert shown["arxiv-oai"] == "failing" and shown["arxiv-api"] == "unknown"
    # Broken beats everything else in the headline.
    assert 'data-state="failing"' in page and "Broken: arxiv-oai failing" in page
    for name in SOURCE_NAMES:
        assert f'href="/sources/{name}"' in page
    # The source's error is HTML: shown as text. No script at all on the page.
    assert esc(HOSTILE_ERROR, quote=False) in page
    assert "<script" not in page and "<b>oaipmh" not in page


def test_quiet_ok_and_failing_read_differently(sqlite_store: Database) -> None:
    """A silent weekend is "quiet", a current feed "ok", a failed check "broken": told apart at a glance."""
    context = web_context(sqlite_store)

    def served(mailing: str, at: datetime, state: RunState = RunState.OK, error: str | None = None) -> None:
        run = run_records.start_run(sqlite_store, "arxiv-rss", now=at)
        run_records.finish_run(
            sqlite_store, run, state, now=at, cursor=f"{mailing}T00:00:00-05:00", error=error
        )

    def banner(at: datetime) -> tuple[str, str]:
        page = TestClient(build_app(context, clock=lambda: at)).get("/").text
        found = re.search(r'<div class="banner state-(\w+)".*?<strong>(.*?)</strong>', page, flags=re.S)
        assert found is not None
        return found[1], found[2]

    thursday = datetime(2024, 11, 28, 15, 0, tzinfo=UTC)  # Wednesday evening's mailing is current
    served("2024-11-28", thursday - timedelta(hours=1))
    assert banner(thursday) == ("ok", "All sources healthy: nothing new")
    saturday = datetime(2024, 11, 30, 15, 0, tzinfo=UTC)  # no announcement on Friday or Saturday evenings
    served("2024-11-29", saturday - timedelta(hours=1))
    assert banner(saturday) == ("quiet", "Quiet: nothing new expected now")
    tuesday = datetime(2024, 12, 3, 15, 0, tzinfo=UTC)  # Monday evening's mailing should be there by now
    assert banner(tuesday) == ("stale", "Behind: arxiv-rss stale")
    served("2024-11-29", saturday, RunState.ERROR, "cannot connect to rss.arxiv.org")
    assert banner(saturday) == ("failing", "Broken: arxiv-rss failing")


# -- the paper browser -----------------------------------------------------------------------------------


# A paper arrived as news: a version stored as news, or a community pick (core.papers.sort_keys).
_IS_NEWS = (
    "(EXISTS (SELECT 1 FROM version n WHERE n.paper_id = p.id AND n.news = true) "
    "OR EXISTS (SELECT 1 FROM community_pick c WHERE c.paper_id = p.id))"
)


def _ids_by_sql(db: Database, order: str) -> list[str]:
    """Papers with a stored version, in ``order`` computed from the rows (not from the stored keys)."""
    with db.engine.connect() as c:
        return list(
            c.execute(
                sa.text(
                    "SELECT p.id FROM paper p "
                    "JOIN version l ON l.paper_id = p.id AND l.number = p.latest_version "
                    "LEFT JOIN version f ON f.paper_id = p.id AND f.number = 1 "
                    f"ORDER BY {order}, p.id DESC"
                )
            ).scalars()
        )


def test_browser_sorts_follow_their_definitions(client: TestClient, seeded: Database) -> None:
    orders = {
        # News before history, then the newest version's arrival (version ids grow with arrival).
        "updated": f"{_IS_NEWS} DESC, l.id DESC",
        "ingested": f"{_IS_NEWS} DESC, p.first_seen_at DESC",
        "published": "(f.announced_at IS NULL), f.announced_at DESC",
    }
    with seeded.engine.connect() as c:
        stubs = set(c.execute(sa.text("SELECT id FROM paper WHERE latest_version = 0")).scalars())
    pages = {}
    for sort, order in orders.items():
        pages[sort] = listed_ids(client.get(f"/papers?sort={sort}").text)
        # Stubs (no version yet) are placed by when they were seen; the rest follow from the rows.
        shown = [pid for pid in pages[sort] if pid not in stubs]
        assert shown == _ids_by_sql(seeded, order)[: len(shown)], sort
    assert len({tuple(ids) for ids in pages.values()}) == 3, "each sort orders differently"
    # The hostile paper's revision was stored last: first by version update, not by ingestion time.
    updated = [pid for pid in pages["updated"] if pid not in stubs]
    assert updated[0] == HOSTILE_ID and pages["ingested"][0] != HOSTILE_ID


def test_browser_filters_search_and_pages(client: TestClient, seeded: Database) -> None:
    def total(query: str) -> int:
        response = client.get(f"/papers?{query}")
        assert response.status_code == 200, query
        return shown_counts(response.text)["total"]

    everything = total("")
    dc = papers_with_category(seeded, "cs.DC")
    assert total("cat=cs.DC") == len(dc) > 0
    assert set(listed_ids(client.get("/papers?cat=cs.DC").text)) <= dc
    assert len(dc) < total("cat=cs") < everything  # the archive holds cs.DC and more, not the physics
    assert total("kind=new") + total("kind=community") > total("kind=revised") > 0
    assert total("since=24h&kind=new&ai=1") < total("since=24h&kind=new") < total("kind=new")
    # Search reads the follow language (what a follow of the text would match on each paper's newest
    # version): bare words in the title or abstract in any case, au: with accents folded either way.
    assert listed_ids(client.get("/papers?q=TEXTURED+gaussians").text) == ["2411.18625"]
    assert listed_ids(client.get("/papers?q=au%3APino-Alarcon").text) == ["2411.18621"]
    assert listed_ids(client.get("/papers?q=au%3APino-Alarc%C3%B3n").text) == ["2411.18621"]
    assert "2411.18621" not in listed_ids(client.get("/papers?q=Pino-Alarc%C3%B3n").text)
    assert total("q=zz%25_%25qq") == 0
    # Pages of 50, walked by cursor: "older" continues after the last row, "newer" comes back.
    first = client.get("/papers").text
    ids = listed_ids(first)
    assert len(ids) == 50 and 'rel="prev"' not in first
    assert f'href="/papers?after={ids[-1]}" rel="next"' in first
    second = client.get(f"/papers?after={ids[-1]}").text
    ids2 = listed_ids(second)
    assert ids2 and not set(ids) & set(ids2) and f'href="/papers?before={ids2[0]}" rel="prev"' in second
    assert listed_ids(client.get(f"/papers?before={ids2[0]}").text) == ids
    assert shown_counts(second)["total"] == everything
    # The seed stored an OAI page as history: the first page says so and links to where it starts.
    assert 'data-history="after-news"' in first and 'href="/papers?from=history"' in first
    history = listed_ids(client.get("/papers?from=history").text)
    assert history and not set(history) & set(ids)
    # Relevance pages are numbered.
    ranked = client.get("/papers?q=learning&sort=relevance").text
    assert listed_ids(ranked) and 'href="/papers?sort=relevance&amp;q=learning&amp;page=2"' in ranked


BAD_PARAMETERS = {
    "sort=random": "unknown sort",
    "kind=old": "unknown kind",
    "since=1y": "unknown window",
    "cat=%3Cscript%3E": "is not a category",
    "page=0": "not a page number",
    "page=x": "not a page number",
    "ai=maybe": "ai=1",
    "q=" + "a" * 201: "the limit is 200",
    "page=2": "relevance order only",
    "sort=relevance": "needs a search text",
    "after=2411.99999": "no paper 2411.99999",
    "after=2411.18625&before=2411.18625": "not both",
    "from=future": "from=history",
    "q=NOT+graph": "cannot search",
    "q=graph&sort=relevance&page=21": "best 1,000 matches",
}


def test_browser_refuses_bad_parameters(sqlite_store: Database) -> None:
    app_client = client_for(sqlite_store)
    for query, message in BAD_PARAMETERS.items():
        response = app_client.get(f"/papers?{query}")
        assert response.status_code == 400, query
        assert message in html.unescape(response.text), query
        assert "<script>" not in response.text


def test_hostile_text_is_escaped_everywhere(client: TestClient) -> None:
    listing = client.get(f"/papers?q={HOSTILE_ID}").text + client.get("/papers?q=%3Cscript%3E").text
    assert esc(HOSTILE_REVISED_TITLE) in listing
    assert esc(HOSTILE_AUTHOR) in listing
    assert 'value="&lt;script&gt;"' in listing
    paper = client.get(f"/papers/{HOSTILE_ID}").text
    assert esc(HOSTILE_REVISED_TITLE) in paper
    assert esc("</p><img src=x onerror=alert(1)> plain & simple") in paper
    stub = client.get(f"/papers/{HOSTILE_PICK_ID}").text
    assert esc(HOSTILE_PICK_TITLE) in stub
    assert "javascript:" not in stub and 'href="https://example.org/project"' in stub
    source = client.get("/sources/arxiv-oai").text
    assert esc(HOSTILE_ERROR, quote=False) in source
    # AI guides are untrusted text too, in every language (stored here as they are, without cleaning).
    chinese = client.get(f"/papers/{HOSTILE_ID}?lang=zh").text
    chinese_list = client.get("/papers?lang=zh").text
    client.cookies.clear()
    for page, guide in ((paper, HOSTILE_GUIDES["en"]), (chinese, HOSTILE_GUIDES["zh"])):
        assert esc(guide.tldr) in page and esc(guide.contributions[0]) in page
        assert guide.changes is not None and esc(guide.changes) in page
    assert esc(HOSTILE_GUIDES["zh"].tldr) in chinese_list
    for page in (listing, paper, stub, source, chinese, chinese_list):
        assert "<script" not in page and "<img" not in page and "<iframe" not in page
    assert HOSTILE_TITLE not in paper


def test_paper_page_shows_versions_changes_and_picks(client: TestClient, seeded: Database) -> None:
    page = client.get(f"/papers/arXiv:{HOSTILE_ID}v2").text
    assert re.search(r'data-version="2">.*?<td>title</td>', page, flags=re.S)
    assert "first stored version" in page
    assert f'href="https://arxiv.org/abs/{HOSTILE_ID}v1"' in page
    # A paper featured on Hugging Face shows its upvotes; an old-style id keeps its slash.
    with seeded.engine.connect() as c:
        pid, votes = c.execute(
            sa.text("SELECT paper_id, upvotes FROM community_pick ORDER BY upvotes DESC, paper_id LIMIT 1")
        ).one()
        history_id = c.execute(sa.text("SELECT paper_id FROM version WHERE NOT news LIMIT 1")).scalar_one()
    picked = client.get(f"/papers/{pid}").text
    assert "Community picks" in picked and f"{votes:,}" in picked
    history = client.get(f"/papers/{history_id}")
    assert history.status_code == 200 and "history</span>" in history.text
    missing = client.get("/papers/2999.99999")
    assert missing.status_code == 404 and "has not seen" in missing.text


def test_guides_show_in_the_readers_language_under_the_paper(client: TestClient, seeded: Database) -> None:
    english = client.get(f"/papers/{HOSTILE_ID}").text
    chinese = client.get(f"/papers/{HOSTILE_ID}?lang=zh").text
    client.cookies.clear()
    assert "AI guide to v2 (machine-generated)" in english and "v2 的 AI 导读（机器生成）" in chinese
    assert esc(HOSTILE_GUIDES["en"].tldr) in english and esc(HOSTILE_GUIDES["zh"].tldr) not in english
    assert esc(HOSTILE_GUIDES["zh"].tldr) in chinese and esc(HOSTILE_GUIDES["en"].tldr) not in chinese
    # The guide sits under the paper, before its versions.
    assert english.index('class="guide"') < english.index("<h2>Versions</h2>")
    # In the list, each paper shows its newest version's guide in the list's language, or nothing.
    with seeded.engine.connect() as c:
        guided = {
            (paper_id, language)
            for paper_id, language in c.execute(
                sa.text(
                    "SELECT v.paper_id, g.language FROM guide g JOIN version v ON v.id = g.version_id "
                    "JOIN paper p ON p.id = v.paper_id AND p.latest_version = v.number"
                )
            )
        }
    for language in ("en", "zh"):
        listing = client.get(f"/papers?q=&lang={language}").text
        client.cookies.clear()
        items = dict(re.findall(r'<li data-paper="([^"]+)">(.*?)</li>', listing, flags=re.S))
        assert HOSTILE_ID in items
        for paper_id, item in items.items():
            assert ('class="guide"' in item) == ((paper_id, language) in guided), (paper_id, language)
    assert "AI guide (machine-generated)" in client.get("/papers").text


def test_guides_count_is_the_versions_first_guided_in_the_window(
    client: TestClient, seeded: Database
) -> None:
    now = utcnow()
    expected = expected_numbers(seeded, now)
    # The seed: the hostile revision (two languages, one version) and three versions in English; a
    # version whose first guide is 30 hours old is not counted though its Chinese one is an hour old.
    assert (
        expected.guides_24h
        == guide_records.count_guided_versions_since(seeded, now - timedelta(hours=24))
        == 4
    )
    for language, label in (("en", "New AI guides"), ("zh", "新增 AI 导读")):
        page = client.get(f"/?lang={language}").text
        client.cookies.clear()
        assert shown_counts(page)["guides_24h"] == expected.guides_24h
        assert f'<div class="label">{label}</div>' in page
        # Counted in versions, it links to no list of papers.
        assert "guides_24h" not in links_of(page)


def test_guides_count_shows_when_guides_are_made_or_were(sqlite_store: Database) -> None:
    assert 'data-count="guides_24h"' not in client_for(sqlite_store).get("/").text
    configured = client_for(sqlite_store, llm_url="http://127.0.0.1:9/v1", llm_model="m").get("/").text
    assert shown_counts(configured)["guides_24h"] == 0


def test_old_style_ids_keep_their_slash(sqlite_store: Database) -> None:
    paper_records.save_versions(
        sqlite_store,
        [PaperIn("hep-th/9901001", 1, "Old <style>", "An abstract.", ("A. Author",), ("hep-th",))],
    )
    app_client = client_for(sqlite_store)
    listing = app_client.get("/papers?cat=hep-th").text
    assert 'href="/papers/hep-th/9901001"' in listing and "Old &lt;style&gt;" in listing
    page = app_client.get("/papers/hep-th/9901001v1")
    assert page.status_code == 200 and 'href="https://arxiv.org/abs/hep-th/9901001v1"' in page.text
    assert app_client.get("/papers/").headers["location"] == "/papers"


def test_source_page_lists_runs(client: TestClient, seeded: Database) -> None:
    page = client.get("/sources/arxiv-rss").text
    runs = dashboard_records.source_runs(seeded, "arxiv-rss")
    assert re.findall(r'data-run="(\d+)"', page) == [str(run.id) for run in runs]
    assert "stale" in page
    missing = client.get("/sources/%3Cscript%3E")
    assert missing.status_code == 404 and "&lt;script&gt;" in missing.text and "<script>" not in missing.text


# -- operations ------------------------------------------------------------------------------------------


def test_metrics_equal_the_database(client: TestClient, seeded: Database) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }
    expected = expected_numbers(seeded, utcnow())
    assert samples[("papertrail_database_up", ())] == 1
    assert samples[("papertrail_papers", ())] == expected.papers
    assert samples[("papertrail_versions_ingested_total", (("kind", "new"),))] == expected.versions_new
    assert (
        samples[("papertrail_versions_ingested_total", (("kind", "revision"),))] == expected.versions_revision
    )
    assert samples[("papertrail_matches_total", ())] == expected.matches > 0
    digests = {
        (dict(labels)["channel"], dict(labels)["state"]): value
        for (name, labels), value in samples.items()
        if name == "papertrail_digests"
    }
    assert digests == expected.digests
    assert set(digests) == {
        ("console", "sent"),
        ("email", "dead"),
        ("telegram", "failed"),
        ("slack", "queued"),
    }
    depth = ("papertrail_queue_depth", (("queue", "pending_matches"),))
    assert samples[depth] == expected.pending_matches
    assert samples[("papertrail_queue_depth", (("queue", "queued_digests"),))] == expected.queued_digests
    states = {
        dict(labels)["source"]: dict(labels)["state"]
        for (name, labels), value in samples.items()
        if name == "papertrail_source_state" and value == 1
    }
    assert states == {"arxiv-rss": "stale", "hf-daily": "ok", "arxiv-oai": "failing", "arxiv-api": "unknown"}
    assert samples[("papertrail_guided_versions_24h", ())] == expected.guides_24h
    with seeded.engine.connect() as c:
        made = c.execute(
            sa.text("SELECT created_at FROM guide").columns(sa.column("created_at", UTCDateTime()))
        ).scalars()
        recent = sum(1 for at in made if at >= utcnow() - timedelta(hours=24))
    assert samples[("papertrail_guides_made_24h", ())] == recent == 6
    lag = samples[("papertrail_source_lag_seconds", (("source", "arxiv-rss"),))]
    assert 0 <= lag < 3600
    assert ("papertrail_source_lag_seconds", (("source", "arxiv-oai"),)) not in samples  # never succeeded


def test_health_and_readiness(client: TestClient) -> None:
    assert (client.get("/healthz").status_code, client.get("/healthz").text) == (200, "ok")
    assert client.get("/readyz").status_code == 200
    assert client.post("/").status_code == 405
    missing = client.get("/no/such/page")
    assert missing.status_code == 404 and "There is no page" in missing.text


def test_readyz_503_when_the_database_is_unreachable(sqlite_store: Database, tmp_path: Path) -> None:
    app_client = client_for(sqlite_store)
    assert app_client.get("/readyz").status_code == 200
    # The same app once its database is gone: a file in a folder that does not exist.
    sqlite_store.engine.dispose()
    sqlite_store.engine = sa.create_engine(f"sqlite:///{tmp_path}/gone/nowhere/papertrail.db")
    response = app_client.get("/readyz")
    assert response.status_code == 503 and "database unreachable" in response.text
    assert app_client.get("/healthz").status_code == 200  # liveness never asks the database
    metrics = app_client.get("/metrics").text
    assert "papertrail_database_up 0.0" in metrics and "papertrail_papers" not in metrics
    # A PostgreSQL server that is down: the reason names it, never the password.
    dead = Database(
        make_engine(f"postgresql+psycopg://pt:hunter2-secret@127.0.0.1:{closed_port()}/papertrail")
    )
    response = client_for(dead).get("/readyz")
    assert response.status_code == 503 and "127.0.0.1" in response.text
    assert "hunter2" not in response.text
    dead.engine.dispose()


# -- unsubscribe and manage ------------------------------------------------------------------------------

ADDRESS = "email:ada@example.org"


@functools.cache
def dc_papers() -> list[PaperIn]:
    """Twenty cs.DC versions of the recorded feed (parsed once per test run)."""
    return [p for p in parse_feed(BIG_FEED.read_bytes()).items if "cs.DC" in p.categories][:20]


def subscriber_with_digest(db: Database) -> int:
    """A subscriber whose digest of cs.DC papers is planned (pending); returns the digest id."""
    follow(db, ADDRESS, "cat:cs.DC")
    follow(db, ADDRESS, 'au:"Zeng Li"')
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=utcnow() - timedelta(days=1)))
    paper_records.save_versions(db, dc_papers())
    assert match_new(db) == len(dc_papers())
    assert match_records.expand_matches(db) == len(dc_papers())  # what planning does before it opens digests
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    digest = ledger_records.open_digest(db, subscriber.id, "email", instant_only=False, now=utcnow())
    assert digest is not None
    return digest


def status_of(db: Database) -> str:
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None
    return subscriber.status


def test_unsubscribe_get_asks_and_post_unsubscribes(db: Database) -> None:
    digest_id = subscriber_with_digest(db)
    token = tokens.sign(KEY, tokens.UNSUBSCRIBE, ADDRESS)
    app_client = client_for(db)

    page = app_client.get(f"/unsubscribe/{token}")
    assert page.status_code == 200 and "Unsubscribe?" in page.text
    assert f'action="/unsubscribe/{token}"' in page.text and 'value="One-Click"' in page.text
    assert app_client.head(f"/unsubscribe/{token}").status_code == 200
    assert status_of(db) == SubscriberStatus.ACTIVE  # a mail scanner's GET changes nothing
    assert page.headers["cache-control"] == "no-store" and page.headers["referrer-policy"] == "no-referrer"

    # RFC 8058 one-click: a form-encoded POST, no cookie, no CSRF token.
    done = app_client.post(
        f"/unsubscribe/{token}",
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert done.status_code == 200 and "You are unsubscribed" in done.text
    assert "set-cookie" not in done.headers
    assert status_of(db) == SubscriberStatus.UNSUBSCRIBED
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    assert len(subscriber_records.follows_of(db, subscriber.id)) == 2  # kept for re-subscribing
    # The planned digest is withdrawn, its matches kept; nothing is planned for an unsubscribed address.
    assert [d.state for d in ledger_records.digests_of(db, subscriber.id)] == [DigestState.FAILED]
    assert ledger_records.pending_matches(db, subscriber.id)
    assert ledger_records.subscribers_to_plan(db, utcnow()) == []
    with db.session() as session:
        digest = session.get(Digest, digest_id)
        assert digest is not None and digest.error
    manage = re.search(r'href="(/manage/[^"]+)"', done.text)
    assert manage is not None and app_client.get(manage[1]).status_code == 200
    again = app_client.post(f"/unsubscribe/{token}", data={"List-Unsubscribe": "One-Click"})
    assert again.status_code == 200 and "unsubscribed" in again.text


def test_bad_tokens_are_refused(sqlite_store: Database) -> None:
    follow(sqlite_store, ADDRESS, "cat:cs.DC")
    app_client = client_for(sqlite_store)
    good = tokens.sign(KEY, tokens.UNSUBSCRIBE, ADDRESS)
    forged = tokens.sign("another key", tokens.UNSUBSCRIBE, ADDRESS)
    altered = good[:-2] + ("AA" if good[-2:] != "AA" else "BB")
    wrong_purpose = tokens.sign(KEY, tokens.MANAGE, ADDRESS)
    for token in (forged, altered, wrong_purpose, "garbage", "%3Cscript%3E.x"):
        for response in (
            app_client.get(f"/unsubscribe/{token}"),
            app_client.post(f"/unsubscribe/{token}", data={"List-Unsubscribe": "One-Click"}),
        ):
            assert response.status_code == 400, token
            assert "This link is not valid" in response.text and "most recent digest" in response.text
            assert "<script>" not in response.text
    assert app_client.get(f"/manage/{good}").status_code == 400  # an unsubscribe token cannot manage
    assert status_of(sqlite_store) == SubscriberStatus.ACTIVE
    gone = tokens.sign(KEY, tokens.UNSUBSCRIBE, "email:nobody@example.org")
    assert app_client.get(f"/unsubscribe/{gone}").status_code == 404
    # Without a secret key there are no links at all.
    keyless = client_for(sqlite_store, secret_key=None)
    for path in (f"/unsubscribe/{good}", f"/manage/{wrong_purpose}"):
        response = keyless.get(path)
        assert response.status_code == 404 and "not enabled" in response.text


def test_manage_page_changes_follows_schedule_and_status(sqlite_store: Database) -> None:
    subscriber_with_digest(sqlite_store)
    token = tokens.sign(KEY, tokens.MANAGE, ADDRESS)
    path = f"/manage/{token}"
    app_client = client_for(sqlite_store)

    def act(**form: str) -> Any:
        return app_client.post(path, data=form)

    page = app_client.get(path).text
    assert re.findall(r'<li data-follow="(\d+)">', page) == ["1", "2"]
    assert "cat:cs.DC" in page and "Zeng Li" in page and "daily 08:00" in page and "UTC" in page

    added = act(action="add", query='ti:"<script>alert(1)</script>"', new_only="1")
    assert added.status_code == 303 and added.headers["location"] == f"{path}?done=added"
    page = app_client.get(added.headers["location"]).text
    assert "Follow added." in page and "&lt;script&gt;" in page and "<script>" not in page
    subscriber = subscriber_records.get_subscriber(sqlite_store, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    follows = subscriber_records.follows_of(sqlite_store, subscriber.id)
    assert len(follows) == 3 and follows[-1].revisions is False and follows[-1].instant is False

    bad = act(action="add", query="cat:cs.DC AND (au:Li")
    assert bad.status_code == 400
    assert "at position" in bad.text and "^" in bad.text and 'data-position="' in bad.text
    assert 'value="cat:cs.DC AND (au:Li"' in bad.text  # the query stays in the form to fix
    assert len(subscriber_records.follows_of(sqlite_store, subscriber.id)) == 3

    removed = act(action="remove", follow=str(follows[0].id))
    assert removed.status_code == 303
    assert [f.query for f in subscriber_records.follows_of(sqlite_store, subscriber.id)] == [
        f.query for f in follows[1:]
    ]
    assert act(action="remove", follow=str(follows[0].id)).status_code == 400  # gone already

    assert act(action="schedule", schedule="Weekly Monday 9:00", timezone="Europe/Berlin").status_code == 303
    updated = subscriber_records.get_subscriber(sqlite_store, ADDRESS)
    assert updated is not None and (updated.schedule, updated.timezone) == (
        "weekly mon 09:00",
        "Europe/Berlin",
    )
    wrong = act(action="schedule", schedule="hourly", timezone="Europe/Berlin")
    assert wrong.status_code == 400 and "cannot read schedule" in html.unescape(wrong.text)
    assert act(action="schedule", schedule="daily 08:00", timezone="Mars/Olympus").status_code == 400

    assert act(action="unsubscribe").status_code == 303
    assert status_of(sqlite_store) == SubscriberStatus.UNSUBSCRIBED
    assert "Re-subscribe" in app_client.get(path).text
    assert act(action="resubscribe").status_code == 303
    assert status_of(sqlite_store) == SubscriberStatus.ACTIVE
    assert "subscribed again" in app_client.get(f"{path}?done=resubscribed").text

    unknown = act(action="drop-tables")
    assert unknown.status_code == 400 and "unknown action" in html.unescape(unknown.text)
    assert act().status_code == 400


def test_the_chart_scroll_box_opens_at_the_newest_day(sqlite_store: Database) -> None:
    """On a phone the chart scrolls; a right-to-left box opens at its right end (today), with no
    script, and the chart inside stays left to right (tests/test_browser.py measures it in Chromium)."""
    page = client_for(sqlite_store).get("/").text
    assert '<div class="chart-wrap"><svg' in page
    assert re.search(r"\.chart-wrap \{[^}]*overflow-x: auto;[^}]*direction: rtl;", page)
    assert ".chart-wrap > * { direction: ltr; }" in page
    assert "<script" not in page
