"""The status page's headline times, drawn from facts the page already reads (no query of their own).

The original 研踪 dashboard opens with two times beside its numbers: when arXiv was last scanned
("arXiv 最近完成扫描") and when the site last stored anything new ("全站最近入库"). PaperTrail shows
both under the 24-hour numbers (docs/status-page.md, "Beside the original page").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.overview.dashboard_records import DashboardCounts, SourceFacts


# The source whose finished runs are "arXiv's scan": the announcement feed every new paper comes from.
# The OAI and API sources run on demand (gap fills, stubs), so their runs are not the daily scan.
ARXIV_SCAN_SOURCE = "arxiv-rss"


@dataclass(frozen=True, slots=True)
class HeadlineTimes:
    """When arXiv's feed was last checked to the end, and the newest arrival of any source."""

    arxiv_scan: datetime | None
    arxiv_scan_state: str | None
    latest_arrival: datetime | None


def headline_times(facts: Mapping[str, SourceFacts], counts: DashboardCounts) -> HeadlineTimes:
    """The two headline times: arXiv's feed's last finished run, and the newest news or pick stored."""
    scan = facts.get(ARXIV_SCAN_SOURCE)
    return HeadlineTimes(
        arxiv_scan=scan.last_finished if scan else None,
        arxiv_scan_state=scan.last_finished_state if scan else None,
        latest_arrival=counts.latest_arrival,
    )
