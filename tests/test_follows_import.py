"""`papertrail import follows` and `export follows`: the file's checks, the bulk store path on both
databases, idempotence, the round trip, and the CLI's messages and exit codes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import col, select
from typer.testing import CliRunner

from core.db import Database
from core.follows import subscriber_records
from core.follows.file import MAX_LINE_BYTES, check_lines, read_lines
from core.follows.manage import export_follows, follow, import_follows
from core.models import Follow, Subscriber, SubscriberStatus
from core.people import newsletters
from papertrail.cli.app import app
from tests.conftest import migrated_store

runner = CliRunner()


def jsonl(*records: object) -> bytes:
    """A follows file: dicts as JSON, strings as written."""
    return b"".join(
        (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)).encode() + b"\n" for r in records
    )


def lines_of(data: bytes) -> Iterator[bytes]:
    return read_lines(io.BytesIO(data))


def state(db: Database) -> dict[str, tuple[object, ...]]:
    """Every subscriber with its options, status and follows (query, revisions, instant) in the order they
    were added (as ``follows_of`` lists them), by address. Two queries, not one per subscriber: with 1,200
    subscribers that was most of this file's time."""
    with db.session() as session:
        subscribers = list(session.exec(select(Subscriber)))
        follows: dict[int, list[tuple[str, bool, bool]]] = {}
        for f in session.exec(select(Follow).order_by(col(Follow.id))):
            follows.setdefault(f.subscriber_id, []).append((f.query, f.revisions, f.instant))
    return {
        s.address: (s.schedule, s.timezone, s.language, s.status, follows.get(s.id or 0, []))
        for s in subscribers
    }


# -- the file's checks (pure) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"address": "console:a", "query": "x"', "not JSON: Expecting ',' delimiter at column"),
        ("[1, 2]", "not a JSON object but an array"),
        ('{"query": "x"}', "missing key 'address'"),
        ('{"address": "console:a"}', "missing key 'query'"),
        ('{"address": "console:a", "query": "x", "shedule": "instant"}', "unknown key 'shedule'"),
        ('{"address": "console:a", "query": "x", "query": "y"}', "key 'query' given twice"),
        ('{"address": 12345, "query": "x"}', "'address' must be a string, not 12345"),
        ('{"address": "console:a", "query": "x", "instant": "yes"}', "'instant' must be true or false"),
        ('{"address": "console:a", "query": "x", "new_only": 1}', "'new_only' must be true or false, not 1"),
        ('{"address": "console:a", "query": null}', "'query' must be a string, not null"),
        ('{"address": "ada@example.org", "query": "x"}', "invalid address: address 'ada@example.org' is not"),
        ('{"address": "email:ada", "query": "x"}', "invalid address: 'ada' is not an email address"),
        ('{"address": "telegram:abc", "query": "x"}', "must be a number"),
        ('{"address": "newsletter:ml", "query": "x"}', "papertrail newsletter create"),
        ('{"address": "console:a", "query": "ti:(graph"}', "invalid query: expected a word"),
        ('{"address": "console:a", "query": "x", "schedule": "hourly"}', "cannot read schedule 'hourly'"),
        ('{"address": "console:a", "query": "x", "timezone": "Mars/Base"}', "unknown timezone 'Mars/Base'"),
        ('{"address": "console:a", "query": "x", "language": "fr"}', "unknown language 'fr'"),
    ],
)
def test_a_bad_line_is_reported_with_its_number_and_reason(line: str, reason: str) -> None:
    good = {"address": "console:ok", "query": "cat:cs.DC"}
    checked = check_lines(lines_of(jsonl(good, "", line, good)))
    assert [(bad.line, reason in bad.reason) for bad in checked.bad] == [(3, True)], checked.bad
    assert checked.lines == 3 and len(checked.follows) == 1 and checked.duplicates == 1


def test_a_query_error_quotes_the_parser_and_its_position() -> None:
    checked = check_lines(lines_of(jsonl({"address": "console:a", "query": "cat:cs.DC OR"})))
    assert checked.bad[0].reason.startswith("invalid query: ") and "position" in checked.bad[0].reason


def test_long_lines_and_bad_bytes_are_refused_without_reading_them_whole() -> None:
    huge = {"address": "console:a", "query": "x" * (MAX_LINE_BYTES * 3)}
    data = jsonl(huge, {"address": "console:a", "query": "cat:cs.DC"}) + b'\xff{"a": 1}\n'
    checked = check_lines(lines_of(data))
    assert [(b.line, b.reason) for b in checked.bad] == [
        (1, f"line longer than {MAX_LINE_BYTES:,} bytes"),
        (3, "not UTF-8 (byte 1)"),
    ]
    assert [f.query for f in checked.follows] == ["cat:cs.DC"]


def test_subscriber_options_conflicting_between_lines_refuse_the_later_line() -> None:
    checked = check_lines(
        lines_of(
            jsonl(
                {"address": "console:a", "query": "cat:cs.DC", "schedule": "weekly Monday 9:00"},
                {"address": "console:a", "query": "cat:cs.OS"},  # no opinion: fine
                {"address": "console:a", "query": "cat:cs.LG", "schedule": "weekly mon 09:00"},  # same
                {"address": "console:a", "query": "cat:cs.AI", "schedule": "daily 08:00"},
                {"address": "console:a", "query": "cat:cs.DC", "new_only": True},
                {"address": "console:b", "query": "cat:cs.DC", "schedule": "daily 08:00"},  # other reader
            )
        )
    )
    assert [(b.line, b.reason) for b in checked.bad] == [
        (4, "schedule 'daily 08:00' conflicts with 'weekly mon 09:00' on line 1 for the same address"),
        (5, "same follow as line 1 with other new_only/instant options"),
    ]
    assert checked.subscribers["console:a"].schedule == "weekly mon 09:00"
    assert [f.line for f in checked.follows] == [1, 2, 3, 6]


# -- the store: both databases --------------------------------------------------------------------------


def test_import_is_idempotent_and_updates_options(db: Database) -> None:
    # 1,200 subscribers: more than one IN (...) slice of the bulk look-ups.
    records: list[object] = []
    for n in range(1200):
        address = f"telegram:{n}" if n % 2 else f"email:r{n}@example.org"
        records += [
            {"address": address, "query": "cat:cs.DC", "timezone": "Asia/Tokyo"}
            if n % 3 == 0
            else {"address": address, "query": "cat:cs.DC"},
            {"address": address, "query": f'au:"Reader {n}"', "new_only": True, "instant": n % 5 == 0},
        ]
    data = jsonl(*records)
    first = import_follows(db, lines_of(data), skip_invalid=False, timezone="UTC", schedule="daily 08:00")
    assert first.counts is not None and not first.bad
    assert (first.counts.subscribers_created, first.counts.follows_added) == (1200, 2400)
    before = state(db)
    again = import_follows(db, lines_of(data), skip_invalid=False, timezone="UTC", schedule="daily 08:00")
    assert again.counts is not None
    assert (again.counts.subscribers_created, again.counts.subscribers_updated) == (0, 0)
    assert (again.counts.follows_added, again.counts.follows_updated, again.counts.follows_unchanged) == (
        0,
        0,
        2400,
    )
    assert state(db) == before
    assert before["telegram:3"] == ("daily 08:00", "Asia/Tokyo", None, "active", before["telegram:3"][4])
    # Operator's action, like `papertrail follow`: an email address is active at once, not unconfirmed.
    assert before["email:r0@example.org"][3] == SubscriberStatus.ACTIVE

    # Same follow, other options, and subscriber options: updated in place, the query text kept.
    changed = jsonl(
        {"address": "telegram:1", "query": 'AU:"reader 1"', "schedule": "instant", "language": "zh-CN"},
        {"address": "telegram:1", "query": "cat:cs.LG"},
    )
    third = import_follows(db, lines_of(changed), skip_invalid=False, timezone="UTC", schedule="daily 08:00")
    assert third.counts is not None
    assert (third.counts.follows_added, third.counts.follows_updated, third.counts.subscribers_updated) == (
        1,
        1,
        1,
    )
    assert state(db)["telegram:1"] == (
        "instant",
        "UTC",
        "zh",
        "active",
        [("cat:cs.DC", True, False), ('au:"Reader 1"', True, False), ("cat:cs.LG", True, False)],
    )


def test_import_behaves_like_follow_for_existing_subscribers(db: Database) -> None:
    follow(db, "email:gone@example.org", "cat:cs.DC")
    gone = subscriber_records.get_subscriber(db, "email:gone@example.org")
    assert gone is not None and gone.id is not None
    subscriber_records.update_subscriber(db, gone.id, status=SubscriberStatus.UNSUBSCRIBED)
    follow(db, "console:me", "cat:CS.DC", schedule="weekly fri 17:00")
    report = import_follows(
        db,
        lines_of(
            jsonl(
                {"address": "email:gone@example.org", "query": "cat:cs.OS"},
                {"address": "console:me", "query": "cat:cs.DC"},
            )
        ),
        skip_invalid=False,
        timezone="UTC",
        schedule="daily 08:00",
    )
    assert report.counts is not None and report.counts.inactive == 1
    after = state(db)
    # The reader who unsubscribed stays unsubscribed; an option the file does not give is left alone.
    assert after["email:gone@example.org"][3] == SubscriberStatus.UNSUBSCRIBED
    assert after["console:me"][:2] == ("weekly fri 17:00", "UTC")
    assert after["console:me"][4] == [("cat:CS.DC", True, False)]


def test_bad_lines_import_nothing_unless_skipped(db: Database) -> None:
    data = jsonl({"address": "console:a", "query": "cat:cs.DC"}, {"address": "console:b", "query": "ti:("})
    refused = import_follows(db, lines_of(data), skip_invalid=False, timezone="UTC", schedule="daily 08:00")
    assert refused.counts is None and [b.line for b in refused.bad] == [2]
    assert state(db) == {}
    skipped = import_follows(db, lines_of(data), skip_invalid=True, timezone="UTC", schedule="daily 08:00")
    assert skipped.counts is not None and skipped.counts.follows_added == 1
    assert list(state(db)) == ["console:a"]


def test_export_then_import_into_an_empty_store_round_trips(db: Database, tmp_path: Path) -> None:
    for source_store in migrated_store(f"sqlite:///{tmp_path}/source.db"):
        follow(source_store, "webhook:https://hooks.example.org/x?token=s3cret", "cat:cs.DC", instant=True)
        follow(source_store, "email:ada@example.org", 'au:"Zeng Li" OR ti:"policy lag"', revisions=False)
        follow(source_store, "email:ada@example.org", "cat:cs.DC ANDNOT cat:cs.LG", timezone="Europe/Berlin")
        follow(source_store, "slack:C0123ABC", "αβ «quoted» 量子", schedule="weekdays 07:30")
        ada = subscriber_records.get_subscriber(source_store, "email:ada@example.org")
        assert ada is not None and ada.id is not None
        subscriber_records.update_subscriber(
            source_store, ada.id, language="zh", status=SubscriberStatus.PAUSED
        )
        follow(source_store, "console:left", "cat:cs.OS")
        left = subscriber_records.get_subscriber(source_store, "console:left")
        assert left is not None and left.id is not None
        subscriber_records.update_subscriber(source_store, left.id, status=SubscriberStatus.UNCONFIRMED)
        newsletters.create(source_store, "ml", "ML", ["cat:cs.LG"], timezone="UTC", schedule="daily 08:00")
        exported = list(export_follows(source_store, None, timezone="UTC", schedule="daily 08:00"))
        expected = state(source_store)

    # Stable order (address, then follow number), the secret-bearing URL as stored, defaults left out.
    assert [json.loads(line) for line in exported] == [
        {
            "address": "email:ada@example.org",
            "query": 'au:"Zeng Li" OR ti:"policy lag"',
            "language": "zh",
            "new_only": True,
        },
        {"address": "email:ada@example.org", "query": "cat:cs.DC ANDNOT cat:cs.LG", "language": "zh"},
        {"address": "slack:C0123ABC", "query": "αβ «quoted» 量子", "schedule": "weekdays 07:30"},
        {
            "address": "webhook:https://hooks.example.org/x?token=s3cret",
            "query": "cat:cs.DC",
            "instant": True,
        },
    ]
    data = b"".join(line.encode() + b"\n" for line in exported)
    report = import_follows(db, lines_of(data), skip_invalid=False, timezone="UTC", schedule="daily 08:00")
    assert report.counts is not None and report.counts.follows_added == 4
    imported = state(db)
    # Status is not part of the file: the paused reader comes back active, as a new `follow` would.
    assert imported["email:ada@example.org"] == (
        *expected["email:ada@example.org"][:3],
        "active",
        expected["email:ada@example.org"][4],
    )
    for address in ("slack:C0123ABC", "webhook:https://hooks.example.org/x?token=s3cret"):
        assert imported[address] == expected[address]
    assert set(imported) == {
        "email:ada@example.org",
        "slack:C0123ABC",
        "webhook:https://hooks.example.org/x?token=s3cret",
    }
    assert list(export_follows(db, None, timezone="UTC", schedule="daily 08:00")) == exported


def test_export_of_one_address(db: Database) -> None:
    follow(db, "console:a", "cat:cs.DC")
    follow(db, "console:b", "cat:cs.OS")
    assert [
        json.loads(x)["address"]
        for x in export_follows(db, "CONSOLE:b", timezone="UTC", schedule="daily 08:00")
    ] == ["console:b"]
    with pytest.raises(LookupError, match="no subscriber console:c"):
        export_follows(db, "console:c", timezone="UTC", schedule="daily 08:00")


# -- the command line -----------------------------------------------------------------------------------


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    return tmp_path


def invoke(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_cli_refuses_a_file_with_bad_lines_and_exits_2(env: Path) -> None:
    path = env / "follows.jsonl"
    path.write_bytes(
        jsonl(
            {"address": "console:a", "query": "cat:cs.DC"},
            {"address": "console:a", "query": "ti:(graph"},
            "not json",
            {"address": "console:b", "query": "cat:cs.OS", "colour": "red"},
        )
    )
    code, out, err = invoke("import", "follows", str(path))
    assert code == 2 and out == ""
    assert f"{path}:2: invalid query: expected a word" in err
    assert f"{path}:3: not JSON: Expecting value at column 1" in err
    assert f"{path}:4: unknown key 'colour'" in err
    assert (
        "3 of 4 lines invalid; nothing imported; fix them, or import the good lines with --skip-invalid"
        in err
    )
    assert invoke("follows", "console:a")[0] == 1  # nothing stored

    code, out, err = invoke("import", "follows", str(path), "--skip-invalid")
    assert code == 0 and f"{path}:2: invalid query" in err
    assert "4 lines; follows: 1 added, 0 updated, 0 unchanged; subscribers: 1 created" in out
    assert "3 invalid lines skipped" in out
    code, out, _ = invoke("import", "follows", str(path), "--skip-invalid")
    assert code == 0 and "follows: 0 added, 0 updated, 1 unchanged; subscribers: 0 created, 0 updated" in out


def test_cli_exit_codes_for_nothing_to_import(env: Path) -> None:
    assert invoke("import", "follows", str(env / "absent.jsonl"))[0] == 2
    bad = env / "bad.jsonl"
    bad.write_text('{"address": "console:a"}\n')
    code, _, err = invoke("import", "follows", str(bad), "--skip-invalid")
    assert code == 2 and "1 of 1 lines invalid; nothing imported" in err and "--skip-invalid" not in err
    empty = env / "empty.jsonl"
    empty.write_text("\n\n")
    code, out, _ = invoke("import", "follows", str(empty))
    assert code == 0 and "no follows to import" in out


def test_cli_export_import_round_trip_through_stdin_and_stdout(env: Path) -> None:
    invoke("follow", "console:me", "cat:cs.DC", "--new-only", "--schedule", "instant")
    invoke("follow", "email:ada@example.org", 'au:"Zeng Li"', "--language", "zh")
    code, exported, _ = invoke("export", "follows")
    assert code == 0 and len(exported.splitlines()) == 2
    target = env / "out.jsonl"
    code, out, _ = invoke("export", "follows", "console:me", "--output", str(target))
    assert code == 0 and f"1 follows written to {target}" in out
    assert json.loads(target.read_text()) == {
        "address": "console:me",
        "query": "cat:cs.DC",
        "schedule": "instant",
        "new_only": True,
    }
    assert not target.with_name("out.jsonl.partial").exists()

    fresh = env / "fresh.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PAPERTRAIL_DATABASE_URL", f"sqlite:///{fresh}")
        code, out, _ = invoke("import", "follows", "-", stdin=exported.encode())
        assert code == 0 and "2 added" in out
        assert invoke("export", "follows")[1] == exported
    code, _, err = invoke("export", "follows", "console:nobody")
    assert code == 1 and "no subscriber console:nobody" in err
    code, _, err = invoke("export", "follows", "nobody")
    assert code == 2 and "CHANNEL:TARGET" in err


def test_cli_prints_at_most_1000_bad_lines_and_notes_inactive_subscribers(env: Path) -> None:
    path = env / "many.jsonl"
    path.write_bytes(jsonl({"address": "console:a", "query": "cat:cs.DC"}, *["{"] * 1005))
    code, out, err = invoke("import", "follows", str(path), "--skip-invalid")
    assert code == 0 and f"{path}:1001: not JSON" in err and f"{path}:1002:" not in err
    assert "... and 5 more invalid lines" in err and "1,005 invalid lines skipped" in out
    for cli_store in migrated_store(f"sqlite:///{env}/cli.db"):
        subscriber_records.update_subscriber(cli_store, 1, status=SubscriberStatus.UNSUBSCRIBED)
    path.write_bytes(jsonl({"address": "console:a", "query": "cat:cs.OS"}))
    code, out, _ = invoke("import", "follows", str(path))
    assert code == 0 and "follows: 1 added" in out
    assert "note: 1 of these subscribers are paused, unsubscribed or unconfirmed" in out


def test_cli_reports_lines_nested_too_deeply_and_skips_them(
    db: Database, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line nesting arrays thousands deep is a bad line like any other (no RecursionError traceback);
    with --skip-invalid the good lines are imported. On both databases."""
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", db_url)
    path = tmp_path / "follows.jsonl"
    path.write_bytes(
        jsonl(
            {"address": "console:a", "query": "cat:cs.DC"},
            '{"address": "console:b", "query": ' + "[" * 3000 + "]" * 3000 + "}",  # past the decoder's stack
            '{"address": "console:c", "query": "x", "new_only": ' + "[" * 65 + "]" * 65 + "}",  # past 64
            '{"address": "console:d", "query": ' + "[" * 4000,  # deep and cut off
        )
    )
    code, out, err = invoke("import", "follows", str(path))
    assert code == 2 and out == "" and "Traceback" not in err
    for line in (2, 3, 4):
        assert f"{path}:{line}: nested too deeply" in err
    assert "3 of 4 lines invalid; nothing imported" in err
    assert subscriber_records.get_subscriber(db, "console:a") is None

    code, out, err = invoke("import", "follows", str(path), "--skip-invalid")
    assert code == 0 and f"{path}:2: nested too deeply" in err
    assert "follows: 1 added" in out and "3 invalid lines skipped" in out
    imported = subscriber_records.get_subscriber(db, "console:a")
    assert imported is not None and imported.id is not None
    assert [f.query for f in subscriber_records.follows_of(db, imported.id)] == ["cat:cs.DC"]
    assert all(subscriber_records.get_subscriber(db, f"console:{x}") is None for x in "bcd")
