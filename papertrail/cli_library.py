"""``papertrail import library ADDRESS FILE`` (issue 17): a reader's reference library seeds their learned
follows.

Registered on :data:`papertrail.cli_import_export.import_app` when ``papertrail/cli.py`` imports this module,
and built on :mod:`papertrail.cli_common`'s helpers. As there, the command imports what it needs when it runs
(``papertrail --help`` loads no database library: tests/test_cli_imports.py). The file is read by
:func:`core.taste.library_file.read_library` and imported by
:func:`core.taste.library_import.import_library`, the step
the manage page's upload runs too (``papertrail/web_library.py``). It needs the arXiv API for ids PaperTrail
has not stored, so it opens the whole application context, not the store alone.

Exit codes as in the README: 2 for a malformed address, a file argument that is not a file, or a file that
is not a library (its refusal printed, nothing imported); 1 for an unknown subscriber or a file that cannot
be read. Entries that cannot be used do not fail the command: they are listed after the summary, each with
its line and reason, as ``import follows`` lists its bad lines.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from papertrail.cli_common import FAILURE, USAGE, _context, _fail, _n, _run, err, out
from papertrail.cli_import_export import _BAD_LINES_SHOWN, import_app

if TYPE_CHECKING:
    from core.taste.library_file import EntryProblem, LibraryRead
    from core.taste.library_import import LibraryReport

# How the summary names each format.
FORMAT_NAMES = {"bibtex": "BibTeX", "ris": "RIS", "csl-json": "CSL-JSON"}
_STDIN = "<stdin>"


@import_app.command("library")
def import_library_command(
    address: Annotated[
        str, typer.Argument(help="The subscriber address, e.g. telegram:12345 or email:ada@example.org.")
    ],
    path: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="A BibTeX, RIS or CSL-JSON export of a reference library; - for stdin."
        ),
    ],
) -> None:
    """Seed a reader's recommendations with the papers of their reference library (Zotero, Mendeley,
    JabRef): each entry is used by its arXiv id, its DOI, or its title and abstract, and counted as a
    paper the reader likes. Every entry not used is listed with its line and reason; importing the same
    file again adds nothing."""
    from core.channel import normalise_address
    from core.follows import subscriber_records
    from core.taste.library_file import MAX_FILE_BYTES, LibraryFileError, read_library
    from core.taste.library_import import import_library
    from papertrail import channels

    stdin = str(path) == "-"
    name = _STDIN if stdin else str(path)
    if not stdin and not path.is_file():
        raise _fail(f"{path} is not a file", USAGE)
    channels.install()  # the address is checked before the settings are read
    try:
        normal = normalise_address(address)
    except ValueError as exc:
        raise _fail(str(exc), USAGE) from exc
    try:
        with sys.stdin.buffer if stdin else path.open("rb") as stream:
            # One byte more than read_library reads: a larger file is refused, not cut.
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise _fail(f"cannot read {name}: {exc}", FAILURE) from exc
    if len(data) > MAX_FILE_BYTES:  # said here: read_library would give the size of the part read
        raise _fail(
            f"{name}: the file is larger than {MAX_FILE_BYTES / 1e6:,.0f} MB, the most PaperTrail reads; "
            "export one collection at a time; nothing imported",
            USAGE,
        )
    try:
        read = read_library(data, None if stdin else path.name)
    except LibraryFileError as exc:
        raise _fail(f"{name}: {exc}; nothing imported", USAGE) from exc
    with _context() as ctx:
        subscriber = subscriber_records.get_subscriber(ctx.db, normal)
        if subscriber is None or subscriber.id is None:
            raise _fail(
                f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY", FAILURE
            )
        report = _run(import_library(ctx.db, subscriber.id, read, lookup=ctx.api))
    out.print(summary(name, read, report))
    if report.lookup_failed:
        err.print(
            "note: the arXiv API could not be reached: papers not stored here were used by their title and "
            "abstract where the file has them; import the file again in an hour to look them up"
        )
    if report.unused:
        out.print("not used:")
    for problem in report.unused[:_BAD_LINES_SHOWN]:
        out.print(problem_line(name, problem))
    if len(report.unused) > _BAD_LINES_SHOWN:
        out.print(
            f"... and {_n(len(report.unused) - _BAD_LINES_SHOWN, 'more entry', 'more entries', grouped=True)}"
        )


def summary(name: str, read: LibraryRead, report: LibraryReport) -> str:
    """``zotero.bib (BibTeX): 12 entries; 10 used: 7 stored papers, 1 looked up on arXiv, 1 by DOI, 1 by
    title and abstract; 9 new`` (a part that counts nothing is left out)."""
    kind = FORMAT_NAMES.get(report.format, report.format)
    if read.encoding not in ("utf-8", "utf-16"):
        kind += f", read as {read.encoding}"  # a legacy export: accented titles may read wrong
    parts = [
        _n(report.stored, "stored paper", grouped=True) if report.stored else "",
        f"{report.fetched:,} looked up on arXiv" if report.fetched else "",
        f"{report.by_doi:,} by DOI" if report.by_doi else "",
        f"{report.by_text:,} by title and abstract" if report.by_text else "",
    ]
    how = ", ".join(part for part in parts if part)
    return (
        f"{name} ({kind}): {_n(report.entries, 'entry', 'entries', grouped=True)}; "
        f"{report.used:,} used{': ' + how if how else ''}; {report.added:,} new"
    )


def problem_line(name: str, problem: EntryProblem) -> str:
    """``FILE:LINE: entry KEY: reason``, in English (the command line speaks to the operator); the key
    and reason come from the reader's file, so control characters are taken out before they print."""
    from core.escaping import strip_control

    where = name if problem.line is None else f"{name}:{problem.line}"
    key = f" entry {strip_control(problem.key)}:" if problem.key else ""
    return f"{where}:{key} {strip_control(str(problem.reason))}"
