"""``papertrail recommend ADDRESS [on|off] [--count N]`` and ``papertrail try-recommended ADDRESS`` on a
SQLite file, over the recorded arXiv day; and the recommendations of a one-shot ``papertrail ingest``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.db import Database, make_engine
from core.follows import subscriber_records
from core.follows.index import match_new
from core.models import LIKE, utcnow
from core.papers import paper_records
from core.taste import recommend_records, taste_records
from core.taste.training import retrain
from tests.cli_helpers import invoke
from tests.conftest import BIG_FEED
from tests.servers import Reply, feed_server
from tests.support.likes import LIKES, earlier, later, liked_papers

ADDRESS = "email:ada@example.org"


@pytest.fixture
def cli_store(env: Path) -> Iterator[Database]:
    """The command line's database with Ada (following ti:segmentation) and the recorded day in it."""
    code, _, stderr = invoke("follow", ADDRESS, "ti:segmentation")
    assert code == 0, stderr
    engine = make_engine(f"sqlite:///{env}")
    db = Database(engine)
    now = utcnow()
    paper_records.save_versions(db, earlier(), now=now - timedelta(days=2))
    paper_records.save_versions(db, later(), now=now + timedelta(minutes=1))
    match_new(db, now=now)
    yield db
    engine.dispose()


def like(db: Database, count: int) -> None:
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    for paper in liked_papers(count):
        taste_records.vote(db, subscriber.id, paper.arxiv_id, LIKE)
    retrain(db, subscriber.id)


def test_recommend_shows_turns_on_and_off(cli_store: Database) -> None:
    assert invoke("recommend", ADDRESS) == (
        0,
        "email:ada@example.org: recommendations off; 0 liked, 0 disliked, 0 from a library; no model: it "
        "needs 3 liked papers (votes, or an imported library), and has 0\n",
        "",
    )
    code, _, stderr = invoke("recommend", ADDRESS, "on")
    assert code == 1
    assert "recommendations need at least 3 liked papers; there are 0" in stderr
    like(cli_store, 3)
    assert invoke("recommend", ADDRESS, "on", "--count", "12") == (
        0,
        "email:ada@example.org: recommendations on, up to 12 papers per digest; 3 liked, 0 disliked, 0 "
        "from a library; model trained\n",
        "",
    )
    assert subscriber_records.get_subscriber(cli_store, ADDRESS).recommend == 12  # type: ignore[union-attr]
    code, stdout, _ = invoke("recommend", ADDRESS, "ON")
    assert code == 0 and "up to 5 papers per digest" in stdout
    code, stdout, _ = invoke("recommend", ADDRESS, "off")
    assert code == 0 and "recommendations off; 3 liked" in stdout
    assert subscriber_records.get_subscriber(cli_store, ADDRESS).recommend is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("maybe",), "'maybe' is neither 'on' nor 'off'"),
        (("on", "--count", "21"), "1 to 20, not 21"),
        (("on", "--count", "0"), "1 to 20, not 0"),
        (("off", "--count", "3"), "--count goes with 'on'"),
    ],
)
def test_recommend_refuses_what_it_cannot_read(cli_store: Database, args: tuple[str, ...], said: str) -> None:
    code, _, stderr = invoke("recommend", ADDRESS, *args)
    assert code == 2 and said in stderr


def test_recommend_for_an_unknown_subscriber(cli_store: Database) -> None:
    code, _, stderr = invoke("recommend", "email:nobody@example.org")
    assert code == 1 and "no subscriber email:nobody@example.org" in stderr


def test_try_recommended_lists_the_picks_with_reasons(cli_store: Database) -> None:
    code, _, stderr = invoke("try-recommended", ADDRESS)
    assert code == 1 and "no model: it needs 3 liked papers" in stderr
    like(cli_store, LIKES)
    code, stdout, _ = invoke("try-recommended", ADDRESS, "--limit", "3")
    assert code == 0
    lines = stdout.splitlines()
    picks = [line.split("v1 ", 1)[0] for line in lines if re.match(r"\d{4}\.\d{5}v1 ", line)]
    assert 1 <= len(picks) <= 3
    assert lines[-1] == f"{len(picks)} recommendation{'s' * (len(picks) != 1)} from the last 7 days"
    assert stdout.count("    why: close to ") == len(picks)
    assert not set(picks) & {p.arxiv_id for p in liked_papers()}


def test_a_one_shot_ingest_writes_the_recommendations(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert invoke("follow", ADDRESS, "ti:segmentation")[0] == 0
    engine = make_engine(f"sqlite:///{env}")
    db = Database(engine)
    paper_records.save_versions(db, earlier(), now=utcnow() - timedelta(days=2))
    match_new(db)
    like(db, LIKES)
    assert invoke("recommend", ADDRESS, "on")[0] == 0
    with feed_server(Reply(200, BIG_FEED.read_bytes())) as server:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_RSS_URL", server.url)
        code, stdout, stderr = invoke("ingest")
    assert code == 0, stderr
    recommended = recommend_records.unsent(db, [subscriber_records.get_subscriber(db, ADDRESS).id or 0])  # type: ignore[union-attr]
    assert recommended and f"for subscribers), {_n(recommended)}" in stdout
    engine.dispose()


def _n(counts: dict[int, int]) -> str:
    (count,) = counts.values()
    return f"{count} recommendation{'s' * (count != 1)}"
