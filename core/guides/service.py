"""The AI-guide step: pick the versions that need a guide, ask the model, store what comes back.

Cost controls live here: nothing at all without ``PAPERTRAIL_LLM_URL``; at most
``PAPERTRAIL_LLM_DAILY_LIMIT`` guides in any 24 hours; at most ``PAPERTRAIL_LLM_CONCURRENCY`` requests at
once; a stored guide is never made again. A failed guide is recorded in the report and the step goes on: a
digest goes out without a guide rather than late.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from core.config import Settings
from core.db import Database
from core.follows import match_records
from core.guides import guide_records
from core.guides.prompt import MAX_TOKENS, GuideError, GuideModel, GuideSubject, build_prompt, parse_guide
from core.languages import check_language
from core.values import Guide

log = logging.getLogger(__name__)

CAP_WINDOW = timedelta(hours=24)
# A version whose answers were unusable this many times (in one language) is not asked about again.
GIVE_UP_AFTER = 2
# Versions first seen longer ago than this get no guide: their digests have gone out.
RECENT = timedelta(days=7)


@dataclass(slots=True)
class GuideReport:
    """What one run did. ``failures`` holds (version id, reason) for each guide that could not be made."""

    language: str
    enabled: bool = True
    made: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)
    capped: bool = False
    note: str = ""


async def make_guides(
    db: Database, client: GuideModel | None, settings: Settings, *, language: str, now: datetime
) -> GuideReport:
    """Make the missing guides in ``language`` within the daily cap; never raises for one bad guide."""
    check_language(language)
    report = GuideReport(language)
    if not settings.llm_url or client is None:
        report.enabled = False
        report.note = "no PAPERTRAIL_LLM_URL configured: no guides are made"
        return report
    # Failed attempts spent requests too: the cap bounds what a broken model can cost in a day.
    spent = guide_records.count_made_since(db, now - CAP_WINDOW) + guide_records.count_failures_since(
        db, now - CAP_WINDOW
    )
    room = settings.llm_daily_limit - spent
    if room <= 0:
        report.capped = True
        report.note = f"daily limit of {settings.llm_daily_limit} guides reached"
        return report
    # Guides are made for the versions readers were matched: fan out what matching found first.
    match_records.expand_matches(db, now=now)
    # One more than the room tells whether the cap leaves versions waiting.
    subjects = guide_records.versions_needing_guides(
        db,
        language,
        room + 1,
        since=now - RECENT,
        give_up_after=GIVE_UP_AFTER,
        default_language=settings.default_language,
    )
    if len(subjects) > room:
        report.capped = True
        report.note = f"daily limit of {settings.llm_daily_limit} guides reached; the rest wait"
        subjects = subjects[:room]
    gate = asyncio.Semaphore(settings.llm_concurrency)
    await asyncio.gather(*(_one(db, client, subject, language, now, gate, report) for subject in subjects))
    return report


async def _one(
    db: Database,
    client: GuideModel,
    subject: GuideSubject,
    language: str,
    now: datetime,
    gate: asyncio.Semaphore,
    report: GuideReport,
) -> None:
    async with gate:
        try:
            answer = await client.complete(build_prompt(subject, language), max_tokens=MAX_TOKENS)
            guide = parse_guide(answer, revision=subject.revision)
        except GuideError as exc:
            log.warning("no %s guide for %sv%d: %s", language, subject.paper_id, subject.number, exc)
            report.failures.append((subject.version_id, str(exc)))
            guide_records.record_guide_failure(
                db, subject.version_id, language, str(exc), retryable=exc.retryable, now=now
            )
            return
    if guide_records.save_guide(db, subject.version_id, language, guide, model=client.model, now=now):
        report.made += 1


async def make_reader_guides(
    db: Database, client: GuideModel | None, settings: Settings, *, now: datetime
) -> list[GuideReport]:
    """:func:`make_guides` for every language readers use (``guide_records.languages_in_use``), the operator's
    default language (``Settings.default_language``, what readers without a language read) first.

    The daily cap is shared: a language later in the list gets what the earlier ones left.
    """
    return [
        await make_guides(db, client, settings, language=language, now=now)
        for language in guide_records.languages_in_use(db, settings.default_language)
    ]


def guides_for(db: Database, version_ids: Sequence[int], language: str) -> dict[int, Guide]:
    """The stored guides of these versions in ``language``, by version id."""
    return guide_records.guides_for(db, version_ids, language)


def guided_versions_since(db: Database, since: datetime) -> int:
    """How many versions got their first guide (any language) at or after ``since``."""
    return guide_records.count_guided_versions_since(db, since)


def made_since(db: Database, since: datetime) -> int:
    """How many guides were made (any language) at or after ``since``: what the daily cap counts."""
    return guide_records.count_made_since(db, since)
