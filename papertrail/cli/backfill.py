"""``papertrail backfill snapshot FILE``: the arXiv metadata snapshot, streamed into the store as history."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from core.db import Database
from core.papers.pipeline import Batch, IngestReport, backfill
from core.values import PaperIn
from ingest.snapshot_parse import SnapshotRecord, SnapshotSkip, iter_snapshot

if TYPE_CHECKING:
    from core.papers.paper_records import SaveResult

# Versions per transaction: big enough to amortise the commit, small enough to keep memory flat.
BATCH_VERSIONS = 5000


class SnapshotUnreadable(Exception):
    """The snapshot file could not be read to its end: cut short, corrupt, or not gzip after all.

    ``line`` is the last line read whole (0: none). What was stored before is the caller's to say.
    """

    def __init__(self, problem: str, line: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


@dataclass(slots=True)
class Stored:
    """What the batches stored so far did: versions stored as history, and versions already known."""

    history: int = 0
    duplicates: int = 0


class BackfillFailed(Exception):
    """A backfill stopped on an unreadable file; the message says why and what was stored before."""


def _problem(exc: BaseException) -> str:
    """What is wrong with the file, in words, from the error reading it raised."""
    if isinstance(exc, EOFError):  # gzip's "Compressed file ended before the end-of-stream marker"
        return "the gzip stream ends early (the file is cut short: an interrupted download or copy?)"
    if isinstance(exc, gzip.BadGzipFile):
        return f"it is not valid gzip ({exc})"
    if isinstance(exc, zlib.error):
        return f"the gzip data is corrupt ({exc})"
    return f"the file cannot be read ({exc})"


def _checked(items: Iterable[SnapshotRecord | SnapshotSkip]) -> Iterator[SnapshotRecord | SnapshotSkip]:
    """``items``, with a read error turned into ``SnapshotUnreadable`` naming the last line read whole."""
    line = 0
    try:
        for item in items:
            line = item.line
            yield item
    except (EOFError, zlib.error, OSError) as exc:  # BadGzipFile is an OSError
        raise SnapshotUnreadable(_problem(exc), line) from exc


def snapshot_batches(path: Path, on_position: Callable[[int], None] | None = None) -> Iterator[Batch]:
    """Read a snapshot file (plain or gzip) and yield batches of versions.

    ``on_position`` is told how many bytes of the file (compressed bytes for gzip) have been read, after
    each batch, so a progress bar can follow a 4 GB file without knowing its uncompressed size.
    """
    with open(path, "rb") as raw:
        gzipped = raw.peek(2)[:2] == b"\x1f\x8b"
        stream = cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")) if gzipped else raw
        papers: list[PaperIn] = []
        skipped: list[str] = []
        for item in _checked(iter_snapshot(stream)):
            if isinstance(item, SnapshotSkip):
                skipped.append(str(item))
            else:
                papers.extend(item.versions)
            if len(papers) >= BATCH_VERSIONS:
                yield Batch(papers, skipped)
                papers, skipped = [], []
                if on_position is not None:
                    on_position(raw.tell())
        if papers or skipped:
            yield Batch(papers, skipped)
        if on_position is not None:
            on_position(raw.tell())


def run_snapshot_backfill(db: Database, path: Path, console: Console) -> IngestReport:
    """Backfill from ``path`` as history, with a progress bar on ``console``.

    Raises ``BackfillFailed`` when the file cannot be read to its end, saying what was stored before.
    """
    columns = (
        TextColumn("[bold]snapshot"),
        BarColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[versions]:,} versions"),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("snapshot", total=path.stat().st_size, versions=0)
        stored = Stored()

        def advance(saved: SaveResult) -> None:
            stored.history += saved.history
            stored.duplicates += saved.duplicates
            progress.update(task, versions=stored.history + stored.duplicates)

        batches = snapshot_batches(path, lambda done: progress.update(task, completed=done))
        try:
            return backfill(db, "snapshot", batches, on_batch=advance)
        except SnapshotUnreadable as exc:
            raise BackfillFailed(_failure(path, exc, stored)) from exc


def _failure(path: Path, exc: SnapshotUnreadable, stored: Stored) -> str:
    """The message of a backfill stopped by an unreadable file: the problem, then what was stored."""
    where = f"after line {exc.line:,}" if exc.line else "from its start"
    # Batches are stored whole or not at all: the lines of the batch being read when the file failed
    # are not stored, and a second run over a whole file skips what was.
    if stored.history:
        kept = (
            f"{stored.history:,} versions from the lines before it were stored as history (running the "
            "backfill again on a whole file skips them as already known)"
        )
    elif stored.duplicates:
        kept = f"nothing new was stored ({stored.duplicates:,} versions read were already known)"
    else:
        kept = "nothing was stored"
    return f"{path}: unreadable {where}: {exc.problem}; {kept}"
