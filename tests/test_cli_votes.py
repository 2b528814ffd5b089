"""``papertrail like / dislike / unvote / likes`` (papertrail/cli/votes.py) on a SQLite file holding papers
of the recorded arXiv day (tests/test_store_taste.py ``day()``), with the exit codes of the README."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from core.db import Database, make_engine
from core.papers import paper_records
from tests.cli_helpers import invoke
from tests.support.taste_day import day

NOW = datetime(2024, 11, 28, 15, tzinfo=UTC)


def stored(env: Path) -> tuple[str, str]:
    """A subscriber (console:me) and 20 recorded papers in the command line's database; two paper ids."""
    assert invoke("follow", "console:me", "cat:cs.DC")[0] == 0  # creates and migrates the database
    engine = make_engine(f"sqlite:///{env}")
    paper_records.save_versions(Database(engine), day()[:20], now=NOW)
    engine.dispose()
    return day()[0].arxiv_id, day()[1].arxiv_id


def test_like_dislike_unvote_and_likes(env: Path) -> None:
    first, second = stored(env)
    title = " ".join(day()[0].title.split())
    version = day()[0].version
    code, out, err = invoke("like", "console:me", first)
    assert (code, out, err) == (0, f"console:me likes {first}v{version}: {title}\n", "")
    code, out, _ = invoke("like", "console:me", f"https://arxiv.org/abs/{first}v{version}")
    assert (code, out) == (0, f"console:me already likes {first}v{version}: {title}\n")
    code, out, _ = invoke("dislike", "console:me", f"arXiv:{first}")
    assert (code, out) == (0, f"console:me dislikes (was like) {first}v{version}: {title}\n")
    assert invoke("like", "console:me", second)[0] == 0

    code, out, _ = invoke("likes", "console:me")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "console:me · 1 like, 1 dislike"
    # Newest first: the like of the second paper, then the dislike of the first.
    assert lines[1].split()[:2] == ["like", f"{second}v{day()[1].version}"]
    assert lines[2].split()[:2] == ["dislike", f"{first}v{version}"]
    assert lines[2].endswith(title)
    code, out, _ = invoke("likes", "console:me", "--limit", "1")
    assert out.splitlines()[-1] == "  … and 1 older vote (--limit shows more)"

    code, out, _ = invoke("unvote", "console:me", first)
    assert (code, out) == (0, f"console:me: vote on {first} taken back\n")
    code, _, err = invoke("unvote", "console:me", first)
    assert code == 1 and f"console:me has no vote on {first}" in err
    assert invoke("unvote", "console:me", second)[0] == 0
    code, out, _ = invoke("likes", "console:me")
    assert out == "console:me · 0 likes, 0 dislikes\n    (no votes)\n"


def test_errors_say_what_to_do_with_the_exit_codes_of_the_readme(env: Path) -> None:
    first, _ = stored(env)
    cases = [
        (("like", "console:me", "cat:cs.DC"), 2, "'cat:cs.DC' is not an arXiv id: write 2306.03564"),
        (("like", "nobody-at-all", first), 2, "is not of the form CHANNEL:TARGET"),
        (("like", "console:nobody", first), 1, "no subscriber console:nobody; add a follow with"),
        (("likes", "console:nobody"), 1, "no subscriber console:nobody"),
        (
            ("dislike", "console:me", "2501.00001"),
            1,
            "PaperTrail has not stored 2501.00001: votes go to papers it has collected; "
            "papertrail follow console:me id:2501.00001 watches it",
        ),
        (("like", "console:me", f"{first}v9"), 1, f"PaperTrail has no v9 of {first}; it has v"),
        (("unvote", "console:me", "x"), 2, "'x' is not an arXiv id"),
    ]
    for args, code, message in cases:
        got, out, err = invoke(*args)
        assert (got, out) == (code, ""), args
        assert message in err.replace("\n", " "), (args, err)
