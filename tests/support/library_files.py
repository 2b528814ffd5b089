"""Reference-library files (BibTeX, RIS, CSL JSON) for the import tests."""

from __future__ import annotations

from datetime import UTC, datetime

from core.db import Database
from core.follows import subscriber_records
from core.papers import paper_records
from ingest.arxiv_rss_parse import parse_feed
from tests.conftest import BIG_FEED, CORPUS

LIBRARY = CORPUS / "library"


BODIES = CORPUS / "arxiv-api" / "arxivpy-2026-golden-bodies"


NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def _reader(db: Database) -> int:
    paper_records.save_versions(db, parse_feed(BIG_FEED.read_bytes()).items, now=NOW)
    subscriber, _ = subscriber_records.ensure_subscriber(
        db, "email:ada@example.org", timezone="UTC", schedule="daily 08:00"
    )
    assert subscriber.id is not None
    return subscriber.id
