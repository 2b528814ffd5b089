"""``papertrail backfill snapshot FILE``: the arXiv metadata snapshot, streamed into the store as history."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, cast

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from core.service import Batch, IngestReport, backfill
from core.store import SaveResult, Store
from core.values import PaperIn
from ingest.snapshot_parse import SnapshotSkip, iter_snapshot

# Versions per transaction: big enough to amortise the commit, small enough to keep memory flat.
BATCH_VERSIONS = 5000


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
        for item in iter_snapshot(stream):
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


def run_snapshot_backfill(store: Store, path: Path, console: Console) -> IngestReport:
    """Backfill from ``path`` as history, with a progress bar on ``console``."""
    columns = (
        TextColumn("[bold]snapshot"),
        BarColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[versions]:,} versions"),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("snapshot", total=path.stat().st_size, versions=0)
        stored = 0

        def advance(saved: SaveResult) -> None:
            nonlocal stored
            stored += saved.history + saved.duplicates
            progress.update(task, versions=stored)

        batches = snapshot_batches(path, lambda done: progress.update(task, completed=done))
        return backfill(store, "snapshot", batches, on_batch=advance)
