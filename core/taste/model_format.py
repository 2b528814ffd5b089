"""A learned follow's stored model: ``TasteModel`` and its versioned binary format. Pure.

``core.taste.model`` trains and scores these; this module only holds them and turns them into bytes and
back. The format is little-endian numpy arrays behind a small header, never pickle, so that loading a
stored model runs no code and a damaged one fails with a ``ValueError`` that says what is wrong:

```
header   4s magic "PTTM", u16 format version, u8 log2(feature count), u8 reserved,
         u32 weights K, u32 signatures S, u32 positives trained on, f32 bias
weights  i4[K] hashed feature indices (strictly increasing), f4[K] weights
liked    u1[S] terms per signature, u1[S] id lengths, the S ids in ASCII (concatenated),
         i4[T] the signatures' feature indices (each signature's strictly increasing), f4[T] their values
```

Columns rather than one record per signature: a scoring pass loads every subscriber's model, and reading
ten arrays costs the same whatever the number of signatures (measured in ``bench/recommend.py``).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.values import ARXIV_ID_PATTERN

__all__ = ["FORMAT_VERSION", "N_FEATURES", "Signature", "TasteModel"]

# Features are hashed n-grams in 2**20 buckets; a model trained for another count would score nonsense.
N_FEATURES = 2**20
FORMAT_VERSION = 1
_MAGIC = b"PTTM"
_HEADER = struct.Struct("<4sHBBIIIf")
_ID_RE = re.compile(ARXIV_ID_PATTERN)


@dataclass(frozen=True, slots=True, eq=False)
class Signature:
    """A liked paper in brief: its arXiv id and its strongest hashed features (l2-normalised values)."""

    arxiv_id: str
    indices: np.ndarray
    values: np.ndarray


@dataclass(frozen=True, slots=True, eq=False)
class TasteModel:
    """One subscriber's model: sorted int32 feature indices, float32 weights and a bias (already scaled so
    that a score is in standard deviations above an ordinary paper, ``core.taste.model``), the number of
    liked papers it learned from, and the signatures of the most recent ones, oldest first, as columns:
    ``signature_sizes[k]`` terms of ``signature_indices`` / ``signature_values`` belong to the k-th id.
    """

    indices: np.ndarray
    weights: np.ndarray
    bias: float
    positives: int
    signature_ids: tuple[str, ...]
    signature_sizes: np.ndarray
    signature_indices: np.ndarray
    signature_values: np.ndarray

    @classmethod
    def with_signatures(
        cls,
        indices: np.ndarray,
        weights: np.ndarray,
        bias: float,
        positives: int,
        signatures: Sequence[Signature] = (),
    ) -> TasteModel:
        """A model from its weights and a list of signatures (oldest first)."""
        empty_i, empty_f = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        return cls(
            indices.astype(np.int32),
            weights.astype(np.float32),
            float(np.float32(bias)),
            positives,
            tuple(s.arxiv_id for s in signatures),
            np.array([len(s.indices) for s in signatures], dtype=np.uint8),
            np.concatenate([empty_i, *(s.indices for s in signatures)]).astype(np.int32),
            np.concatenate([empty_f, *(s.values for s in signatures)]).astype(np.float32),
        )

    @property
    def signatures(self) -> tuple[Signature, ...]:
        """The liked papers' signatures, oldest first."""
        ends = np.cumsum(self.signature_sizes, dtype=np.int64)
        starts = ends - self.signature_sizes
        return tuple(
            Signature(arxiv_id, self.signature_indices[a:b], self.signature_values[a:b])
            for arxiv_id, a, b in zip(self.signature_ids, starts, ends, strict=True)
        )

    @property
    def size_bytes(self) -> int:
        """The length of :meth:`to_bytes`: what storing the model costs."""
        return len(self.to_bytes())

    def to_bytes(self) -> bytes:
        """The model in the versioned binary format of this module's docstring."""
        ids = [i.encode("ascii") for i in self.signature_ids]
        header = _HEADER.pack(
            _MAGIC,
            FORMAT_VERSION,
            N_FEATURES.bit_length() - 1,
            0,
            len(self.indices),
            len(ids),
            self.positives,
            self.bias,
        )
        return b"".join(
            [
                header,
                self.indices.astype("<i4").tobytes(),
                self.weights.astype("<f4").tobytes(),
                self.signature_sizes.astype(np.uint8).tobytes(),
                bytes(len(i) for i in ids),
                *ids,
                self.signature_indices.astype("<i4").tobytes(),
                self.signature_values.astype("<f4").tobytes(),
            ]
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> TasteModel:
        """Read a model written by :meth:`to_bytes`; ``ValueError`` says what is wrong with bad bytes."""
        reader = _Reader(bytes(data))
        _, version, log2, _, n_weights, n_signatures, positives, bias = reader.header()
        if version != FORMAT_VERSION:
            raise ValueError(
                f"taste model format version {version} is not supported (this PaperTrail reads version "
                f"{FORMAT_VERSION}): train the model again from its signals"
            )
        if log2 != N_FEATURES.bit_length() - 1:
            raise ValueError(
                f"taste model hashes into 2**{log2} features, this PaperTrail into "
                f"2**{N_FEATURES.bit_length() - 1}: train it again"
            )
        if not np.isfinite(bias):
            raise ValueError("taste model bias is not a finite number")
        indices = reader.indices(n_weights, "weights", np.zeros(0, dtype=np.int64))
        weights = reader.floats(n_weights, "weights")
        sizes = np.frombuffer(reader.take(n_signatures, "signature sizes"), dtype=np.uint8)
        id_lengths = reader.take(n_signatures, "signature id lengths")
        joined = reader.take(sum(id_lengths), "signature ids")
        ids: list[str] = []
        at = 0
        for length in id_lengths:
            name = joined[at : at + length].decode("ascii", errors="replace")
            at += length
            if not _ID_RE.fullmatch(name):
                raise ValueError(f"taste model signature {len(ids) + 1}: {name!r} is not an arXiv id")
            ids.append(name)
        total = int(sizes.sum(dtype=np.int64))
        # Each signature's indices increase; the next signature may start lower.
        starts = np.cumsum(sizes, dtype=np.int64)[:-1]
        sig_indices = reader.indices(total, "signatures", starts)
        sig_values = reader.floats(total, "signatures")
        reader.end()
        return cls(indices, weights, float(bias), positives, tuple(ids), sizes, sig_indices, sig_values)


class _Reader:
    """Sequential reads of a model's bytes, each checked: a short read or a bad index is a ValueError."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int, what: str) -> bytes:
        if self.at + n > len(self.data):
            raise ValueError(
                f"taste model truncated: {what} need {n} bytes at offset {self.at}, "
                f"{len(self.data) - self.at} left"
            )
        self.at += n
        return self.data[self.at - n : self.at]

    def header(self) -> tuple[bytes, int, int, int, int, int, int, float]:
        if self.data[:4] != _MAGIC:
            raise ValueError(
                f"not a PaperTrail taste model: it starts with {self.data[:4]!r}, not {_MAGIC!r}"
            )
        fields: tuple[bytes, int, int, int, int, int, int, float] = _HEADER.unpack(
            self.take(_HEADER.size, "the header")
        )
        return fields

    def indices(self, n: int, what: str, restarts: np.ndarray) -> np.ndarray:
        """``n`` int32 feature indices, in range and increasing except where a new run starts."""
        values = np.frombuffer(self.take(4 * n, what), dtype="<i4").astype(np.int32)
        steps = np.diff(values.astype(np.int64))
        steps[restarts[(restarts > 0) & (restarts < n)] - 1] = 1
        if n and (values.min() < 0 or values.max() >= N_FEATURES or np.any(steps <= 0)):
            raise ValueError(f"taste model {what}: feature indices out of range or not strictly increasing")
        return values

    def floats(self, n: int, what: str) -> np.ndarray:
        values = np.frombuffer(self.take(4 * n, what), dtype="<f4").astype(np.float32)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"taste model {what}: a value is not a finite number")
        return values

    def end(self) -> None:
        if self.at != len(self.data):
            raise ValueError(f"taste model has {len(self.data) - self.at} unexpected bytes after its end")
