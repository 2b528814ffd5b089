"""The command line, in-process with typer's runner, against a real SQLite file and loopback servers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_helpers import invoke
from tests.conftest import BIG_FEED
from tests.servers import Reply, closed_port, feed_server, stream_server


def test_follow_follows_unfollow(env: Path) -> None:
    code, out, _ = invoke("follow", "console:me", "cat:cs.DC")
    assert code == 0 and "new subscriber console:me" in out and "now follows: cat:cs.DC" in out
    code, out, _ = invoke("follow", "console:me", 'au:"Zeng Li" OR ti:"policy lag"')
    assert code == 0
    code, out, _ = invoke("follow", "console:me", "cat:CS.DC")
    assert code == 0 and "already follows" in out
    code, out, _ = invoke("follows", "console:me")
    assert code == 0 and "  1. cat:cs.DC" in out and '  2. au:"Zeng Li" OR ti:"policy lag"' in out
    code, out, _ = invoke("unfollow", "console:me", "1")
    assert code == 0 and "removed: cat:cs.DC" in out
    code, out, _ = invoke("unfollow", "console:me", 'au:"ZENG LI" OR ti:"Policy  Lag"')
    assert code == 0 and "removed" in out
    code, out, _ = invoke("follows", "console:me")
    assert "(no follows)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("follow", "console:me", "ti:(graph"), "position"),
        (("follow", "ada@example.org", "cat:cs.DC"), "CHANNEL:TARGET"),
        (("follow", "console:me", "cat:cs.DC", "--timezone", "Mars/Base"), "unknown timezone"),
        (("follow", "console:me", "cat:cs.DC", "--schedule", "hourly"), "cannot read schedule"),
        (("unfollow", "console:nobody", "1"), "has no follows"),
        (("ingest", "--source", "nope"), "unknown source"),
    ],
)
def test_bad_input_explains_and_exits_nonzero(env: Path, args: tuple[str, ...], message: str) -> None:
    code, _, err = invoke(*args)
    assert code != 0
    assert message in err.replace("\n", " ")


def test_unfollow_number_out_of_range(env: Path) -> None:
    invoke("follow", "console:me", "cat:cs.DC")
    code, _, err = invoke("unfollow", "console:me", "5")
    assert code == 1 and "console:me has 1 follow; pick number 1" in err  # not found: exit 1


def test_ingest_digest_status(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    invoke("follow", "console:me", "cat:cs.DC")
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        code, out, err = invoke("ingest")
    assert code == 0, err
    assert "1504 items" in out and "matches" in out
    assert server.requests and len(server.requests) == 1
    code, out, _ = invoke("digest", "--now")
    assert code == 0
    assert "--- digest for console:me ---" in out and "Why: category cs.DC" in out
    code, out, _ = invoke("digest", "--now")
    assert code == 0 and "nothing pending" in out and "digest for" not in out
    code, out, _ = invoke("status", "--json")
    data = json.loads(out)
    assert data["papers"] > 1000
    assert data["last_24h"]["new_papers"] + data["last_24h"]["revisions"] == data["versions"]
    assert data["last_24h"]["ai_related"] > 0
    source = data["sources"][0]
    assert source["source"] == "arxiv-rss" and source["last_run"] == "ok"
    # The recorded feed is the mailing of 2024-11-28: long behind arXiv's calendar today.
    assert source["state"] == "stale" and "2024-11-28" in source["reason"] and source["lag_seconds"] > 0
    code, out, _ = invoke("status")
    assert code == 0 and "last 24 h" in out and "arxiv-rss" in out


def test_follow_sets_the_language_of_the_digest(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = invoke("follow", "console:li", "cat:cs.OS", "--language", "fr")
    assert code == 2 and "en, zh" in err
    code, _, err = invoke("follow", "console:li", "cat:cs.OS", "--language", "zh-CN")
    assert code == 0, err
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        assert invoke("ingest")[0] == 0
    code, out, _ = invoke("digest", "--now")
    assert code == 0 and "--- digest for console:li ---" in out
    assert "匹配原因：分类 cs.OS" in out and "Why:" not in out


def test_ingest_failure_is_recorded(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", f"http://127.0.0.1:{closed_port()}/rss/")
    monkeypatch.setenv("PAPERTRAIL_HTTP_BACKOFF", "0.01")
    code, _, err = invoke("ingest")
    assert code == 1 and "cannot connect" in err
    code, out, _ = invoke("status", "--json")
    source = json.loads(out)["sources"][0]
    assert source["state"] == "failing" and source["last_run"] == "error"
    assert "cannot connect" in source["error"] and "cannot connect" in source["reason"]


def test_config_masks_secrets(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_SMTP_PASSWORD", "hunter2")
    monkeypatch.setenv("PAPERTRAIL_ARXIV_CATEGORIES", "cs.LG,stat.ML")
    code, out, _ = invoke("config")
    assert code == 0
    assert "hunter2" not in out and "PAPERTRAIL_SMTP_PASSWORD=********" in out
    assert "rss.arxiv.org/rss/cs.LG+stat.ML" in out


def test_demo_prints_a_digest(env: Path) -> None:
    code, out, _ = invoke("demo")
    assert code == 0
    assert "--- digest for console:demo ---" in out
    assert "https://arxiv.org/abs/" in out and "Why:" in out


def test_show_paper_versions_and_changes(env: Path) -> None:
    from dataclasses import replace

    from core.db import Database, make_engine
    from core.db_migrate import migrate
    from core.papers import paper_records
    from ingest.arxiv_rss_parse import parse_feed

    papers = parse_feed(BIG_FEED.read_bytes()).items
    revised = next(p for p in papers if p.version == 4)  # 1401.3665v4, "The existence of designs"
    db = Database(make_engine(f"sqlite:///{env}"))
    migrate(db.engine)
    earlier = replace(revised, version=3, title="The existence of designs (draft)", comment="v3")
    paper_records.save_versions(db, [earlier, revised])

    code, out, _ = invoke("show", f"arXiv:{revised.arxiv_id}v4", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["id"] == revised.arxiv_id and data["title"] == revised.title
    assert [v["version"] for v in data["versions"]] == [3, 4]
    assert data["versions"][0]["date"].startswith("2024-11-28T05:00:00")
    assert data["versions"][1]["changed"] == ["title", "comment"]
    assert data["authors"] == list(revised.authors) and data["categories"] == list(revised.categories)
    code, out, _ = invoke("show", revised.arxiv_id)
    assert code == 0 and "changed: title, comment" in out
    code, _, err = invoke("show", "2411.00000")
    assert code == 1 and "has not seen" in err


def test_unconfigured_channel_waits_worker_and_webhook_secret(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAPERTRAIL_CONFIG", str(env.with_name("none.toml")))
    invoke("follow", "console:me", "cat:cs.DC", "--schedule", "instant")
    invoke("follow", "telegram:12345", "cat:cs.DC")
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        assert invoke("ingest")[0] == 0
    code, out, _ = invoke("worker", "--until-idle", "--name", "w1")
    assert code == 0 and "--- digest for console:me ---" in out and "1 digest sent" in out
    code, out, err = invoke("status", "--json")
    delivery = json.loads(out)["delivery"]
    waiting = delivery["waiting_for_configuration"]["telegram"]
    assert waiting["pending_matches"] > 0 and "PAPERTRAIL_TELEGRAM_TOKEN" in waiting["hint"]
    assert delivery["dead_digests"] == 0 and delivery["queued_digests"] == 0
    code, _, err = invoke("status")
    assert "wait for the telegram channel, which is not configured" in err
    assert invoke("retry")[1].startswith("re-queued 0 dead-lettered digests")

    code, _, err = invoke("webhook-secret", "https://hooks.example.org/x")
    assert code != 0 and "PAPERTRAIL_SECRET_KEY" in err
    monkeypatch.setenv("PAPERTRAIL_SECRET_KEY", "k" * 32)
    code, out, _ = invoke("webhook-secret", "webhook:https://hooks.example.org/x")
    again = invoke("webhook-secret", "https://hooks.example.org/x")[1]
    other = invoke("webhook-secret", "https://hooks.example.org/y")[1]
    assert code == 0 and len(out.strip()) == 64 and out == again and out != other


def test_ingest_exits_0_against_a_keep_alive_server(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pooled keep-alive connection is closed in the loop that opened it, not a second one."""
    with feed_server(Reply(200, BIG_FEED.read_bytes()), keep_alive=True) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        code, out, err = invoke("ingest")
        assert code == 0, err
        assert "1504 items" in out and "Event loop is closed" not in err
        # A command whose async work closes its own clients also exits 0 with the keep-alive pool open.
        code, _, err = invoke("digest", "--now")
        assert code == 0, err


def test_ingest_past_the_deadline_fails_the_run(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trickling server fails the run (state error, the setting named), not holds it."""
    monkeypatch.setenv("PAPERTRAIL_HTTP_DEADLINE", "1")
    with stream_server(b"x", 300, interval=0.1, content_length=300) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        code, _, err = invoke("ingest")
    assert code == 1 and "PAPERTRAIL_HTTP_DEADLINE" in err
    source = json.loads(invoke("status", "--json")[1])["sources"][0]
    assert source["last_run"] == "error" and "1 s deadline" in source["error"]


def test_ingest_over_the_size_cap_fails_the_run(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_HTTP_MAX_BYTES", "1000000")
    with stream_server(b"<item>" + b"x" * 65530, 400) as server:  # 25 MiB, length unannounced
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        code, _, err = invoke("ingest")
    assert code == 1 and "PAPERTRAIL_HTTP_MAX_BYTES" in err
    assert server.sent < 20 * 1024 * 1024
    source = json.loads(invoke("status", "--json")[1])["sources"][0]
    assert source["last_run"] == "error" and "1,000,000-byte cap" in source["error"]


def test_ingest_keeps_the_day_despite_one_invalid_utf8_byte(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One bad byte in one title no longer refuses the 1,504 papers; the run's note says so."""
    title = b"<title>Equivalent of Non-Trivial Riemann Zeros"
    broken = BIG_FEED.read_bytes().replace(title, b"<title>Equivalent of Non-\xc3Trivial Riemann Zeros")
    with feed_server(Reply(200, broken)) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        code, out, err = invoke("ingest")
    assert code == 0, err
    assert "1504 items, 933 new papers, 571 revisions, 0 already known" in out  # as the clean feed
    assert "note: 1 item had invalid UTF-8 (item 2 (oai:arXiv.org:" in out
    from sqlalchemy import create_engine, text

    with create_engine(f"sqlite:///{env}").connect() as conn:
        note = conn.execute(text("SELECT note FROM source_run ORDER BY id DESC LIMIT 1")).scalar_one()
        titles = conn.execute(text("SELECT count(*) FROM version WHERE title LIKE '%Non-\ufffdTrivial%'"))
        assert titles.scalar_one() == 1
    assert note.startswith("1 item had invalid UTF-8") and "replaced by U+FFFD" in note


@pytest.mark.parametrize("columns", [80, 200])
def test_status_fits_the_terminal(env: Path, monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    """In 80 columns the table wrapped "why" one word a line and cut the dates; below 120
    columns each source is a block of its own, wider it is a table. Dates are printed whole either way."""
    assert invoke("demo", "--load")[0] == 0  # the recorded day: arxiv-rss is "stale", with a long reason
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = invoke("status")
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    assert "…" not in out  # nothing cut
    dates = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", out)
    assert len(dates) >= 3  # arxiv-rss's last check, last success and last new version, whole
    if columns < 120:
        assert "arxiv-rss: stale, lag " in out and "┃" not in out
        (why,) = [line for line in lines if line.startswith("  why: serves the mailing of 2024-11-28")]
        assert len(why.split()) > 5  # words share a line
        assert sum(line.startswith("  last check        ") for line in lines) == 4  # every source
    else:
        (row,) = [line for line in lines if line.startswith("│ arxiv-rss │ stale")]
        assert len(re.findall(r"(?<=│ )\d{4}-\d\d-\d\d \d\d:\d\d UTC(?= │)", row)) == 3
        assert "serves the mailing of" in row
