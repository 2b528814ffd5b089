"""Parsed versions kept in memory up to a limit, the rest spooled to a temporary file.

A feed of 30,000 versions parsed into ``PaperIn`` values takes about 1.2 times its body in memory. A
``PaperSpool`` keeps the first ``keep`` versions in a list and writes later ones, ``BATCH`` at a time, to a
temporary file; reading them back (``paper_records.save_versions`` iterates once, in batches)
costs one batch in memory. arXiv's largest real day (1,504 versions) stays in memory and pays nothing for the
spool.

The file holds pickles this process wrote itself, read back only by it; it is deleted when the spool is
closed or garbage-collected.
"""

from __future__ import annotations

import pickle
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any, BinaryIO, overload

from core.values import PaperIn

# Versions kept in memory before the rest go to the file: about 10 MB of arXiv's abstracts, and more
# than any real day (1,504), so a real feed is never spooled.
SPOOL_AFTER = 5000
# Versions per pickle in the file: one batch is what reading back holds at a time.
BATCH = 1000

_FIELDS = attrgetter(*(field.name for field in fields(PaperIn)))


class PaperSpool(Sequence[PaperIn]):
    """An append-only sequence of versions, in memory up to ``keep`` (None: no limit), then in a file.

    ``stop_spooling`` keeps everything appended afterwards in memory. Only versions held in memory can be
    replaced (``spool[i] = paper``). Not to be appended to while it is being iterated.
    """

    def __init__(self, keep: int | None = SPOOL_AFTER) -> None:
        self._keep = keep
        self._memory: list[PaperIn] = []
        self._file: BinaryIO | None = None
        self._offsets: list[int] = []  # where each batch starts in the file
        self._spooled = 0
        self._tail: list[PaperIn] = []  # after the file: a batch not yet written, or everything
        self._spooling = keep is not None

    def append(self, paper: PaperIn) -> None:
        """Add ``paper`` at the end."""
        if self._keep is None or (not self._offsets and not self._tail and len(self._memory) < self._keep):
            self._memory.append(paper)
            return
        self._tail.append(paper)
        if self._spooling and len(self._tail) >= BATCH:
            self._write_batch()

    def stop_spooling(self) -> None:
        """Keep every version appended from now on in memory (so that it can still be replaced)."""
        self._spooling = False

    def clear(self) -> None:
        """Drop every version (and the file)."""
        self.close()
        self._memory = []
        self._tail = []
        self._offsets = []
        self._spooled = 0
        self._spooling = self._keep is not None

    def close(self) -> None:
        """Delete the file, if any (the versions in it are gone)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def in_memory(self) -> bool:
        """True when nothing was written to the file."""
        return not self._offsets

    def __len__(self) -> int:
        return len(self._memory) + self._spooled + len(self._tail)

    def __iter__(self) -> Iterator[PaperIn]:
        yield from self._memory
        for batch in range(len(self._offsets)):
            yield from self._batch(batch)
        yield from self._tail

    @overload
    def __getitem__(self, index: int) -> PaperIn: ...

    @overload
    def __getitem__(self, index: slice) -> list[PaperIn]: ...

    def __getitem__(self, index: int | slice) -> PaperIn | list[PaperIn]:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("PaperSpool index out of range")
        if index < len(self._memory):
            return self._memory[index]
        index -= len(self._memory)
        if index < self._spooled:
            return self._batch(index // BATCH)[index % BATCH]
        return self._tail[index - self._spooled]

    def __setitem__(self, index: int, paper: PaperIn) -> None:
        if index < len(self._memory):
            self._memory[index] = paper
            return
        index -= len(self._memory) + self._spooled
        if index < 0:
            raise IndexError("a version in the spool file cannot be replaced")
        self._tail[index] = paper

    def _write_batch(self) -> None:
        if self._file is None:
            # Handed to weakref.finalize: closed with the spool, or by clear()/close().
            self._file = tempfile.TemporaryFile()  # noqa: SIM115
            weakref.finalize(self, self._file.close)
        self._file.seek(0, 2)
        self._offsets.append(self._file.tell())
        pickle.dump([_FIELDS(paper) for paper in self._tail], self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._spooled += len(self._tail)
        self._tail = []

    def _batch(self, batch: int) -> list[PaperIn]:
        assert self._file is not None
        # Seek and read in one step: two iterations at once each keep their own place.
        self._file.seek(self._offsets[batch])
        rows: list[tuple[Any, ...]] = pickle.load(self._file)
        return [PaperIn(*row) for row in rows]
