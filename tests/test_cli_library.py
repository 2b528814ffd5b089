"""``papertrail import library ADDRESS FILE`` (papertrail/cli/library.py) over the recorded arXiv day, on
SQLite and PostgreSQL: every format of tests/corpus/library, the arXiv API over loopback (recorded answers)
for ids the day does not hold, broken files, refused files and the exit codes of the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.db import Database
from core.follows import subscriber_records
from core.papers import paper_records
from core.taste import taste_records
from papertrail.cli.app import app
from tests.cli_helpers import invoke
from tests.servers import Reply, feed_server
from tests.support.library_files import BODIES, LIBRARY, _reader

ADDRESS = "email:ada@example.org"
# The one paper of each file the recorded day does not hold, and arXiv's recorded answer for it.
LOOKED_UP = {
    "zotero.bib": "quant-ph/0201082",
    "zotero.ris": "quant-ph/0201082",
    "jabref.bib": "astro-ph/0601001",
    "zotero.json": "astro-ph/0601001",
}
ANSWERS = {
    "quant-ph/0201082": "id_quant-ph_0201082v1_*.xml",
    "astro-ph/0601001": "id_astro-ph_0601001_*.xml",
}
SUMMARY = re.compile(
    r"^(?P<name>.+) \((?P<format>BibTeX|RIS|CSL-JSON)\): (?P<entries>\d+) entr(?:y|ies); (?P<used>\d+) used"
    r"(?:: (?P<how>[^;]+))?; (?P<added>\d+) new$"
)


def _url(db: Database) -> str:
    return db.engine.url.render_as_string(hide_password=False)


@pytest.fixture
def cli_store(db: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The recorded day and Ada in ``store``, which the command line opens; no retries of the arXiv API."""
    _reader(db)
    monkeypatch.setenv("PAPERTRAIL_DATABASE_URL", _url(db))
    monkeypatch.setenv("PAPERTRAIL_HTTP_RETRIES", "0")
    return db


def _counts(out: str) -> dict[str, str]:
    found = SUMMARY.match(out.splitlines()[0])
    assert found is not None, out
    return found.groupdict()


def _seeds(db: Database) -> int:
    subscriber = subscriber_records.get_subscriber(db, ADDRESS)
    assert subscriber is not None and subscriber.id is not None
    return taste_records.vote_counts(db, subscriber.id)[2]


@pytest.mark.parametrize(
    "name",
    ["zotero.bib", "jabref.bib", "mendeley.bib", "zotero.ris", "endnote.ris", "scholar.ris", "zotero.json"],
)
def test_every_format_is_imported_and_counted(
    cli_store: Database, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    missing = LOOKED_UP.get(name)
    body = next(BODIES.glob(ANSWERS[missing])).read_bytes() if missing else b""
    with feed_server(Reply(200, body)) as api:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_API_URL", api.url)
        code, out, err = invoke("import", "library", ADDRESS, str(LIBRARY / name))
        assert code == 0, err
        counts = _counts(out)
        assert counts["name"] == str(LIBRARY / name)
        assert counts["format"] == {"bib": "BibTeX", "ris": "RIS", "json": "CSL-JSON"}[name.rsplit(".", 1)[1]]
        used, added = int(counts["used"]), int(counts["added"])
        # Every entry is used or listed, one line each, under "not used:".
        unused = [line for line in out.splitlines()[2:]]
        assert int(counts["entries"]) == used + len(unused)
        assert ("not used:" in out.splitlines()) == bool(unused)
        assert all(line.startswith(f"{LIBRARY / name}:") for line in unused)
        # The parts add up to the used entries; the seeds are stored.
        how = counts["how"] or ""
        assert sum(int(n) for n in re.findall(r"(\d+) ", how)) == used > 0
        assert "stored paper" in how and added == used == _seeds(cli_store)
        if missing:
            assert "1 looked up on arXiv" in how and paper_records.versions_of(cli_store, missing)
            assert f"id_list={missing}" in api.paths[0]
        else:
            assert not api.paths
        # Importing again adds nothing, and says so.
        code, again, _ = invoke("import", "library", ADDRESS, str(LIBRARY / name))
    assert code == 0 and _counts(again)["added"] == "0" and _seeds(cli_store) == added


def test_a_broken_file_lists_each_problem_with_its_line_and_uses_the_rest(cli_store: Database) -> None:
    path = LIBRARY / "broken.bib"
    code, out, err = invoke("import", "library", ADDRESS, str(path))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"{path} (BibTeX): 6 entries; 2 used: 2 stored papers; 2 new"
    assert lines[1:] == [
        "not used:",
        f"{path}:12: entry Tang2024: not valid BibTeX: a brace or a quote is not closed",
        f"{path}:20: entry Tekin2024a: duplicate of entry Tekin2024 (line 3)",
        f"{path}:28: entry Li2024: no arXiv id, DOI or title",
        f"{path}:33: not valid BibTeX: the brace after @type is missing",
    ]
    assert _seeds(cli_store) == 2


def test_a_csl_file_nested_too_deeply_is_refused_and_nothing_stored(
    cli_store: Database, tmp_path: Path
) -> None:
    """The shared limit of untrusted JSON (core.json_input): one item 65 arrays deep refuses the file."""
    path = tmp_path / "deep.json"
    path.write_bytes(b'[{"type": "article", "title": "A", "note": ' + b"[" * 65 + b"]" * 65 + b"}]")
    code, out, err = invoke("import", "library", ADDRESS, str(path))
    assert (code, out) == (2, "") and "Traceback" not in err
    assert "the file is nested too deeply (more than 64 arrays or objects inside each other)" in err
    assert _seeds(cli_store) == 0


def test_an_unreachable_api_names_the_entries_it_leaves_out(
    cli_store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with feed_server(Reply(503, b"busy")) as api:
        monkeypatch.setenv("PAPERTRAIL_ARXIV_API_URL", api.url)
        code, out, _ = invoke("import", "library", ADDRESS, str(LIBRARY / "jabref.bib"))
    assert code == 0 and api.paths
    assert out.splitlines()[0].endswith("5 entries; 4 used: 4 stored papers; 4 new")
    assert out.splitlines()[2].endswith(
        ": entry Gould2006: the arXiv API could not be reached; import the file again in an hour"
    )


def test_stdin_and_the_cap_on_printed_problems(env: Path, tmp_path: Path) -> None:
    assert invoke("follow", ADDRESS, "cat:cs.DC")[0] == 0
    ris = (LIBRARY / "zotero.ris").read_bytes()
    result = CliRunner().invoke(app, ["import", "library", ADDRESS, "-"], input=ris)
    # The recorded day is not stored here: the entries with an abstract are used by their text.
    assert result.exit_code == 0 and result.stdout.startswith("<stdin> (RIS): 4 entries; ")
    many = tmp_path / "many.bib"
    many.write_text("".join(f"@misc{{k{i},\n  note = {{read later}}\n}}\n\n" for i in range(1005)))
    code, out, _ = invoke("import", "library", ADDRESS, str(many))
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"{many} (BibTeX): 1,005 entries; 0 used; 0 new"
    assert len(lines) == 2 + 1000 + 1 and lines[-1] == "... and 5 more entries"
    assert lines[2] == f"{many}:1: entry k0: no arXiv id, DOI or title"


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("console:nobody", "zotero.bib"), 1, "no subscriber console:nobody"),
        (("nobody-at-all", "zotero.bib"), 2, "is not of the form CHANNEL:TARGET"),
        ((ADDRESS, "absent.bib"), 2, "absent.bib is not a file"),
        ((ADDRESS, "README.md"), 2, "README.md: this is not a BibTeX, RIS or CSL-JSON file; export it as"),
        ((ADDRESS, "follows.json"), 2, "the file is JSON but not CSL-JSON"),
        (
            (ADDRESS, "big.bib"),
            2,
            "the file is larger than 5 MB, the most PaperTrail reads; export one collection",
        ),
    ],
)
def test_refusals_say_what_to_do_with_the_exit_codes_of_the_readme(
    env: Path, tmp_path: Path, args: tuple[str, str], code: int, says: str
) -> None:
    assert invoke("follow", ADDRESS, "cat:cs.DC")[0] == 0
    (tmp_path / "follows.json").write_text('[{"address": "console:a", "query": "cat:cs.DC"}]\n')
    (tmp_path / "big.bib").write_bytes(b"@misc{a,\n  title = {x}\n}\n" + b"%" * 5_000_000)
    files = {"zotero.bib": LIBRARY / "zotero.bib", "README.md": LIBRARY / "README.md"}
    address, name = args
    exit_code, out, err = invoke("import", "library", address, str(files.get(name, tmp_path / name)))
    assert (exit_code, out) == (code, "")
    assert says in err and err.startswith("error: ")
    if code == 2 and name not in ("absent.bib", "zotero.bib"):
        assert err.rstrip().endswith("nothing imported")
