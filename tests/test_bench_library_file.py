"""bench/library_file.py runs (small): every hostile text in every format is read, and the rows say so."""

from __future__ import annotations

from bench import library_file


def test_the_hostile_library_bench_runs_small(capsys) -> None:  # type: ignore[no-untyped-def]
    rows = library_file.main(["--size", "20000"])
    texts = {row["text"] for row in rows}
    assert len(texts) == len(library_file.PIECES) + 2  # nested braces and the real export
    assert {row["format"] for row in rows} == {"BibTeX", "RIS", "CSL-JSON"}
    assert all(int(str(row["bytes"])) <= 20_000 for row in rows if row["text"] != "real export (baseline)")
    assert "slowest:" in capsys.readouterr().out
