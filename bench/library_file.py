"""Benchmark: reading a hostile reference library, CPU seconds per file of the size limit.

docs/recommendations.md promises that a library file of the size limit
(``core.taste.library_file.MAX_FILE_BYTES``, 5 MB) is read in under 10 s of CPU however it is built, since
the reading (``core.taste.library_file.read_library``, what the manage page's upload and ``papertrail
import library`` call) runs in a web process. Each hostile text here (the one title of one entry, the
whole file long) is written in each format (BibTeX, RIS, CSL-JSON) and read once; the CPU time of the
reading (``time.process_time``) is reported with its rate in seconds per MB, next to a real export (the
recorded Zotero BibTeX library repeated to the same size) as the baseline.

The hostile texts: openers without closers (``\\[``, ``\\(``, ``\\begin{equation}``, ``\\cite[``,
``<span``), dollars alone and with a letter, braces nested and left open, backslashes, spaces and tabs
inside a RIS line, accent groups left open. tests/test_tex_linear.py asserts that each grows linearly
(16 KB against 64 KB; 256 KB against 1 MB in ``make test-slow``) with these texts and formats;
tests/test_bench_library_file.py runs this script small.

Usage: python bench/library_file.py [--size 5000000] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.taste.library_file import LibraryFileError, read_library  # noqa: E402

ZOTERO = ROOT / "tests" / "corpus" / "library" / "zotero.bib"
# Room for the entry around the nested braces, so that the file stays within the size.
FRAME = 200

PIECES = {
    "display bracket": "\\[",
    "inline paren": "\\(",
    "equation": "\\begin{equation}",
    "starred environment": "\\begin{align*}",
    "dollars": "$",
    "inline dollars": "$a",
    "open braces": "{",
    "backslashes": "\\",
    "citation options": "\\cite[",
    "rich text": "<span",
    "white space": " \t",
    "accent groups": "{\\'",
}


def _bibtex(title: str) -> bytes:
    return ("@article{key,\n  title = {" + title + "},\n  eprint = {2306.03564}\n}\n").encode()


def _ris(title: str) -> bytes:
    return ("TY  - JOUR\nTI  - " + title + "\nER  - \n").encode()


def _csl(title: str) -> bytes:
    return json.dumps([{"id": "key", "type": "article-journal", "title": title}]).encode()


FORMATS: dict[str, Callable[[str], bytes]] = {"BibTeX": _bibtex, "RIS": _ris, "CSL-JSON": _csl}


def _fill(make: Callable[[str], bytes], piece: str, size: int) -> bytes:
    """``make`` of ``piece`` repeated as often as fits in ``size`` bytes (JSON doubles a backslash)."""
    frame = len(make(""))
    each = (len(make(piece * 100)) - frame) / 100
    return make(piece * int((size - frame - 1) // each) + "x")


def _files(size: int) -> dict[str, dict[str, bytes]]:
    """Each hostile text (and nested braces) in each format, ``size`` bytes at most."""
    files = {
        name: {fmt: _fill(make, piece, size) for fmt, make in FORMATS.items()}
        for name, piece in PIECES.items()
    }
    half = (size - FRAME) // 2
    files["nested braces"] = {fmt: make("{" * half + "}" * half) for fmt, make in FORMATS.items()}
    export = ZOTERO.read_bytes()
    files["real export (baseline)"] = {"BibTeX": export * max(size // len(export), 1)}
    return files


def _cpu(data: bytes) -> float:
    start = time.process_time()
    with contextlib.suppress(LibraryFileError):  # a refusal is an answer too; its time counts the same
        read_library(data, "library")
    return time.process_time() - start


def run(size: int) -> list[dict[str, object]]:
    """One row per text and format: its bytes, CPU seconds and seconds per MB."""
    rows: list[dict[str, object]] = []
    for name, by_format in _files(size).items():
        for fmt, data in by_format.items():
            seconds = _cpu(data)
            rows.append(
                {
                    "text": name,
                    "format": fmt,
                    "bytes": len(data),
                    "cpu_s": round(seconds, 3),
                    "s_per_mb": round(seconds / (len(data) / 1e6), 3),
                }
            )
            print(f"| {name} | {fmt} | {len(data):,} | {seconds:.2f} | {rows[-1]['s_per_mb']} |", flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    """Read every hostile file of ``--size`` bytes once and print a Markdown table (and ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=5_000_000, help="bytes per file (default: the limit)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    print("| text | format | bytes | CPU s | s per MB |\n|---|---|---|---|---|")
    rows = run(args.size)
    worst = max(rows, key=lambda row: float(str(row["cpu_s"])))
    print(f"\nslowest: {worst['text']} ({worst['format']}), {worst['cpu_s']} s of CPU")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
