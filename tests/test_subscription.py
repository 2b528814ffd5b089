"""`papertrail export subscription` / `import subscription`, the manage page's downloads, and the OPML of a
subscriber's feeds: the round trip onto a fresh store (SQLite and PostgreSQL), the strict checks of the
document (nothing stored on any refusal), the address that exists already, the history in the ledger, and
the CLI's messages and exit codes."""

from __future__ import annotations

import functools
import json
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from core.config import Settings
from core.db import Database
from core.delivery.feed_links import opml, query_feed_url
from core.delivery.feeds import private_feed_url
from core.follows import match_records, subscriber_records
from core.follows.index import match_new
from core.follows.manage import follow
from core.ledger import ledger_records
from core.models import Digest, DigestState, Follow, Match, Subscriber
from core.papers import paper_records
from core.papers.paper_records import Novelty
from core.people import newsletter_records, newsletters, tokens
from core.people.subscription import export_subscription, import_subscription
from core.people.subscription_file import (
    MAX_FOLLOWS,
    MAX_OBJECT_KEYS,
    MAX_RECEIVED,
    DocumentError,
    Mode,
    SubscriptionExists,
    dumps,
    read_document,
)
from core.values import PaperIn
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED, migrated_store
from tests.support.subscription_export import (  # noqa: F401  (fixtures)
    ADDRESS,
    comparable,
    good_document,
    invoke,
    target_fixture,
    two_servers_fixture,
)
from tests.support.web import KEY, client_for

T0 = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)


@functools.cache
def dc_papers() -> list[PaperIn]:
    """The 19 cs.DC versions of the recorded feed (parsed once per test run)."""
    papers = [p for p in parse_feed(BIG_FEED.read_bytes()).items if "cs.DC" in p.categories]
    assert len(papers) == N
    return papers


N = 19


# -- stores ------------------------------------------------------------------------------------------------


def send_digest(db: Database, subscriber_id: int, papers: list[PaperIn], sent_at: datetime) -> int:
    """Store ``papers`` as news, match them, and record the subscriber's digest of them as sent."""
    paper_records.save_versions(db, papers, now=sent_at - timedelta(hours=1))
    match_new(db, now=sent_at - timedelta(minutes=30))
    match_records.expand_matches(db, now=sent_at - timedelta(minutes=30))
    digest = ledger_records.open_digest(db, subscriber_id, "email", instant_only=False, now=sent_at)
    assert digest is not None
    ledger_records.finish_sent(db, digest, platform_id="<m@x>", parts=1, now=sent_at)
    return digest


def source_subscription(db: Database) -> Subscriber:
    """Ada on the exporting server: options, three follows, two newsletters, two sent digests of cs.DC."""
    follow(db, ADDRESS, "cat:cs.DC", timezone="Asia/Shanghai", schedule="weekly mon 09:00")
    follow(db, ADDRESS, 'au:"Li, Zeng" OR ti:"policy lag"', revisions=False)
    follow(db, ADDRESS, "id:2411.17700", instant=True)
    with db.session() as session:
        session.execute(sa.update(Follow).values(created_at=T0 - timedelta(days=30)))
    for name in ("ml-weekly", "systems"):
        newsletters.create(db, name, name.title(), ["cat:cs.LG"], schedule="daily 08:00", timezone="UTC")
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    for name in ("ml-weekly", "systems"):
        newsletters.join(db, name, subscriber)
    subscriber_id = subscriber.id
    send_digest(db, subscriber_id, dc_papers()[:12], T0)
    send_digest(db, subscriber_id, dc_papers()[12:], T0 + timedelta(days=1))
    return subscriber_records.update_subscriber(db, subscriber_id, language="zh", heartbeat=True)


def follows_state(db: Database, address: str) -> list[tuple[str, str, bool, bool]]:
    """(query, canonical, revisions, instant) of the address's follows, in their order."""
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    return [
        (f.query, f.canonical, f.revisions, f.instant)
        for f in subscriber_records.follows_of(db, subscriber.id)
    ]


def settings_of(db: Database, address: str) -> tuple[object, ...]:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None
    return (
        subscriber.status,
        subscriber.schedule,
        subscriber.timezone,
        subscriber.language,
        subscriber.heartbeat,
    )


def table_counts(db: Database) -> tuple[int, ...]:
    with db.session() as session:
        return tuple(
            int(session.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
            for table in (Subscriber, Follow, Match, Digest)
        )


# -- the round trip ----------------------------------------------------------------------------------------


def test_export_then_import_on_a_fresh_store_gives_the_same_subscription(
    db: Database, target: Database
) -> None:
    source_subscription(db)
    doc = export_subscription(db, ADDRESS, now=T0 + timedelta(days=2))
    assert doc["format"] == "papertrail-subscription" and doc["version"] == 2
    assert doc["exported_at"] == "2026-12-02T07:00:00Z"
    assert (doc["recommend"], doc["votes"], doc["library"]) == (
        None,
        [],
        [],
    )  # tests/test_subscription_learned
    assert (doc["status"], doc["schedule"], doc["timezone"], doc["language"], doc["heartbeat"]) == (
        "active",
        "weekly mon 09:00",
        "Asia/Shanghai",
        "zh",
        True,
    )
    assert doc["newsletters"] == ["ml-weekly", "systems"]
    assert doc["follows"] == [
        {"query": "cat:cs.DC", "new_only": False, "instant": False},
        {"query": 'au:"Li, Zeng" OR ti:"policy lag"', "new_only": True, "instant": False},
        {"query": "id:2411.17700", "new_only": False, "instant": True},
    ]
    received = doc["received"]
    assert [(r["arxiv_id"], r["version"]) for r in received] == [(p.arxiv_id, p.version) for p in dc_papers()]
    assert {r["sent_at"] for r in received[:12]} == {"2026-11-30T07:00:00Z"}
    assert {r["sent_at"] for r in received[12:]} == {"2026-12-01T07:00:00Z"}
    assert len({r["digest"] for r in received}) == 2 and received[0]["title"] == dc_papers()[0].title

    # The target has one of the two newsletters, and the papers ingested (as history: nobody matched).
    newsletters.create(
        target, "ml-weekly", "ML weekly", ["cat:cs.LG"], schedule="daily 08:00", timezone="UTC"
    )
    paper_records.save_versions(target, dc_papers(), novelty=Novelty.HISTORY)
    _, done = import_subscription(target, dumps(doc).encode(), now=T0 + timedelta(days=3))
    assert done.created and done.status == "active"
    assert (done.follows.follows_added, done.newsletters_joined, done.newsletters_missing) == (
        3,
        1,
        ("systems",),
    )
    assert (done.papers_recorded, done.digests_recorded, done.papers_missing) == (N, 2, 0)

    assert settings_of(target, ADDRESS) == settings_of(db, ADDRESS)
    assert follows_state(target, ADDRESS) == follows_state(db, ADDRESS)
    again = export_subscription(target, ADDRESS, now=T0 + timedelta(days=2))
    assert comparable(again) == {**comparable(doc), "newsletters": ["ml-weekly"]}
    # The imported digests are sent, at their own time, on the address's channel; nothing is pending.
    subscriber = subscriber_records.get_subscriber(target, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    digests = ledger_records.digests_of(target, subscriber.id)
    assert [(d.state, d.sent_at, d.channel, d.item_count) for d in digests] == [
        (DigestState.SENT, T0, "email", 12),
        (DigestState.SENT, T0 + timedelta(days=1), "email", N - 12),
    ]
    assert ledger_records.pending_matches(target, subscriber.id) == []

    # Importing the same file again changes nothing and records nothing twice.
    before = table_counts(target)
    _, twice = import_subscription(target, dumps(doc).encode(), now=T0 + timedelta(days=4))
    assert not twice.created and not twice.settings_changed
    assert (twice.follows.follows_added, twice.follows.follows_unchanged, twice.papers_known) == (0, 3, N)
    assert (twice.papers_recorded, twice.digests_recorded) == (0, 0)
    assert table_counts(target) == before


def test_history_of_papers_this_library_lacks_stays_in_the_file(db: Database, target: Database) -> None:
    source_subscription(db)
    doc = export_subscription(db, ADDRESS)
    paper_records.save_versions(target, dc_papers()[:15], novelty=Novelty.HISTORY)
    _, done = import_subscription(target, dumps(doc).encode())
    assert (done.papers_recorded, done.digests_recorded, done.papers_missing) == (15, 2, N - 15)
    assert len(export_subscription(target, ADDRESS)["received"]) == 15


def test_a_newsletter_issue_does_not_copy_a_paper_the_reader_received(
    sqlite_store: Database, tmp_path: Path
) -> None:
    """The ledger's history keeps an imported reader from getting a paper again through a newsletter."""
    source_subscription(sqlite_store)
    doc = export_subscription(sqlite_store, ADDRESS)
    for target in migrated_store(f"sqlite:///{tmp_path}/target.db"):
        letter = newsletters.create(
            target, "systems", "Systems", ["cat:cs.DC"], schedule="daily 08:00", timezone="UTC", now=T0
        )
        paper_records.save_versions(target, dc_papers(), now=T0 + timedelta(hours=1))
        match_new(target, now=T0 + timedelta(hours=1))
        assert (
            match_records.expand_matches(target, now=T0 + timedelta(hours=1)) == N
        )  # the newsletter's, waiting
        _, done = import_subscription(target, dumps(doc).encode())
        assert done.newsletters_joined == 1 and done.papers_recorded == N
        issue = newsletter_records.open_issue(target, letter.id or 0, now=T0 + timedelta(hours=2))
        assert issue is not None and issue.items == N and issue.copies == 0
        subscriber = subscriber_records.get_subscriber(target, ADDRESS)
        assert subscriber is not None and ledger_records.pending_matches(target, subscriber.id or 0) == []


# -- an address that exists already ------------------------------------------------------------------------


def test_an_existing_address_with_other_settings_is_refused_unless_merge_or_replace(
    db: Database, target: Database
) -> None:
    source_subscription(db)
    data = dumps(export_subscription(db, ADDRESS)).encode()
    newsletters.create(target, "systems", "Systems", ["cat:cs.OS"], schedule="daily 08:00", timezone="UTC")
    newsletters.create(target, "other", "Other", ["cat:cs.OS"], schedule="daily 08:00", timezone="UTC")
    follow(target, ADDRESS, "cat:cs.OS", schedule="daily 07:00")
    follow(target, ADDRESS, "cat:cs.DC", instant=True)
    here = subscriber_records.get_subscriber(target, ADDRESS)
    assert here is not None and here.id is not None
    newsletters.join(target, "other", here)
    subscriber_records.unsubscribe(target, here.id, reason="asked to stop here")
    paper_records.save_versions(target, dc_papers(), novelty=Novelty.HISTORY)
    before = (table_counts(target), settings_of(target, ADDRESS), follows_state(target, ADDRESS))

    with pytest.raises(SubscriptionExists) as refused:
        import_subscription(target, data)
    assert refused.value.differences == (
        "schedule: 'daily 07:00' here, 'weekly mon 09:00' in the file",
        "timezone: 'UTC' here, 'Asia/Shanghai' in the file",
        "language: None here, 'zh' in the file",
        "heartbeat: False here, True in the file",
        "follows: 1 here only, 2 in the file only, 1 with other options",
        "newsletters: 1 here only, 1 in the file only",
    )
    assert (table_counts(target), settings_of(target, ADDRESS), follows_state(target, ADDRESS)) == before

    _, merged = import_subscription(target, data, mode=Mode.MERGE)
    assert not merged.created and merged.settings_changed and merged.status == "unsubscribed"
    assert merged.status_in_file == "active"
    assert settings_of(target, ADDRESS) == ("unsubscribed", "weekly mon 09:00", "Asia/Shanghai", "zh", True)
    assert [(q, r, i) for q, _, r, i in follows_state(target, ADDRESS)] == [
        ("cat:cs.OS", True, False),  # kept: merging removes nothing
        ("cat:cs.DC", True, False),  # the file's options
        ('au:"Li, Zeng" OR ti:"policy lag"', False, False),
        ("id:2411.17700", True, True),
    ]
    assert [n.name for n in newsletter_records.newsletters_of(target, here.id)] == ["other", "systems"]
    assert merged.papers_recorded == N

    _, replaced = import_subscription(target, data, mode=Mode.REPLACE)
    assert (replaced.follows_removed, replaced.newsletters_left, replaced.papers_known) == (1, 1, N)
    assert follows_state(target, ADDRESS) == follows_state(db, ADDRESS)
    assert [n.name for n in newsletter_records.newsletters_of(target, here.id)] == ["systems"]
    assert settings_of(target, ADDRESS)[0] == "unsubscribed"  # the status is never changed by a file
    # Now equal to the file: the default accepts it (a re-import).
    _, again = import_subscription(target, data)
    assert not again.settings_changed and again.follows.follows_unchanged == 3


def test_a_failure_while_storing_leaves_nothing_behind(
    sqlite_store: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transaction: a failure after the subscriber, follows and memberships were written undoes them."""
    import core.people.subscription_records

    source_subscription(sqlite_store)
    data = dumps(export_subscription(sqlite_store, ADDRESS)).encode()

    def broken(*args: object) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(core.people.subscription_records, "_record_history", broken)
    for target in migrated_store(f"sqlite:///{tmp_path}/target.db"):
        newsletters.create(
            target, "systems", "Systems", ["cat:cs.OS"], schedule="daily 08:00", timezone="UTC"
        )
        before = table_counts(target)
        with pytest.raises(RuntimeError):
            import_subscription(target, data)
        assert table_counts(target) == before and subscriber_records.get_subscriber(target, ADDRESS) is None


# -- the document's checks ---------------------------------------------------------------------------------


def edited(path: str, value: Any) -> bytes:
    """The good document with the value at ``path`` (``follows.0.query``) replaced, or removed for DROP."""
    doc = good_document()
    *parents, last = path.split(".")
    holder: Any = doc
    for part in parents:
        holder = holder[int(part)] if isinstance(holder, list) else holder[part]
    if value is DROP:
        del holder[last]
    else:
        holder[int(last) if isinstance(holder, list) else last] = value
    return json.dumps(doc).encode()


DROP = object()


def test_the_good_document_reads_in_the_stores_spelling() -> None:
    checked = read_document(json.dumps(good_document()).encode())
    assert checked.address == ADDRESS and checked.language is None and checked.newsletters == ("ml-weekly",)
    assert [(f.query, f.canonical, f.revisions) for f in checked.follows] == [
        ("cat:cs.DC", "cat:cs.DC", True)
    ]
    assert checked.received[0].sent_at == datetime(2026, 11, 30, 6, 0, 2, tzinfo=UTC)
    assert checked.version == 2 and checked.learned is not None and checked.learned.recommend == 5
    assert [(v.arxiv_id, v.version, v.value, v.voted_at) for v in checked.learned.votes] == [
        ("2611.08864", 2, 1, datetime(2026, 11, 30, 9, 0, tzinfo=UTC)),
        ("2611.08865", 1, -1, datetime(2026, 11, 30, 1, 1, tzinfo=UTC)),
    ]
    assert [(e.key, e.arxiv_id, e.version) for e in checked.learned.library] == [
        ("2306.03564", "2306.03564", 2),
        ("doi:10.1/x", None, None),
    ]
    spelled = edited("schedule", "Weekly Monday 9:00")
    assert read_document(spelled).schedule == "weekly mon 09:00"


@pytest.mark.parametrize(
    ("data", "key", "problem"),
    [
        (b"\xff{}", "document", "not UTF-8 (byte 1)"),
        (b'{"format": ', "document", "not JSON: Expecting value at line 1 column 12"),
        (b"[]", "document", "not a JSON object but an array"),
        (
            b'{"address": "console:a", "query": "x"}\n{"address": "console:b", "query": "y"}\n',
            "document",
            "Extra data at line 2 column 1; a follows file, one JSON object per line, is imported with",
        ),
        (b'{"address": "console:a", "query": "x"}', "format", "is missing, not 'papertrail-subscription'"),
        (b'{"format": "a", "format": "b"}', "document", "key 'format' given twice"),
        (edited("format", "papertrail-follows"), "format", "not a PaperTrail subscription file"),
        (edited("format", DROP), "format", "is missing"),
        (
            edited("version", 3),
            "version",
            "3 is newer than 2, the newest version this PaperTrail reads; upgrade PaperTrail",
        ),
        (edited("version", 0), "version", "0 is no version of this format (1 to 2); export it again"),
        (edited("version", "1"), "version", 'must be a whole number such as 2, not "1"'),
        (edited("version", True), "version", "must be a whole number"),
        (edited("colour", "red"), "colour", "unknown key; the keys of version 2 are: format, version"),
        (edited("votes", DROP), "votes", "missing; the keys of version 2 are"),
        (edited("recommend", DROP), "recommend", "missing"),
        (edited("received", DROP), "received", "missing"),
        (edited("exported_at", "yesterday"), "exported_at", "is not an ISO 8601 time with its offset"),
        (edited("exported_at", "2026-12-01T08:00:00"), "exported_at", "with its offset"),
        (edited("address", "ada@example.org"), "address", "invalid address"),
        (edited("address", 5), "address", "must be a string, not 5"),
        (edited("address", "newsletter:ml"), "address", "papertrail newsletter create"),
        (
            edited("status", "gone"),
            "status",
            "'gone' is not one of: active, paused, unsubscribed, unconfirmed",
        ),
        (edited("schedule", "hourly"), "schedule", "invalid schedule: cannot read schedule 'hourly'"),
        (edited("timezone", "Mars/Base"), "timezone", "unknown timezone 'Mars/Base'"),
        (edited("language", "fr"), "language", "unknown language 'fr'"),
        (edited("language", 1), "language", "must be a string, not 1"),
        (edited("heartbeat", "yes"), "heartbeat", 'must be true or false, not "yes"'),
        (edited("newsletters", "ml-weekly"), "newsletters", "must be an array, not a string"),
        (edited("newsletters.0", "ML Weekly"), "newsletters[0]", "is not a newsletter name"),
        (edited("newsletters", ["a", "a"]), "newsletters[1]", "'a' is listed twice (also newsletters[0])"),
        (edited("follows.0", "cat:cs.DC"), "follows[0]", "must be an object, not a string"),
        (edited("follows.0.query", "ti:(graph"), "follows[0]", "invalid query: expected a word"),
        (edited("follows.0.query", DROP), "follows[0]", "missing key 'query'"),
        (edited("follows.0.instant", "yes"), "follows[0]", "'instant' must be true or false"),
        (edited("follows.0.schedule", "instant"), "follows[0].schedule", "unknown key; a follow has query"),
        (
            edited("follows", [{"query": "cat:cs.DC"}, {"query": "cat:cs.dc", "instant": True}]),
            "follows[1]",
            "same follow as follows[0] with other new_only/instant options",
        ),
        (edited("received.0", []), "received[0]", "must be an object, not an array"),
        (
            edited("received.0.arxiv_id", "2611.08864v2"),
            "received[0].arxiv_id",
            "not an arXiv id without version",
        ),
        (edited("received.0.version", 0), "received[0].version", "must be a version number from 1, not 0"),
        (edited("received.0.digest", "17"), "received[0].digest", 'must be a digest number from 1, not "17"'),
        (edited("received.0.title", None), "received[0].title", "must be a string, not null"),
        (edited("received.0.sent_at", DROP), "received[0].sent_at", "missing; a received paper has arxiv_id"),
        (edited("received.0.colour", "red"), "received[0].colour", "unknown key"),
        (
            edited("recommend", 0),
            "recommend",
            "must be null (off) or the recommendations per digest, 1 to 20",
        ),
        (edited("recommend", 21), "recommend", "1 to 20, not 21"),
        (edited("recommend", True), "recommend", "1 to 20, not true"),
        (edited("recommend", "5"), "recommend", '1 to 20, not "5"'),
        (edited("votes", {}), "votes", "must be an array, not an object"),
        (edited("votes.0", 1), "votes[0]", "must be an object, not a number"),
        (edited("votes.0.value", 2), "votes[0].value", "must be 1 (liked) or -1 (disliked), not 2"),
        (edited("votes.0.value", True), "votes[0].value", "not true"),
        (edited("votes.0.value", "1"), "votes[0].value", 'not "1"'),
        (
            edited("votes.1.voted_at", DROP),
            "votes[1].voted_at",
            "missing; a vote has arxiv_id, version, value",
        ),
        (edited("votes.0.liked", True), "votes[0].liked", "unknown key; a vote has arxiv_id, version"),
        (edited("votes.0.arxiv_id", "2611.08864v2"), "votes[0].arxiv_id", "not an arXiv id without version"),
        (edited("votes.0.version", None), "votes[0].version", "must be a version number from 1, not null"),
        (edited("votes.1.voted_at", "today"), "votes[1].voted_at", "is not an ISO 8601 time"),
        (
            edited(
                "votes.1",
                {"arxiv_id": "2611.08864", "version": 2, "value": -1, "voted_at": "2026-12-01T08:00Z"},
            ),
            "votes[1]",
            "2611.08864v2 is voted on twice (also votes[0])",
        ),
        (edited("library", None), "library", "must be an array, not null"),
        (edited("library.1", "doi:10.1/x"), "library[1]", "must be an object, not a string"),
        (
            edited("library.0.doi", "10.1/x"),
            "library[0].doi",
            "unknown key; a library entry has key, arxiv_id",
        ),
        (edited("library.1.abstract", DROP), "library[1].abstract", "missing; a library entry has key"),
        (edited("library.0.key", " "), "library[0].key", "must not be empty"),
        (edited("library.0.key", "k" * 301), "library[0].key", "301 characters; a key has at most 300"),
        (
            edited("library.1.key", "2306.03564"),
            "library[1].key",
            "'2306.03564' is listed twice (also library[0])",
        ),
        (edited("library.0.title", None), "library[0].title", "must be a string, not null"),
        (
            edited("library.0.version", None),
            "library[0].version",
            "is null but arxiv_id is not: a seed has both",
        ),
        (edited("library.1.arxiv_id", "2306.03564"), "library[1].version", "is null but arxiv_id is not"),
        (edited("library.1.version", 1), "library[1].arxiv_id", "is null but version is not"),
        (edited("library.0.arxiv_id", "arXiv:2306.03564"), "library[0].arxiv_id", "not an arXiv id"),
        (edited("library.0.version", 0), "library[0].version", "must be a version number from 1, not 0"),
    ],
)
def test_a_broken_document_is_refused_naming_the_key(data: bytes, key: str, problem: str) -> None:
    with pytest.raises(DocumentError) as refused:
        read_document(data)
    assert refused.value.key == key and problem in refused.value.problem, str(refused.value)


def test_twice_received_paper_and_oversized_documents_are_refused() -> None:
    doc = good_document()
    doc["received"].append(dict(doc["received"][0], digest=18))
    with pytest.raises(
        DocumentError, match=r"received\[1\]: 2611.08864v2 is listed twice \(also received\[0\]\)"
    ):
        read_document(json.dumps(doc).encode())
    with pytest.raises(DocumentError, match="larger than 67,108,864 bytes"):
        read_document(b" " * (64 * 1024 * 1024 + 1))


def _cpu_seconds(data: bytes) -> float:
    """The least CPU time of three reads of ``data``, each refused (the least: the machine is shared)."""
    times = []
    for _ in range(3):
        start = time.process_time()
        with pytest.raises(DocumentError):
            read_document(data)
        times.append(time.process_time() - start)
    return min(times)


def _many_keys(n: int) -> bytes:
    return ("{" + ",".join(f'"k{i}": 0' for i in range(n)) + f', "k{n - 1}": 1}}').encode()


# Timed: in `make test-slow` only, where a loaded machine cannot fail the everyday suite.
@pytest.mark.slow
def test_an_object_of_many_keys_is_refused_in_linear_time() -> None:
    """A top-level object of 10,000 and 40,000 keys, the last given twice: 4x the keys costs well under
    the 16x a check per key pair would (it took 1.5 s and 23 s)."""
    small, large = _cpu_seconds(_many_keys(10_000)), _cpu_seconds(_many_keys(40_000))
    assert large < 10 * max(small, 0.001), (small, large)


def test_an_object_of_many_keys_is_refused_by_the_count() -> None:
    with pytest.raises(DocumentError) as refused:
        read_document(_many_keys(40_000))
    assert refused.value.key == "document" and str(refused.value) == (
        f"document: an object with 40,001 keys; this format has at most {MAX_OBJECT_KEYS} in one object; "
        "this is not a subscription file"
    )


def test_a_list_longer_than_any_subscription_is_refused_by_its_length() -> None:
    """Counted before any entry is checked: the entries here are not even objects."""
    doc = good_document()
    doc["received"] = [0] * (MAX_RECEIVED + 1)
    with pytest.raises(DocumentError) as refused:
        read_document(json.dumps(doc).encode())
    assert (
        str(refused.value)
        == f"received: {MAX_RECEIVED + 1:,} received papers; a file holds at most {MAX_RECEIVED:,}"
    )
    doc = good_document()
    doc["follows"] = [0] * (MAX_FOLLOWS + 1)
    with pytest.raises(DocumentError, match=r"^follows: 100,001 follows; a file holds at most 100,000$"):
        read_document(json.dumps(doc).encode())


def _deep(key: str, depth: int, closed: bool = True) -> bytes:
    """The good document with ``key``'s value replaced by arrays ``depth`` deep (cut off unless closed)."""
    return edited(key, "DEEP").replace(b'"DEEP"', b"[" * depth + (b"]" * depth if closed else b""))


def test_cli_refuses_a_document_nested_too_deeply_and_stores_nothing(
    db: Database, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No RecursionError traceback (exit 1): a clear refusal, exit 2, nothing stored; on both databases."""
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", db_url)
    before = table_counts(db)
    path = tmp_path / "deep.json"
    for data in (_deep("heartbeat", 100_000), _deep("follows", 65), _deep("received", 5_000, closed=False)):
        path.write_bytes(data)
        code, out, err = invoke("import", "subscription", str(path))
        assert code == 2 and out == "" and "Traceback" not in err, err
        assert f"{path}: document: nested too deeply (more than 64 arrays or objects" in err
        assert "nothing imported" in err
        assert table_counts(db) == before and subscriber_records.get_subscriber(db, ADDRESS) is None
    path.write_bytes(_deep("follows", 63))  # within the limit: read, and refused for what it is
    code, _, err = invoke("import", "subscription", str(path))
    assert code == 2 and "follows[0]: must be an object, not an array" in err


def test_a_refused_document_stores_nothing(db: Database) -> None:
    before = table_counts(db)
    with pytest.raises(DocumentError):
        import_subscription(db, edited("received.0.version", -1))
    assert table_counts(db) == before and subscriber_records.get_subscriber(db, ADDRESS) is None


# -- OPML ----------------------------------------------------------------------------------------------------


def outlines(text: str) -> list[dict[str, str]]:
    root = ET.fromstring(text.encode())
    assert root.tag == "opml" and root.get("version") == "2.0"
    assert root.find("head/title") is not None and root.find("head/dateCreated") is not None
    return [dict(o.attrib) for o in root.iterfind("body/outline")]


def test_opml_lists_the_private_feed_and_one_public_feed_per_follow(sqlite_store: Database) -> None:
    settings = Settings(secret_key=KEY, public_url="https://papers.example.org/")
    follow(sqlite_store, ADDRESS, "cat:cs.DC")
    follow(sqlite_store, ADDRESS, 'au:"Zeng Li" ti:"a & <b>"')
    subscriber = subscriber_records.get_subscriber(sqlite_store, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    queries = [f.query for f in subscriber_records.follows_of(sqlite_store, subscriber.id)]

    # Without a private feed URL (no secret key to sign one), only the public feeds.
    listed = outlines(opml(settings, subscriber, queries, private=None, now=T0))
    assert [o["xmlUrl"] for o in listed] == [
        "https://papers.example.org/feeds?q=cat%3Acs.DC",
        "https://papers.example.org/feeds?q=au%3A%22Zeng+Li%22+ti%3A%22a+%26+%3Cb%3E%22",
    ]
    assert listed[1]["text"] == 'PaperTrail: au:"Zeng Li" ti:"a & <b>"' and listed[1]["type"] == "rss"

    # The private feed's URL is the one core.delivery.feeds makes (drawing the nonce), first, titled in
    # Chinese.
    private = private_feed_url(sqlite_store, settings, subscriber)
    assert private is not None and private.startswith("https://papers.example.org/feeds/private/")
    subscriber = subscriber_records.update_subscriber(sqlite_store, subscriber.id, language="zh")
    listed = outlines(opml(settings, subscriber, queries, private=private, now=T0))
    assert listed[0]["xmlUrl"] == private and listed[0]["title"] == "PaperTrail：你的摘要"
    assert len(listed) == 3 and all(o["htmlUrl"] == "https://papers.example.org/" for o in listed)
    assert private_feed_url(sqlite_store, Settings(), subscriber) is None  # nothing to sign with


# -- the manage page's downloads ---------------------------------------------------------------------------


def test_manage_page_downloads_are_token_checked_and_not_cached(db: Database) -> None:
    source_subscription(db)
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    subscriber_records.update_subscriber(db, subscriber.id, feed_nonce="n0nce")
    manage = tokens.sign(KEY, tokens.MANAGE, ADDRESS)
    web = client_for(db, public_url="https://papers.example.org")

    page = web.get(f"/manage/{manage}")
    assert (
        f'href="/manage/{manage}/export.json"' in page.text
        and f'href="/manage/{manage}/feeds.opml"' in page.text
    )
    assert "下载你的订阅（JSON）" in web.get(f"/manage/{manage}?lang=zh").text

    got = web.get(f"/manage/{manage}/export.json")
    assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
    assert got.headers["content-disposition"] == 'attachment; filename="papertrail-subscription.json"'
    assert got.headers["cache-control"] == "no-store" and got.headers["referrer-policy"] == "no-referrer"
    assert comparable(got.json()) == comparable(export_subscription(db, ADDRESS))
    assert read_document(got.content).address == ADDRESS  # what import subscription reads

    feeds = web.get(f"/manage/{manage}/feeds.opml")
    assert feeds.status_code == 200 and feeds.headers["cache-control"] == "no-store"
    assert feeds.headers["content-disposition"] == 'attachment; filename="papertrail-feeds.opml"'
    listed = outlines(feeds.text)
    token = tokens.sign(KEY, tokens.FEED, tokens.feed_subject(ADDRESS, "n0nce"))
    assert [o["xmlUrl"] for o in listed] == [f"https://papers.example.org/feeds/private/{token}"] + [
        query_feed_url("https://papers.example.org", q) for q, *_ in follows_state(db, ADDRESS)
    ]

    forged = tokens.sign("another key", tokens.MANAGE, ADDRESS)
    wrong_purpose = tokens.sign(KEY, tokens.UNSUBSCRIBE, ADDRESS)
    nobody = tokens.sign(KEY, tokens.MANAGE, "email:nobody@example.org")
    for suffix in ("export.json", "feeds.opml"):
        for token_, status in ((forged, 400), (wrong_purpose, 400), ("garbage", 400), (nobody, 404)):
            response = web.get(f"/manage/{token_}/{suffix}")
            assert response.status_code == status, (suffix, token_)
            assert "content-disposition" not in response.headers and ADDRESS not in response.text
            assert response.headers["cache-control"] == "no-store"
        keyless = client_for(db, secret_key=None).get(f"/manage/{manage}/{suffix}")
        assert keyless.status_code == 404 and "not enabled" in keyless.text


# -- the command line ----------------------------------------------------------------------------------------


def test_cli_round_trip_and_exit_codes(
    two_servers: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = two_servers
    assert (
        invoke("follow", ADDRESS, "cat:cs.DC", "--schedule", "weekly mon 09:00", "--language", "zh")[0] == 0
    )
    assert invoke("follow", ADDRESS, 'ti:"policy lag"', "--new-only", "--instant")[0] == 0
    code, stdout, _ = invoke("export", "subscription", ADDRESS)
    assert code == 0 and json.loads(stdout)["follows"][1] == {
        "query": 'ti:"policy lag"',
        "new_only": True,
        "instant": True,
    }
    path = tmp_path / "ada.json"
    code, stdout, _ = invoke("export", "subscription", ADDRESS, "--output", str(path))
    assert code == 0 and "2 follows, 0 received papers, 0 votes, 0 library entries written to" in stdout
    assert not path.with_name("ada.json.partial").exists()
    assert invoke("export", "follows")[0] == 0  # the follows file's command is still there

    assert invoke("export", "subscription", "email:nobody@example.org")[0] == 1
    code, _, stderr = invoke("export", "subscription", "ada@example.org")
    assert code == 2 and "ada@example.org" in stderr
    assert invoke("export", "subscription", "newsletter:ml")[0] == 2
    assert invoke("export", "opml", "email:nobody@example.org")[0] == 1
    code, stdout, stderr = invoke("export", "opml", ADDRESS)
    assert code == 0 and len(outlines(stdout)) == 2 and "PAPERTRAIL_SECRET_KEY is not set" in stderr

    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", target)
    assert invoke("import", "subscription", str(tmp_path / "missing.json"))[0] == 2
    assert invoke("import", "subscription", str(path), "--merge", "--replace")[0] == 2
    broken = tmp_path / "broken.json"
    broken.write_bytes(path.read_bytes().replace(b'"weekly mon 09:00"', b'"hourly"'))
    code, _, stderr = invoke("import", "subscription", str(broken))
    assert code == 2 and "schedule: invalid schedule" in stderr and "nothing imported" in stderr
    assert invoke("follows", ADDRESS)[0] == 1  # nothing stored

    code, stdout, _ = invoke("import", "subscription", "-", stdin=path.read_bytes())
    assert code == 0, stdout
    assert "created (active, weekly mon 09:00, UTC); follows: 2 added" in stdout
    assert invoke("import", "subscription", str(path))[0] == 0  # the same file again: accepted, unchanged
    assert invoke("schedule", ADDRESS, "daily 07:00")[0] == 0
    code, _, stderr = invoke("import", "subscription", str(path))
    assert code == 1 and "with other settings (schedule: 'daily 07:00' here" in stderr and "--merge" in stderr
    code, stdout, _ = invoke("import", "subscription", str(path), "--replace")
    assert code == 0 and "updated" in stdout
    code, stdout, _ = invoke("export", "subscription", ADDRESS)
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", source)
    assert comparable(json.loads(stdout)) == comparable(
        json.loads(invoke("export", "subscription", ADDRESS)[1])
    )


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("paused", "paused on the server it was exported from"),
        ("unsubscribed", "unsubscribed on the server it was exported from"),
        ("unconfirmed", "waiting for confirmation"),
    ],
)
def test_a_new_subscriber_gets_the_files_status(sqlite_store: Database, status: str, reason: str) -> None:
    """A reader who stopped, or never confirmed, on the old server is not made active by the move."""
    doc = json.loads(edited("status", status))
    import_subscription(sqlite_store, json.dumps(doc).encode())
    subscriber = subscriber_records.get_subscriber(sqlite_store, ADDRESS)
    assert subscriber is not None and (subscriber.status, subscriber.status_reason) == (status, reason)
    assert subscriber_records.active_follows(sqlite_store) == []  # nothing of it is matched
