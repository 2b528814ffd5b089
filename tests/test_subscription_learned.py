"""Version 2 of the subscription file: a reader's votes, library seeds and ``recommend`` travel with the
subscription. The round trip onto a fresh store (SQLite and PostgreSQL) over recorded papers,
votes and seeds on papers the new server lacks, --merge and --replace, version-1 files, the limits, one
transaction, and the command line's summary."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import col

from core.db import Database
from core.follows import subscriber_records
from core.follows.manage import follow
from core.models import DISLIKE, LIKE, LibrarySeed, Subscriber, Version, Vote
from core.papers import paper_records
from core.papers.paper_records import Novelty
from core.people.subscription import exported, import_subscription
from core.people.subscription_file import (
    MAX_LIBRARY,
    MAX_VOTES,
    DocumentError,
    Mode,
    SubscriptionExists,
    dumps,
    read_document,
)
from core.taste import taste_records
from core.taste.taste_records import SeedIn
from core.values import PaperIn
from tests.conftest import migrated_store
from tests.support.subscription_export import (  # noqa: F401  (fixtures)
    ADDRESS,
    comparable,
    good_document,
    invoke,
    target_fixture,
    two_servers_fixture,
)
from tests.support.taste_day import day

T0 = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
TEXT_SEED = SeedIn("doi:10.1103/physrevb.108.125437", None, "A paper known by its text", "Its abstract.")


def revision() -> PaperIn:
    """A recorded paper announced as a revision (v3)."""
    paper = day()[926]
    assert paper.version == 3
    return paper


def version_id(db: Database, paper: PaperIn) -> int:
    with db.session() as session:
        found = session.execute(
            sa.select(col(Version.id)).where(
                col(Version.paper_id) == paper.arxiv_id, col(Version.number) == paper.version
            )
        ).scalar_one()
    return int(found)


def subscriber_id(db: Database, address: str = ADDRESS) -> int:
    subscriber = subscriber_records.get_subscriber(db, address)
    assert subscriber is not None and subscriber.id is not None
    return subscriber.id


def votes_state(db: Database, address: str = ADDRESS) -> list[tuple[str, int, int, datetime]]:
    """(arXiv id, version, value, voted at) of the address's votes, oldest first."""
    views = taste_records.votes_of(db, subscriber_id(db, address))
    return sorted(((v.arxiv_id, v.version, v.value, v.created_at) for v in views), key=lambda v: v[3])


def seeds_state(db: Database, address: str = ADDRESS) -> dict[str, tuple[str | None, int | None, str]]:
    """key -> (arXiv id, version, kept title) of the address's seeds."""
    sid = subscriber_id(db, address)
    with db.session() as session:
        rows = session.execute(
            sa.select(
                col(LibrarySeed.key), col(Version.paper_id), col(Version.number), col(LibrarySeed.title)
            )
            .outerjoin(Version, col(Version.id) == col(LibrarySeed.version_id))
            .where(col(LibrarySeed.subscriber_id) == sid)
        ).all()
    return {key: (paper, number, title) for key, paper, number, title in rows}


def learned_source(db: Database) -> None:
    """Ada on the exporting server: three votes (one on a revision), three library seeds of stored
    papers and one known by its text, and five recommendations a digest."""
    paper_records.save_versions(db, [*day()[:6], revision()], now=T0 - timedelta(days=1))
    follow(db, ADDRESS, "cat:cs.DC", schedule="daily 08:00", timezone="UTC")
    sid = subscriber_id(db)
    assert taste_records.vote(db, sid, revision().arxiv_id, LIKE, now=T0 + timedelta(hours=1)) is not None
    assert taste_records.vote(db, sid, day()[1].arxiv_id, DISLIKE, now=T0 + timedelta(hours=2)) is not None
    assert taste_records.vote(db, sid, day()[2].arxiv_id, LIKE, now=T0 + timedelta(hours=3)) is not None
    seeds = [SeedIn(p.arxiv_id, version_id(db, p)) for p in day()[3:6]] + [TEXT_SEED]
    assert taste_records.add_seeds(db, sid, seeds, now=T0) == 4
    subscriber_records.update_subscriber(db, sid, recommend=5)


# -- the round trip ----------------------------------------------------------------------------------------


def test_votes_seeds_and_recommend_travel_with_the_subscription(db: Database, target: Database) -> None:
    learned_source(db)
    doc = exported(db, ADDRESS, now=T0 + timedelta(days=1)).document
    assert doc["version"] == 2 and doc["recommend"] == 5
    assert doc["votes"] == [
        {"arxiv_id": revision().arxiv_id, "version": 3, "value": 1, "voted_at": "2026-11-30T08:00:00Z"},
        {"arxiv_id": day()[1].arxiv_id, "version": 1, "value": -1, "voted_at": "2026-11-30T09:00:00Z"},
        {"arxiv_id": day()[2].arxiv_id, "version": 1, "value": 1, "voted_at": "2026-11-30T10:00:00Z"},
    ]
    # A seed of a stored paper carries its version and that version's text; a text seed its own text.
    assert doc["library"] == [
        {"key": p.arxiv_id, "arxiv_id": p.arxiv_id, "version": 1, "title": p.title, "abstract": p.abstract}
        for p in day()[3:6]
    ] + [
        {
            "key": TEXT_SEED.key,
            "arxiv_id": None,
            "version": None,
            "title": TEXT_SEED.title,
            "abstract": TEXT_SEED.abstract,
        }
    ]

    # The new server has the revision, day 1, day 3, and day 4 only as v2; not day 2 (voted) nor day 5.
    paper_records.save_versions(
        target, [revision(), day()[1], day()[3], replace(day()[4], version=2)], novelty=Novelty.HISTORY
    )
    _, done = import_subscription(target, dumps(doc).encode(), now=T0 + timedelta(days=2))
    assert done.created and done.learned_in_file and done.learned_changed
    assert (done.votes_added, done.votes_changed, done.votes_missing) == (2, 0, 1)
    assert (done.library_added, done.library_as_text) == (4, 1)
    assert done.subscriber_id == subscriber_id(target)

    theirs = subscriber_records.get_subscriber(target, ADDRESS)
    assert theirs is not None and theirs.recommend == 5
    assert votes_state(target) == votes_state(db)[:2]  # the vote on day 2 was skipped
    assert seeds_state(target) == {
        day()[3].arxiv_id: (day()[3].arxiv_id, 1, ""),
        day()[4].arxiv_id: (day()[4].arxiv_id, 2, ""),  # the paper's version this server has
        day()[5].arxiv_id: (None, None, day()[5].title),  # kept by its text
        TEXT_SEED.key: (None, None, TEXT_SEED.title),
    }
    # The model learns from every seed and the like: the unknown paper by its text.
    texts = taste_records.training_texts(target, subscriber_id(target), implicit=0)
    assert {t.title for t in texts.positives} == {revision().title, TEXT_SEED.title} | {
        p.title for p in day()[3:6]
    }
    assert [t.arxiv_id for t in texts.negatives] == [day()[1].arxiv_id]

    again = exported(target, ADDRESS, now=T0 + timedelta(days=1)).document
    library = doc["library"][:4]
    library[1] = dict(library[1], version=2)
    library[2] = dict(library[2], arxiv_id=None, version=None)
    assert comparable(again) == {**comparable(doc), "votes": doc["votes"][:2], "library": library}

    # The same file again: accepted (what could be stored is there), nothing written.
    _, twice = import_subscription(target, dumps(doc).encode(), now=T0 + timedelta(days=3))
    assert not twice.created and not twice.settings_changed and not twice.learned_changed
    assert (twice.votes_added, twice.library_added, twice.votes_missing) == (0, 0, 1)
    assert votes_state(target) == votes_state(db)[:2]


# -- an address that exists already ------------------------------------------------------------------------


def learned_document(**changes: Any) -> dict[str, Any]:
    """A version-2 document for Ada with cat:cs.DC daily at 08:00 UTC, English, over recorded papers."""
    doc = good_document()
    doc.update(
        schedule="daily 08:00",
        timezone="UTC",
        language="en",
        newsletters=[],
        received=[],
        recommend=None,
        votes=[
            vote(day()[0], DISLIKE, T0 + timedelta(hours=1)),
            vote(day()[1], LIKE, T0 + timedelta(hours=2)),
            vote(day()[3], LIKE, T0 + timedelta(hours=3)),
            {"arxiv_id": "2611.99999", "version": 1, "value": 1, "voted_at": "2026-11-30T07:00:00Z"},
        ],
        library=[
            {
                "key": day()[4].arxiv_id,
                "arxiv_id": day()[4].arxiv_id,
                "version": 1,
                "title": "",
                "abstract": "",
            },
            {"key": "doi:10.1/x", "arxiv_id": None, "version": None, "title": "Text", "abstract": "Only"},
        ],
    )
    doc.update(changes)
    return doc


def vote(paper: PaperIn, value: int, at: datetime) -> dict[str, Any]:
    return {"arxiv_id": paper.arxiv_id, "version": paper.version, "value": value, "voted_at": at.isoformat()}


def test_merge_keeps_the_newer_vote_and_replace_makes_them_the_files(db: Database) -> None:
    paper_records.save_versions(db, day()[:6], now=T0 - timedelta(days=1))
    follow(db, ADDRESS, "cat:cs.DC", schedule="daily 08:00", timezone="UTC")
    sid = subscriber_id(db)
    subscriber_records.update_subscriber(db, sid, language="en", recommend=3)
    taste_records.vote(
        db, sid, day()[0].arxiv_id, LIKE, now=T0 + timedelta(hours=5)
    )  # after the file's dislike
    taste_records.vote(db, sid, day()[1].arxiv_id, DISLIKE, now=T0)  # before the file's like
    taste_records.vote(db, sid, day()[2].arxiv_id, LIKE, now=T0)  # not in the file
    taste_records.add_seeds(
        db, sid, [SeedIn("title:here only", None, "Here", "only"), SeedIn(day()[4].arxiv_id, None)]
    )
    data = json.dumps(learned_document()).encode()
    before = (votes_state(db), seeds_state(db))

    with pytest.raises(SubscriptionExists) as refused:
        import_subscription(db, data)
    assert refused.value.differences == (
        "recommend: 3 here, None in the file",
        "votes: 1 here only, 1 in the file only, 2 with the other value",
        "library: 1 here only, 1 in the file only",
    )
    assert (votes_state(db), seeds_state(db)) == before

    _, merged = import_subscription(db, data, mode=Mode.MERGE)
    assert (merged.votes_added, merged.votes_changed, merged.votes_kept, merged.votes_removed) == (1, 1, 1, 0)
    assert (merged.votes_missing, merged.library_added, merged.library_removed) == (1, 1, 0)
    assert not merged.settings_changed  # a file with recommendations off keeps them on here
    assert [(a, v, at) for a, _, v, at in votes_state(db)] == [
        (day()[2].arxiv_id, LIKE, T0),  # kept: merging removes nothing
        (day()[1].arxiv_id, LIKE, T0 + timedelta(hours=2)),  # the file's, the newer
        (day()[3].arxiv_id, LIKE, T0 + timedelta(hours=3)),  # added
        (day()[0].arxiv_id, LIKE, T0 + timedelta(hours=5)),  # here's, the newer
    ]
    assert set(seeds_state(db)) == {"title:here only", day()[4].arxiv_id, "doi:10.1/x"}
    assert subscriber_records.get_subscriber(db, ADDRESS).recommend == 3  # type: ignore[union-attr]

    _, replaced = import_subscription(db, data, mode=Mode.REPLACE)
    assert (replaced.votes_added, replaced.votes_changed, replaced.votes_removed) == (0, 1, 1)
    assert (replaced.library_added, replaced.library_removed, replaced.settings_changed) == (0, 1, True)
    assert [(a, v) for a, _, v, _ in votes_state(db)] == [
        (day()[0].arxiv_id, DISLIKE),
        (day()[1].arxiv_id, LIKE),
        (day()[3].arxiv_id, LIKE),
    ]
    assert set(seeds_state(db)) == {day()[4].arxiv_id, "doi:10.1/x"}
    assert subscriber_records.get_subscriber(db, ADDRESS).recommend is None  # type: ignore[union-attr]

    # Now equal to the file: the default accepts it and changes nothing.
    _, again = import_subscription(db, data)
    assert not again.learned_changed and not again.settings_changed and again.votes_missing == 1

    # A file with recommendations on sets them when merging.
    _, on = import_subscription(db, json.dumps(learned_document(recommend=7)).encode(), mode=Mode.MERGE)
    assert on.settings_changed and subscriber_records.get_subscriber(db, ADDRESS).recommend == 7  # type: ignore[union-attr]


def version_1(doc: dict[str, Any]) -> bytes:
    """``doc`` as version 1 wrote it: without recommend, votes and library."""
    doc = {key: value for key, value in doc.items() if key not in ("recommend", "votes", "library")}
    return json.dumps({**doc, "version": 1}).encode()


def test_a_version_1_file_still_imports_and_leaves_votes_and_seeds_alone(db: Database) -> None:
    data = version_1(learned_document())
    checked = read_document(data)
    assert checked.version == 1 and checked.learned is None
    with pytest.raises(DocumentError, match="votes: unknown key; the keys of version 1 are: format"):
        read_document(json.dumps({**json.loads(data), "votes": []}).encode())

    _, created = import_subscription(db, data)  # a new subscriber: nothing learned, recommendations off
    assert (
        created.created
        and not created.learned_in_file
        and subscriber_records.get_subscriber(db, ADDRESS).recommend is None  # type: ignore[union-attr]
    )

    paper_records.save_versions(db, day()[:2], now=T0)
    sid = subscriber_id(db)
    subscriber_records.update_subscriber(db, sid, recommend=4)
    taste_records.vote(db, sid, day()[0].arxiv_id, LIKE, now=T0)
    taste_records.add_seeds(db, sid, [TEXT_SEED])
    before = (votes_state(db), seeds_state(db))
    for mode in Mode:  # the default too: votes and seeds are not compared with a file that has none
        _, done = import_subscription(db, data, mode=mode)
        assert not done.learned_in_file and not done.learned_changed and not done.settings_changed, mode
        assert (votes_state(db), seeds_state(db)) == before
        assert subscriber_records.get_subscriber(db, ADDRESS).recommend == 4  # type: ignore[union-attr]


# -- limits and the one transaction ------------------------------------------------------------------------


def test_documents_over_the_limits_are_refused_and_an_export_keeps_the_newest(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = learned_document()["votes"][0]
    too_many = learned_document(votes=[dict(one, version=n + 1) for n in range(MAX_VOTES + 1)])
    with pytest.raises(DocumentError, match=r"^votes: 10,001 votes; a file holds at most 10,000"):
        read_document(json.dumps(too_many).encode())
    entry = learned_document()["library"][1]
    entries = [dict(entry, key=f"title:{n}") for n in range(MAX_LIBRARY + 1)]
    with pytest.raises(DocumentError, match=r"^library: 5,001 entries; a file holds at most 5,000"):
        read_document(json.dumps(learned_document(library=entries)).encode())
    at_limit = learned_document(votes=too_many["votes"][:MAX_VOTES], library=entries[:MAX_LIBRARY])
    assert len(read_document(json.dumps(at_limit).encode()).learned.votes) == MAX_VOTES  # type: ignore[union-attr]

    import core.people.subscription_records

    learned_source(sqlite_store)
    monkeypatch.setattr(core.people.subscription_records, "MAX_VOTES", 2)
    monkeypatch.setattr(core.people.subscription_records, "MAX_LIBRARY", 3)
    export = exported(sqlite_store, ADDRESS)
    assert (export.votes_left_out, export.library_left_out) == (1, 1)
    assert [v["arxiv_id"] for v in export.document["votes"]] == [day()[1].arxiv_id, day()[2].arxiv_id]
    assert [e["key"] for e in export.document["library"]] == [
        day()[4].arxiv_id,
        day()[5].arxiv_id,
        TEXT_SEED.key,
    ]


def test_a_failure_while_storing_seeds_leaves_no_vote_behind(
    sqlite_store: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import core.people.subscription_records

    learned_source(sqlite_store)
    data = dumps(exported(sqlite_store, ADDRESS).document).encode()

    def broken(*args: object) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(core.people.subscription_records, "_write_seeds", broken)
    for target_store in migrated_store(f"sqlite:///{tmp_path}/target.db"):
        paper_records.save_versions(target_store, day()[:6], novelty=Novelty.HISTORY)
        with pytest.raises(RuntimeError):
            import_subscription(target_store, data)
        with target_store.session() as session:
            counts = [
                session.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                for table in (Subscriber, Vote, LibrarySeed)
            ]
        assert counts == [0, 0, 0]


# -- the command line ----------------------------------------------------------------------------------------


def test_cli_moves_votes_and_seeds_and_says_what_it_skipped(
    two_servers: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, target_url = two_servers
    assert invoke("follow", ADDRESS, "cat:cs.DC")[0] == 0  # creates the source's database
    engine = sa.create_engine(source)
    paper_records.save_versions(Database(engine), day()[:3], now=T0)
    engine.dispose()
    for args in (("like", ADDRESS, day()[0].arxiv_id), ("dislike", ADDRESS, day()[1].arxiv_id)):
        assert invoke(*args)[0] == 0
    for source_store in migrated_store(source):
        taste_records.add_seeds(source_store, subscriber_id(source_store), [TEXT_SEED])
    path = tmp_path / "ada.json"
    code, stdout, stderr = invoke("export", "subscription", ADDRESS, "--output", str(path))
    assert code == 0 and "1 follow, 0 received papers, 2 votes, 1 library entry written to" in stdout, stderr
    import core.people.subscription_file
    import core.people.subscription_records

    monkeypatch.setattr(core.people.subscription_records, "MAX_VOTES", 1)
    monkeypatch.setattr(core.people.subscription_file, "MAX_VOTES", 1)
    code, stdout, stderr = invoke("export", "subscription", ADDRESS)
    assert code == 0 and len(json.loads(stdout)["votes"]) == 1
    assert "note: the 1 oldest vote left out: a file holds the newest 1" in stderr
    monkeypatch.undo()

    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", target_url)
    assert invoke("follow", "console:other", "cat:cs.OS")[0] == 0  # creates the target's database
    engine = sa.create_engine(target_url)
    paper_records.save_versions(
        Database(engine), day()[1:2], now=T0
    )  # the liked paper is not on the new server
    engine.dispose()
    code, stdout, _ = invoke("import", "subscription", str(path))
    assert code == 0, stdout
    assert "votes: 1 added, 0 changed; library: 1 added" in stdout
    assert "note: 1 vote on papers this server has not stored was skipped" in stdout
    code, stdout, _ = invoke("likes", ADDRESS)
    assert code == 0 and "0 likes, 1 dislike" in stdout

    v1 = tmp_path / "v1.json"
    v1.write_bytes(version_1(json.loads(path.read_bytes())))
    code, stdout, _ = invoke("import", "subscription", str(v1), "--replace")
    assert (
        code == 0
        and "note: a version-1 file: votes, library and recommendations here left as they are" in stdout
    )
    assert "votes:" not in stdout and "0 likes, 1 dislike" in invoke("likes", ADDRESS)[1]
