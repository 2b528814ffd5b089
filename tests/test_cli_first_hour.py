"""Bugs a new user hit, each through the real command line (typer's runner, real SQLite)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from papertrail.cli.app import app
from tests.cli_helpers import invoke
from tests.conftest import BIG_FEED
from tests.servers import Reply, feed_server
from tests.support.cli_output import one_line, unbalanced

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------------------
# 3. follow --schedule/--timezone for an existing subscriber


def test_follow_applies_schedule_and_timezone_to_an_existing_subscriber_and_says_so(env: Path) -> None:
    code, out, err = invoke("follow", "console:ada", "cat:cs.DC")
    assert code == 0, err
    code, out, err = invoke(
        "follow", "console:ada", "cat:cs.OS", "--schedule", "weekly MON 9:00", "--timezone", "Europe/Berlin"
    )
    assert code == 0, err
    assert "console:ada: schedule weekly mon 09:00 (Europe/Berlin), was daily 08:00 (UTC)" in one_line(out)
    assert "now follows: cat:cs.OS" in out
    code, out, _ = invoke("follows", "console:ada")
    assert "schedule weekly mon 09:00 (Europe/Berlin)" in out
    # Only what is given changes; the same values again change nothing and say nothing of it.
    code, out, _ = invoke("follow", "console:ada", "cat:cs.OS", "--timezone", "Asia/Tokyo")
    assert "schedule weekly mon 09:00 (Asia/Tokyo), was weekly mon 09:00 (Europe/Berlin)" in one_line(out)
    code, out, _ = invoke("follow", "console:ada", "cat:cs.OS", "--timezone", "Asia/Tokyo")
    assert code == 0 and "was" not in out and "already follows" in out
    # A bad value is refused before anything changes.
    code, _, err = invoke("follow", "console:ada", "cat:cs.LG", "--schedule", "hourly")
    assert code == 2 and "cannot read schedule" in err
    code, out, _ = invoke("follows", "console:ada")
    assert "schedule weekly mon 09:00 (Asia/Tokyo)" in out and "cat:cs.LG" not in out


# ----------------------------------------------------------------------------------------------------------
# 7. digest for an unknown subscriber; 8. a console digest whose output could not be written


def test_digest_for_an_unknown_address_says_so_and_fails(env: Path) -> None:
    invoke("follow", "console:me", "cat:cs.DC")
    code, out, err = invoke("digest", "--now", "email:nobody@example.org")
    assert code == 1 and out == ""
    assert "no subscriber email:nobody@example.org" in one_line(err)
    code, out, err = invoke("digest", "--now", "console:me")
    assert code == 0 and "nothing pending" in out  # a known subscriber with nothing pending is no error


@pytest.fixture
def pending(env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """console:me follows cat:cs.DC, and the recorded feed is ingested: a digest is pending."""
    assert invoke("follow", "console:me", "cat:cs.DC")[0] == 0
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        assert invoke("ingest")[0] == 0
    return env


def test_a_console_digest_that_cannot_be_written_is_not_sent(pending: Path, tmp_path: Path) -> None:
    # Standard output is a pipe whose reader is gone before anything is written: every write fails.
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "papertrail", "digest", "--now"],
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.returncode == 1
    assert "not sent to console:me (will retry): cannot write the digest to standard output" in done.stderr
    assert "Traceback" not in done.stderr and "crashed" not in done.stderr
    code, out, _ = invoke("digest", "--now")  # still pending: it goes out whole the next time
    assert code == 0 and "--- digest for console:me ---" in out and "Why: category cs.DC" in out


class _ReaderLeavesAfterTheDigest(io.StringIO):
    """Standard output whose reader (``| head``) exits once it has read the digest: later writes fail."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = False

    def write(self, text: str) -> int:
        if self.gone:
            raise BrokenPipeError(32, "Broken pipe")
        self.gone = text.startswith("--- digest for")
        return super().write(text)


def test_digest_piped_to_head_says_on_stderr_what_was_recorded(
    pending: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `digest --now | head` exited 1 with nothing said, the digest recorded sent. The reader
    # took the digest whole; only the summary after it found the pipe closed.
    stdout = _ReaderLeavesAfterTheDigest()
    monkeypatch.setattr(sys, "stdout", stdout)
    app(["digest", "--now"], standalone_mode=False)  # no exit code: it succeeded
    assert "--- digest for console:me ---" in stdout.getvalue()
    err = one_line(capsys.readouterr().err)
    assert "standard output was closed before this summary (`| head`?); recorded: sent 19 " in err
    assert "to console:me" in err
    code, out, _ = invoke("digest", "--now")
    assert code == 0 and "nothing pending" in out


# ----------------------------------------------------------------------------------------------------------
# 4. quotes in error messages; 17. one exit-code scheme (README, "Exit codes")

# Every error path of the command line that needs no network, with the exit code the scheme gives it and
# the quoted values it must show whole. 2: what was typed or configured is wrong; 1: a well-formed
# command failed (here: not found in the store).
USAGE, FAILURE = 2, 1
ERRORS: list[tuple[tuple[str, ...], int, tuple[str, ...]]] = [
    (("follow", "email:notanemail", "cat:cs.DC"), USAGE, ("'notanemail'",)),
    (("follow", "ada@example.org", "cat:cs.DC"), USAGE, ("'ada@example.org'",)),
    (
        ("follow", "console:me", "cat:cs.DC", "--schedule", "hourly"),
        USAGE,
        ("'hourly'", "'weekly mon 09:00'"),
    ),
    (("follow", "console:me", "cat:cs.DC", "--schedule", "weekly Funday 09:00"), USAGE, ("'Funday'",)),
    (("follow", "console:me", "cat:cs.DC", "--timezone", "Mars/Base"), USAGE, ("'Mars/Base'",)),
    (("follow", "console:me", "ti:(graph"), USAGE, ()),
    (("follow", "console:me", 'au:"Zeng'), USAGE, ()),
    (("follow", "console:me", "cat:cs.DC", "--language", "fr"), USAGE, ("'fr'",)),
    (("ingest", "--source", "nope"), USAGE, ("'nope'",)),
    (("ingest", "--source", "hf-daily", "--date", "2026-13-01"), USAGE, ("'2026-13-01'",)),
    (("ingest", "--source", "arxiv-oai", "--since", "yesterday"), USAGE, ("'yesterday'",)),
    (("backfill", "snapshot", "/nonexistent/snapshot.json"), USAGE, ()),
    (("import", "follows", "/nonexistent/follows.jsonl"), USAGE, ()),
    (("export", "follows", "notanaddress"), USAGE, ("'notanaddress'",)),
    (("unfollow", "console:me", "ti:(graph"), USAGE, ()),
    (("follows", "notanaddress"), USAGE, ("'notanaddress'",)),
    (("schedule", "console:me", "weekly Funday 9:00"), USAGE, ("'Funday'", "'weekly Funday 9:00'")),
    (("schedule", "console:me", "daily 08:00", "--timezone", "Mars/Base"), USAGE, ("'Mars/Base'",)),
    (("newsletter", "create", "Bad_Name", "--title", "T", "--follow", "cat:cs.DC"), USAGE, ()),
    (("newsletter", "add", "nope", "email:notanemail"), USAGE, ("'notanemail'",)),
    (("newsletter", "remove", "nope", "ada@example.org"), USAGE, ("'ada@example.org'",)),
    (("resume",), USAGE, ()),
    (("resume", "console:me", "--reason", "550"), USAGE, ()),
    (("resume", "--reason", " "), USAGE, ("'550 5.7.1'",)),
    (("resume", "console:me", "--dry-run"), USAGE, ()),
    (("resume", "--since", "never"), USAGE, ("'never'",)),
    (("retry", "notanaddress"), USAGE, ("'notanaddress'",)),
    (("digest", "--now", "notanaddress"), USAGE, ("'notanaddress'",)),
    (("run", "--role", "nope"), USAGE, ("'nope'",)),
    (("follows", "console:nobody"), FAILURE, ()),
    (("schedule", "console:nobody", "daily 08:00"), FAILURE, ()),
    (("unfollow", "console:nobody", "1"), FAILURE, ()),
    (("unfollow", "console:me", "5"), FAILURE, ()),
    (("unfollow", "console:me", "cat:cs.LG"), FAILURE, ("'cat:cs.LG'",)),
    (("export", "follows", "console:nobody"), FAILURE, ()),
    (("show", "9999.99999"), FAILURE, ("'9999.99999'",)),
    (("newsletter", "show", "nope"), FAILURE, ()),
    (("newsletter", "add", "nope", "console:me"), FAILURE, ("'nope'",)),
    (("newsletter", "remove", "nope", "console:me"), FAILURE, ("'nope'",)),
    (("resume", "console:nobody"), FAILURE, ()),
    (("resume", "--reason", "zzz"), FAILURE, ("'zzz'",)),
    (("digest", "--now", "console:nobody"), FAILURE, ()),
    (("alarms", "clear"), FAILURE, ()),
]


def test_unbalanced_finds_a_cut_quote() -> None:
    assert unbalanced("notanemail' is not an email address") == ["'"]
    assert unbalanced("use 'instant' or 'weekly mon 09:00") == ["'"]
    assert unbalanced("arXiv's digests don't stop at 'x' or 'values'; run `papertrail`") == []


@pytest.fixture
def followed(env: Path) -> Path:
    """console:me follows cat:cs.DC."""
    code, _, err = invoke("follow", "console:me", "cat:cs.DC")
    assert code == 0, err
    return env


@pytest.mark.parametrize(("args", "code", "quoted"), ERRORS, ids=[" ".join(e[0]) for e in ERRORS])
def test_every_error_has_balanced_quotes_and_the_scheme_s_exit_code(
    followed: Path, args: tuple[str, ...], code: int, quoted: tuple[str, ...]
) -> None:
    exit_code, out, err = invoke(*args)
    message = one_line(err)
    assert message.startswith("error: "), (out, err)
    assert exit_code == code, message
    # A query error ends with the query and a caret under the bad spot: only its first line is prose.
    prose = one_line(err.split("\n    ")[0]) if "ti:(" in " ".join(args) or 'au:"' in args[-1] else message
    assert unbalanced(prose) == [], message
    for value in quoted:
        assert value in message, message


# Configuration errors: a setting is invalid, or one the command needs is missing.
CONFIGURATION: list[tuple[dict[str, str], tuple[str, ...], str]] = [
    ({"PAPERTRAIL_HTTP_MAX_BYTES": "0"}, ("follows", "console:me"), "invalid settings"),
    (
        {"PAPERTRAIL_ARXIV_RSS_URL": "file:///tmp/rss.xml"},
        ("ingest",),
        "invalid settings: arxiv_rss_url: PAPERTRAIL_ARXIV_RSS_URL must be an http(s) URL",
    ),
    ({}, ("subscribe", "email:ada@example.org", "cat:cs.DC"), "sign-up needs PAPERTRAIL_SECRET_KEY"),
    ({"PAPERTRAIL_SECRET_KEY": "k" * 32}, ("subscribe", "email:ada@example.org"), "needs PAPERTRAIL_SMTP"),
    ({}, ("webhook-secret", "https://example.org/hook"), "set PAPERTRAIL_SECRET_KEY first"),
    ({}, ("guides",), "AI guides are off"),
]


@pytest.mark.parametrize(("settings", "args", "message"), CONFIGURATION, ids=[c[2] for c in CONFIGURATION])
def test_configuration_errors_exit_2(
    env: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    # `subscribe` without a key exited 2, `webhook-secret` without one 1.
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    code, _, err = invoke(*args)
    assert code == 2 and message in one_line(err)
    assert unbalanced(one_line(err)) == []


# ----------------------------------------------------------------------------------------------------------
# 6. email addresses: the domain is case-insensitive, the local part kept as typed (docs/delivery.md)


def test_email_domain_is_one_subscriber_whatever_its_case_and_the_local_part_is_kept(env: Path) -> None:
    code, out, _ = invoke("follow", "email:Ada@Example.ORG", "cat:cs.DC")
    assert code == 0 and "new subscriber email:Ada@example.org" in one_line(out)
    code, out, _ = invoke("follow", "email:Ada@example.org", "cat:cs.DC")
    assert code == 0 and "new subscriber" not in out and "already follows" in out
    code, out, _ = invoke("follow", "email:ada@EXAMPLE.org", "cat:cs.DC")
    assert code == 0 and "new subscriber" in out  # RFC 5321: the local part may be case-sensitive
    code, out, _ = invoke("export", "follows")
    assert sorted(json.loads(line)["address"] for line in out.splitlines()) == [
        "email:Ada@example.org",
        "email:ada@example.org",
    ]


# ----------------------------------------------------------------------------------------------------------
# 5. a mistyped SQLite path


def test_a_sqlite_path_in_a_missing_folder_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{missing}/pt.db")
    code, _, err = invoke("follow", "console:me", "cat:cs.DC")
    assert code == 2
    assert f"the folder {missing} of the SQLite database {missing}/pt.db does not exist" in one_line(err)
    assert not (tmp_path / "nonexistent").exists()  # nothing created


@pytest.mark.db
def test_the_default_database_folder_is_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PAPERTRAIL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # the default is ./data/papertrail.db
    code, _, err = invoke("follow", "console:me", "cat:cs.DC")
    assert code == 0, err
    assert (tmp_path / "data" / "papertrail.db").is_file()


# ----------------------------------------------------------------------------------------------------------
# 13. a webhook address delivery would refuse is refused when it is followed


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("webhook:http://127.0.0.1:9/hook", "127.0.0.1 (loopback)"),
        ("webhook:http://localhost:8080/hook", "(loopback)"),
        ("webhook:https://10.1.2.3/hook", "10.1.2.3 (private)"),
        ("webhook:http://169.254.169.254/latest", "(link-local)"),
        ("webhook:ftp://hooks.example.org/x", "must be an http(s) URL with a host"),
    ],
)
def test_follow_refuses_a_webhook_delivery_would_refuse(env: Path, address: str, reason: str) -> None:
    code, out, err = invoke("follow", address, "cat:cs.DC")
    assert code == 2 and out == ""
    message = one_line(err)
    assert "cannot receive digests: " in message and reason in message
    code, _, _ = invoke("follows", address)
    assert code != 0  # no subscriber was created


def test_import_follows_refuses_a_webhook_delivery_would_refuse(env: Path, tmp_path: Path) -> None:
    # The bulk path checks what `follow` checks: a private webhook is a bad line, not a paused subscriber.
    lines = [
        {"address": "webhook:http://127.0.0.1:9/hook", "query": "cat:cs.DC"},
        {"address": "console:me", "query": "cat:cs.DC"},
        {"address": "webhook:http://127.0.0.1:9/hook", "query": "cat:cs.LG"},
    ]
    path = tmp_path / "follows.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = invoke("import", "follows", str(path))
    assert code == 2 and out == ""
    assert "follows.jsonl:1: this address cannot receive digests: " in one_line(err)
    assert "127.0.0.1 (loopback)" in err and "follows.jsonl:3: " in one_line(err)
    assert "2 of 3 lines invalid; nothing imported" in one_line(err)
    code, out, err = invoke("import", "follows", str(path), "--skip-invalid")
    assert code == 0, err
    assert "1 added" in out and "2 invalid lines skipped" in out


def test_follow_accepts_an_allowed_internal_webhook(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPERTRAIL_WEBHOOK_ALLOW_HOSTS", "127.0.0.1")
    code, out, err = invoke("follow", "webhook:http://127.0.0.1:9/hook", "cat:cs.DC")
    assert code == 0, err
    assert "now follows: cat:cs.DC" in out


# ----------------------------------------------------------------------------------------------------------
# 9. plural forms


def test_counts_of_one_are_singular(env: Path) -> None:
    # "1 subscribers paused", "1 passes", "item(s)".
    invoke("follow", "console:me", "cat:cs.DC")
    code, out, _ = invoke("try", "cat:cs.DC", "--days", "1")
    assert code == 0 and "0 matches in the last 1 day" in out and "(es)" not in out
    code, _, err = invoke("unfollow", "console:me", "2")
    assert "console:me has 1 follow; pick number 1" in one_line(err)
    code, out, _ = invoke("retry")
    assert out.startswith("re-queued 0 dead-lettered digests;")


def test_plural_helper() -> None:
    from papertrail.cli.common import count_of

    assert [count_of(0, "item"), count_of(1, "item"), count_of(2, "item")] == ["0 items", "1 item", "2 items"]
    assert count_of(1, "match", "matches") == "1 match" and count_of(3, "match", "matches") == "3 matches"
    assert count_of(1234, "line", grouped=True) == "1,234 lines"


def test_status_counts_one_paused_subscriber_in_the_singular(env: Path) -> None:
    from core.db import Database, make_engine
    from core.follows import subscriber_records
    from core.models import SubscriberStatus

    invoke("follow", "console:me", "cat:cs.DC")
    db = Database(make_engine(f"sqlite:///{env}"))
    subscriber = subscriber_records.get_subscriber(db, "console:me")
    assert subscriber is not None and subscriber.id is not None
    subscriber_records.update_subscriber(db, subscriber.id, status=SubscriberStatus.PAUSED)
    db.engine.dispose()
    code, out, _ = invoke("status")
    text = one_line(out)
    assert code == 0 and "0 digests queued" in text and "1 subscriber paused" in text, text
    assert "papers stored: 0 (0 versions)" in text
