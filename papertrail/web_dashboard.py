"""The status page's headline times, drawn from facts the page already reads (no query of their own).

The original 研踪 dashboard opens with two times beside its numbers: when arXiv was last scanned
("arXiv 最近完成扫描") and when the site last stored anything new ("全站最近入库"). PaperTrail shows
both under the 24-hour numbers (docs/status-page.md, "Beside the original page").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from core.status import SourceStatus
from core.store_browse import SourceFacts

# The source whose finished runs are "arXiv's scan": the announcement feed every new paper comes from.
# The OAI and API sources run on demand (gap fills, stubs), so their runs are not the daily scan.
ARXIV_SCAN_SOURCE = "arxiv-rss"


@dataclass(frozen=True, slots=True)
class HeadlineTimes:
    """When arXiv's feed was last checked to the end, and the newest arrival of any source."""

    arxiv_scan: datetime | None
    arxiv_scan_state: str | None
    latest_arrival: datetime | None


def headline_times(judged: Sequence[SourceStatus], facts: Mapping[str, SourceFacts]) -> HeadlineTimes:
    """The two headline times from every source's health and facts.

    The latest arrival is the newest of each source's last new version (news, so a backfill does not
    count) and, for a community source, its last new pick.
    """
    scan = facts.get(ARXIV_SCAN_SOURCE)
    arrivals = [
        when
        for item in judged
        for when in (item.facts.last_new_version, facts[item.facts.source].last_new_pick)
        if when is not None
    ]
    return HeadlineTimes(
        arxiv_scan=scan.last_finished if scan else None,
        arxiv_scan_state=scan.last_finished_state if scan else None,
        latest_arrival=max(arrivals, default=None),
    )
