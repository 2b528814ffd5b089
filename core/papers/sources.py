"""The contract every ingest source fulfils, and the one error it raises."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import ClassVar, Protocol

from core.models import RunState
from core.values import CommunityPick, PaperIn, ResponseValidator


class SourceError(Exception):
    """A fetch failed. The message says what went wrong and what to do about it.

    ``retryable`` is False for failures that will repeat until someone changes the configuration
    (a bad archive name, a 404); ``retry_after`` carries a server's Retry-After hint in seconds.
    """

    def __init__(self, message: str, *, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One successful fetch: the versions seen, how the run ended, and what to remember for next time.

    ``papers`` may be a sequence that keeps most of a large fetch in a temporary file (the arXiv RSS
    source's ``PaperSpool``): read it once, in order, as ``paper_records.save_versions`` does.
    """

    papers: Sequence[PaperIn]
    state: RunState
    note: str | None = None
    cursor: str | None = None
    validator: ResponseValidator | None = None


ValidatorLookup = Callable[[str], ResponseValidator | None]


class Source(Protocol):
    """An ingest source. ``fetch`` does the network part and the parsing; it never touches the store.

    ``url`` is the address its fetch requests: the ingest reads its stored validator with the run's
    opening, before the fetch, and gives it to ``fetch`` through ``validators``.
    """

    name: ClassVar[str]
    url: str

    async def fetch(self, validators: ValidatorLookup) -> FetchResult:
        """Fetch and parse, or raise :class:`SourceError`."""
        ...


@dataclass(frozen=True, slots=True)
class Page:
    """One committed unit of a paged source (an OAI-PMH page, a snapshot batch).

    ``cursor`` is set on the page after which the source can resume from a new place next time (for
    OAI-PMH: the last page of a complete list). Until then the stored cursor stays where it was, so an
    interrupted harvest starts over from the old cursor and re-reads only duplicates.
    """

    papers: tuple[PaperIn, ...]
    skipped: tuple[str, ...] = ()
    cursor: str | None = None
    note: str | None = None


class PagedSource(Protocol):
    """A source that delivers many pages per run; each page is stored before the next is fetched."""

    name: ClassVar[str]

    def pages(self, cursor: str | None) -> AsyncIterator[Page]:
        """Fetch pages starting from ``cursor`` (None: the source's own default start)."""
        ...


class CommunitySource(Protocol):
    """A source of community picks (Hugging Face daily papers): one list per day."""

    name: ClassVar[str]

    async def fetch_day(self, day: date) -> CommunityDay:
        """The picks of ``day``, or raise :class:`SourceError`."""
        ...


class CommunityDay(Protocol):
    """What a community source returns for one day."""

    @property
    def picks(self) -> tuple[CommunityPick, ...]: ...

    @property
    def skipped(self) -> tuple[str, ...]: ...
