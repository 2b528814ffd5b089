"""Seeds and settings for the guide (LLM) tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.config import Settings
from core.db import Database
from core.follows import subscriber_records
from core.papers import paper_records
from core.reasons import TITLE, Reason
from core.values import PaperIn
from tests.fakes.openai_api import (
    FakeOpenAI,
)
from tests.ledger_rows import add_matches

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _paper(
    arxiv_id: str, version: int = 1, *, title: str = "A paper", abstract: str = "We study."
) -> PaperIn:
    return PaperIn(arxiv_id, version, title, abstract, ("Ada Lovelace",), ("cs.LG",))


def _seed(
    db: Database, *papers: PaperIn, match: bool = True, readers: tuple[str | None, ...] = ("en", "zh")
) -> list[int]:
    """Store ``papers`` as news and, when ``match``, match every one to a subscriber per reader language.

    A reader language of None is a subscriber who never chose one (the default, English). Returns the new
    version ids.
    """
    ids = paper_records.save_versions(db, list(papers), now=NOW - timedelta(hours=1)).new_version_ids
    if match:
        for language in readers:
            subscriber, _ = subscriber_records.ensure_subscriber(
                db, f"console:reader-{language}", timezone="UTC", schedule="daily 08:00"
            )
            assert subscriber.id is not None
            subscriber_records.update_subscriber(db, subscriber.id, language=language)
            add_matches(db, subscriber.id, ids, (Reason(TITLE, "paper"),), now=NOW)
    return ids


def _settings(fake: FakeOpenAI | None, **overrides: object) -> Settings:
    values: dict[str, object] = {"llm_url": fake.url if fake else None, "llm_model": "fake-model"}
    return Settings(**{**values, **overrides})  # type: ignore[arg-type]
