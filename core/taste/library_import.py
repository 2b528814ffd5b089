"""Seeds a reader's learned follows from a reference library: the entries of a BibTeX, RIS or
CSL-JSON file (read by :mod:`core.taste.library_file`) become liked papers.

Each entry is used the first way that works: its arXiv id names a stored paper; an arXiv id PaperTrail
has not stored is looked up through the arXiv API and stored as history (never announced to anyone); a DOI
names a stored version that carries it; otherwise its title and abstract are kept as text. An entry none
of these fit is reported with the reason, as are the file's own broken entries: nothing is dropped
without a word. Importing the same file twice adds nothing (each seed has a key), and asks arXiv again for
no id it answered without, or failed to answer, a moment ago (``NOT_FOUND_MEMORY``, ``FAILURE_MEMORY``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from core.db import Database
from core.languages import N_, Phrase
from core.models import utcnow
from core.papers import paper_records
from core.papers.paper_records import Novelty
from core.papers.pipeline import PaperLookup
from core.papers.sources import SourceError
from core.taste import taste_records
from core.taste.library_file import EntryProblem, LibraryEntry, LibraryRead
from core.taste.taste_records import SeedIn
from core.taste.training import retrain

log = logging.getLogger(__name__)

# arXiv ids looked up per import: the API is asked politely (one request per 100 ids, spaced by the shared
# client), so a 5,000-entry library of unknown preprints costs minutes, not hours.
MAX_LOOKUPS = 1_000
# How long a look-up that gave nothing is remembered (in the database, for every process), so that
# importing the same library again, or another reader's with the same ids, does not ask arXiv again: an id
# arXiv answered without (a typo, a withdrawn number) for a week, and every id of a look-up that failed (the
# API could not be reached) for an hour, the pause arXiv's politeness asks of a client it turned away.
NOT_FOUND_MEMORY = timedelta(days=7)
FAILURE_MEMORY = timedelta(hours=1)
NOT_FOUND = "not-found"
FAILED = "failed"
_FAILURE = Phrase(N_("the arXiv API could not be reached; import the file again in an hour"))


@dataclass(frozen=True, slots=True)
class LibraryReport:
    """What importing one library did, for the reader: how many entries were used and how, and why the
    others were not."""

    format: str
    entries: int
    stored: int = 0  # named a paper PaperTrail had stored
    fetched: int = 0  # looked up through the arXiv API, then stored
    by_doi: int = 0  # named by a DOI a stored version carries
    by_text: int = 0  # used by their title and abstract
    added: int = 0  # new seeds (the others were imported before)
    unused: tuple[EntryProblem, ...] = field(default=())
    # The arXiv API could not be reached: ids not stored here were used by their text, or not at all.
    lookup_failed: bool = False

    @property
    def used(self) -> int:
        """Entries that became seeds (new or kept from an earlier import)."""
        return self.stored + self.fetched + self.by_doi + self.by_text


async def import_library(
    db: Database,
    subscriber_id: int,
    read: LibraryRead,
    *,
    lookup: PaperLookup | None,
    now: datetime | None = None,
) -> LibraryReport:
    """Keep the usable entries of ``read`` as the subscriber's seeds; ``lookup`` (the arXiv API, None
    when not configured) completes arXiv ids PaperTrail has not stored."""
    entries = list(read.entries)
    problems = list(read.problems)
    ids = sorted({e.arxiv_id for e in entries if e.arxiv_id})
    # The SQL runs in worker threads: an upload is imported by the web role, whose event loop also serves
    # pages, the scheduler and the bots, and a DOI look-up reads many versions.
    known = await asyncio.to_thread(taste_records.latest_versions, db, ids)
    missing = [i for i in ids if i not in known]
    fetched: dict[str, int] = {}
    lookup_failure: Phrase | None = None
    remembered: dict[str, str] = {}
    asked: list[str] = []
    if missing and lookup is not None:
        # Ids looked up in vain not long ago, by any process: not asked again until their time has passed.
        remembered = await asyncio.to_thread(partial(taste_records.remembered_lookups, db, missing, now=now))
        asked = [i for i in missing if i not in remembered][:MAX_LOOKUPS]
        failed = FAILED in remembered.values()
        if asked:
            fetched, failed_now = await _look_up(db, lookup, asked, now=now)
            known.update(fetched)
            failed = failed or failed_now
        if failed:
            lookup_failure = _FAILURE
    dois = sorted({e.doi for e in entries if e.doi and not _resolved(e, known)})
    by_doi = await asyncio.to_thread(taste_records.versions_by_doi, db, dois)

    seeds: list[SeedIn] = []
    counts = {"stored": 0, "fetched": 0, "doi": 0, "text": 0}
    for entry in entries:
        if entry.arxiv_id and entry.arxiv_id in known:
            seeds.append(SeedIn(entry.arxiv_id, known[entry.arxiv_id]))
            counts["fetched" if entry.arxiv_id in fetched else "stored"] += 1
        elif entry.doi and entry.doi in by_doi:
            paper_id, version_id = by_doi[entry.doi]
            seeds.append(SeedIn(paper_id, version_id))
            counts["doi"] += 1
        elif entry.title.strip() and entry.abstract.strip():
            seeds.append(SeedIn(_text_key(entry), None, entry.title.strip(), entry.abstract.strip()))
            counts["text"] += 1
        else:
            problems.append(
                _unused(
                    entry, lookup_failure, asked_api=lookup is not None, asked=asked, remembered=remembered
                )
            )
    added = await asyncio.to_thread(partial(taste_records.add_seeds, db, subscriber_id, seeds, now=now))
    if added:
        # The new seeds are liked papers: the model learns them now, as after a vote.
        await asyncio.to_thread(partial(retrain, db, subscriber_id, now=now))
    return LibraryReport(
        read.format,
        len(entries) + len(read.problems),
        stored=counts["stored"],
        fetched=counts["fetched"],
        by_doi=counts["doi"],
        by_text=counts["text"],
        added=added,
        unused=tuple(problems),
        lookup_failed=lookup_failure is not None,
    )


async def _look_up(
    db: Database, lookup: PaperLookup, asked: list[str], *, now: datetime | None
) -> tuple[dict[str, int], bool]:
    """Ask the arXiv API for ``asked``, store what it knows as history and remember what it did not give;
    returns the ids found (id -> version row id) and whether the look-up failed."""
    at = now or utcnow()
    try:
        papers = await lookup.lookup(asked)
    except SourceError as exc:
        log.warning("library import: arXiv look-up failed: %s", exc)
        outcomes = dict.fromkeys(asked, (FAILED, at + FAILURE_MEMORY))
        await asyncio.to_thread(partial(taste_records.remember_lookups, db, outcomes, now=at))
        return {}, True
    await asyncio.to_thread(
        partial(paper_records.save_versions, db, papers, novelty=Novelty.HISTORY, now=now)
    )
    found = await asyncio.to_thread(taste_records.latest_versions, db, asked)
    outcomes = {i: (NOT_FOUND, at + NOT_FOUND_MEMORY) for i in asked if i not in found}
    if outcomes:
        await asyncio.to_thread(partial(taste_records.remember_lookups, db, outcomes, now=at))
    return found, False


def _resolved(entry: LibraryEntry, known: dict[str, int]) -> bool:
    return bool(entry.arxiv_id) and entry.arxiv_id in known


def _unused(
    entry: LibraryEntry,
    failure: Phrase | None,
    *,
    asked_api: bool,
    asked: Sequence[str],
    remembered: dict[str, str],
) -> EntryProblem:
    """Why ``entry`` could not be used, in the reader's terms."""
    earlier = remembered.get(entry.arxiv_id or "")
    if entry.arxiv_id and earlier == NOT_FOUND:
        reason = Phrase(
            N_("arXiv does not know {arxiv_id}, and the entry has no abstract to learn from"),
            arxiv_id=entry.arxiv_id,
        )
    elif entry.arxiv_id and earlier == FAILED:
        reason = _FAILURE
    elif entry.arxiv_id and failure is not None:
        reason = failure
    elif entry.arxiv_id and not asked_api:
        reason = Phrase(
            N_("arXiv {arxiv_id} is not stored here and the entry has no abstract to learn from"),
            arxiv_id=entry.arxiv_id,
        )
    elif entry.arxiv_id and entry.arxiv_id in asked:
        reason = Phrase(
            N_("arXiv does not know {arxiv_id}, and the entry has no abstract to learn from"),
            arxiv_id=entry.arxiv_id,
        )
    elif entry.arxiv_id:
        reason = Phrase(
            N_("arXiv {arxiv_id} was not looked up (at most {limit} per import): import the file again"),
            arxiv_id=entry.arxiv_id,
            limit=f"{MAX_LOOKUPS:,}",
        )
    elif entry.doi:
        reason = Phrase(
            N_("no paper stored here carries DOI {doi}, and the entry has no abstract to learn from"),
            doi=entry.doi,
        )
    else:
        reason = Phrase(N_("no arXiv id, no DOI, and no abstract to learn from"))
    return EntryProblem(key=entry.key, line=entry.line, reason=reason, title=entry.title)


def _text_key(entry: LibraryEntry) -> str:
    if entry.doi:
        return f"doi:{entry.doi}"[:300]
    words = re.sub(r"[^\w]+", " ", entry.title.casefold()).split()
    return ("title:" + " ".join(words))[:300]
