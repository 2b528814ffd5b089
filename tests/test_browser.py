"""The status page in a real browser: headless Chromium against `papertrail run --role web`.

The store is seeded from the recorded corpus (tests/web_seed.py); every number the page shows must equal
what plain SQL counts. The test also checks the page fits a phone's width and saves a screenshot, under
``docs/`` when ``PAPERTRAIL_UPDATE_SCREENSHOT=1`` (otherwise in the test's temporary folder).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from core.db import Database
from tests.chromium import ensure_chromium
from tests.servers import free_port
from tests.support.service_process import ServiceProcess, service_env, wait_until
from tests.web_seed import DASHBOARD_COUNTS, expected_numbers, seed_store

DOCS = Path(__file__).resolve().parents[1] / "docs"
UPDATE = os.environ.get("PAPERTRAIL_UPDATE_SCREENSHOT") == "1"  # read at import: conftest clears PAPERTRAIL_*


@pytest.fixture(scope="module")
def chromium() -> str:
    path, why = ensure_chromium()
    if path is None:
        pytest.skip(f"no headless browser for the status-page test: {why}")
    return path


@pytest.fixture
def web(sqlite_url: str, sqlite_store: Database, tmp_path: Path) -> Iterator[tuple[str, Database]]:
    """A seeded store and `papertrail run --role web` serving it; yields the page's base URL."""
    with serving(sqlite_url, sqlite_store, tmp_path) as base:
        yield base, sqlite_store


@contextmanager
def serving(url: str, db: Database, tmp_path: Path, **settings: str) -> Iterator[str]:
    """``store`` seeded from the corpus and served by `papertrail run --role web` with ``settings``
    (PAPERTRAIL_ names without the prefix); yields the base URL."""
    import asyncio

    asyncio.run(seed_store(db))
    port = free_port()
    env = service_env(tmp_path, DATABASE_URL=url, WEB_PORT=str(port), SECRET_KEY="k" * 32, **settings)
    service = ServiceProcess(["run", "--role", "web"], env)
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert wait_until(healthy, timeout=60), service.output
        yield base
        assert service.stop() == 0, service.output
    finally:
        service.kill()


def test_the_status_page_shows_the_database_numbers(
    chromium: str, web: tuple[str, Database], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    from core.models import utcnow

    base, db = web
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(base + "/", wait_until="load")
            expected = expected_numbers(db, utcnow())
            shown = {
                name: int(re.sub(r"\D", "", page.locator(f'[data-count="{name}"]').first.inner_text()))
                for name in DASHBOARD_COUNTS
            }
            assert shown == {name: getattr(expected, name) for name in DASHBOARD_COUNTS}
            assert shown["papers"] > 1000 and shown["new_24h"] > 0
            # The source table states each source's health in words, not only in colour.
            states = page.locator("tr[data-source]").evaluate_all("rows => rows.map(r => r.dataset.state)")
            assert set(states) <= {"ok", "quiet", "stale", "failing", "unknown"} and "failing" in states
            # A number is a link to the list it counts.
            page.locator('[data-count="new_24h"]').first.click()
            page.wait_for_url(re.compile(r"/papers\?since=24h&kind=new"))
            assert page.locator("h1").first.inner_text()
            # The same page in Chinese, through its switch: the same numbers, remembered on the next page.
            page.goto(base + "/", wait_until="load")
            page.locator('[data-language-switch] a[hreflang="zh-Hans"]').click()
            page.wait_for_url(re.compile(r"/\?lang=zh$"))
            assert page.locator("html").get_attribute("lang") == "zh-Hans"
            assert page.locator("h1").first.inner_text() == "新到了什么？一切正常吗？"
            chinese = {
                name: int(re.sub(r"\D", "", page.locator(f'[data-count="{name}"]').first.inner_text()))
                for name in DASHBOARD_COUNTS
            }
            assert chinese == shown
            # Without CJK fonts (fonts-noto-cjk) on the machine, Chinese shows as boxes in this screenshot.
            page.screenshot(path=str((DOCS if UPDATE else tmp_path) / "status-page-zh.png"), full_page=True)
            page.goto(base + "/papers", wait_until="load")
            assert page.locator("html").get_attribute("lang") == "zh-Hans"
            page.goto(base + "/?lang=en", wait_until="load")
            shot = (DOCS if UPDATE else tmp_path) / "status-page.png"
            page.goto(base + "/", wait_until="load")
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000

            phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
            phone.goto(base + "/", wait_until="load")
            overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"the page is {overflow} px wider than a phone screen"
            # The 30-day chart is wider than the phone: its scroll box opens at the newest day.
            edges = phone.evaluate(
                """() => {
                    const wrap = document.querySelector('.chart-wrap').getBoundingClientRect();
                    const chart = document.querySelector('.chart-wrap svg').getBoundingClientRect();
                    return [chart.width - wrap.width, chart.right - wrap.right];
                }"""
            )
            wider, hidden_right = edges
            assert wider > 10, "the chart should be wider than a phone (else this checks nothing)"
            assert hidden_right <= 1, f"today's end of the chart is {hidden_right} px out of view"
            phone.screenshot(
                path=str((DOCS if UPDATE else tmp_path) / "status-page-phone.png"), full_page=True
            )
        finally:
            browser.close()


def test_a_chinese_first_deployment_shows_beijing_time_to_a_reader_who_chose_nothing(
    chromium: str, sqlite_url: str, sqlite_store: Database, tmp_path: Path
) -> None:
    # Deployed like the original 研踪 site. The browser asks for German, which PaperTrail does
    # not speak, so the operator's default decides; every time is in Beijing time.
    from playwright.sync_api import sync_playwright

    settings = {"DEFAULT_LANGUAGE": "zh", "DISPLAY_TIMEZONE": "Asia/Shanghai"}
    with serving(sqlite_url, sqlite_store, tmp_path, **settings) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900}, locale="de-DE")
            page.goto(base + "/", wait_until="load")
            assert page.locator("html").get_attribute("lang") == "zh-Hans"
            assert page.locator("h1").first.inner_text() == "新到了什么？一切正常吗？"
            window = page.locator("#window").inner_text()
            moment = r"\d{4}-\d\d-\d\d \d\d:\d\d"
            assert re.fullmatch(rf"统计 {moment} — {moment}（北京时间）", window), window
            text = page.locator("main").inner_text()
            assert "arXiv 最近完成扫描" in text and "全站最近入库" in text and " UTC" not in text
            shot = (DOCS if UPDATE else tmp_path) / "status-page-zh-beijing.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
