"""The scan receipt of a digest: what PaperTrail scanned for its reader since their previous digest.

"Users cannot tell a quiet day from a broken pipeline", a reader said. Every digest (and every heartbeat) says
what the sources stored between the reader's previous digest and this one, e.g. "Since Mon 08:00 CET:
arXiv: 3 announcements, 4512 new versions scanned; 12 matched your follows.", and warns when a source was
failing or behind arXiv's calendar at any time in that window, with the gap in the reader's timezone.

Computed here, worded by core.delivery.receipt_text (which the renderer uses). Pure over the source runs the
store
returns (``run_records.receipt_runs``): no I/O here. The counts are what the runs recorded
(``new_papers + revisions``: the versions stored as news, which are what matching reads; the distinct mailing
dates of the calendar source's runs that stored something), never estimates. The health of a source at any
moment is the status page's own verdict (``core.papers.status.judge``) replayed over the runs, so a receipt
never calls "stale" what the status page would not.

The window: from the reader's ``last_digest_at`` (a first digest: the subscriber's ``created_at``), at most
:data:`LOOKBACK` back, to the digest's planning time (``Digest.created_at``), so every attempt of one digest
words the same receipt.

Which sources a receipt names: a source on arXiv's calendar (``arxiv-rss``) whenever it has runs stored,
even with nothing stored in the window (zero announcements is news too), and any other source that stored
new versions in the window (a gap fill). Community and completion sources store no news and are left out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from itertools import accumulate

from core.models import RunState, SourceRun
from core.papers.health import Health, SourceHealth, Verdict
from core.papers.status import CALENDAR_SOURCES, judge, mailing_of
from core.values import Outage, Receipt, SourceScan

# A receipt covers at most this much time: a reader whose previous digest is older (a weekly digest
# after a pause, a first digest long after sign-up) gets the last 7 days.
LOOKBACK = timedelta(days=7)
# A run is counted in the window its end falls in; the store reads runs started at most this long before
# the window (runs are read by id, newest first, and ids follow start times), so a run longer than a day
# that ends inside a window is missed. Scheduled runs take seconds to minutes; only a backfill (history,
# which a receipt counts as nothing) runs for hours.
RUN_OVERLAP = timedelta(days=1)
_GOOD = frozenset({RunState.OK, RunState.EMPTY, RunState.NOT_MODIFIED})
_BAD = frozenset({Health.FAILING, Health.STALE})


def receipt_window(
    last_digest_at: datetime | None, subscriber_created_at: datetime, until: datetime
) -> tuple[datetime, datetime]:
    """The window (since, until] of a digest planned at ``until``: from the previous digest (or the
    sign-up), at most :data:`LOOKBACK` back."""
    since = max(last_digest_at or subscriber_created_at, until - LOOKBACK)
    return min(since, until), until


@dataclass(frozen=True, slots=True)
class _Point:
    """A source's verdict at one moment, with the first failed run of the streak it was in then."""

    at: datetime
    verdict: Verdict | None
    failing_since: datetime | None


class _Timeline:
    """One source's runs in order, with what the status page would have said after each (built once)."""

    def __init__(self, source: str, runs: Sequence[SourceRun], holidays: Collection[date], grace: timedelta):
        self.source = source
        self.holidays = holidays
        self.grace = grace
        self.ends: list[datetime] = []
        self.news: list[int] = []
        self.mailings: list[date | None] = []
        # The facts, the verdict at the run's end and the failure streak's start after each run.
        self.facts: list[SourceHealth] = []
        self.verdicts: list[Verdict] = []
        self.streaks: list[datetime | None] = []
        served: str | None = None
        success: datetime | None = None
        streak: datetime | None = None
        for run in runs:
            end = run.finished_at
            if end is None:
                continue
            stored = run.new_papers + run.revisions
            if run.state in _GOOD:
                success, streak = end, None
                served = run.cursor or served
            elif run.state == RunState.ERROR:
                streak = streak or end
            facts = SourceHealth(
                source=source,
                last_check=end,
                last_state=run.state,
                last_new_version=None,
                last_error=run.error,
                last_note=run.note,
                last_success=success,
                served_cursor=served,
            )
            self.ends.append(end)
            self.news.append(stored)
            self.mailings.append(mailing_of(run.cursor) if stored and source in CALENDAR_SOURCES else None)
            self.facts.append(facts)
            self.verdicts.append(self._judge(facts, end))
            self.streaks.append(streak)
        self.stored = [0, *accumulate(self.news)]

    def _judge(self, facts: SourceHealth, now: datetime) -> Verdict:
        return judge(facts, now=now, holidays=self.holidays, grace=self.grace)

    def _at(self, index: int, moment: datetime) -> _Point:
        """The verdict at ``moment`` given the runs up to ``index`` (none for -1)."""
        if index < 0:
            return _Point(moment, None, None)
        return _Point(moment, self._judge(self.facts[index], moment), self.streaks[index])

    def scan(self, since: datetime, until: datetime) -> tuple[SourceScan | None, list[Outage]]:
        """What the runs finished in (since, until] stored, and the outages that touched the window."""
        first = bisect_right(self.ends, since)
        last = bisect_right(self.ends, until)
        stored = self.stored[last] - self.stored[first]
        calendar = self.source in CALENDAR_SOURCES
        if not calendar and not stored:
            return None, []
        mailings = {m for m in self.mailings[first:last] if m is not None}
        scan = SourceScan(self.source, last - first, stored, len(mailings) if calendar else None)
        points = [
            self._at(first - 1, since),
            *(_Point(self.ends[i], self.verdicts[i], self.streaks[i]) for i in range(first, last)),
            self._at(last - 1, until),
        ]
        return scan, self._outages(points)

    def _outages(self, points: Iterable[_Point]) -> list[Outage]:
        """Maximal stretches of failing or stale verdicts: from the first failed run of the streak (or
        when the calendar made the source stale) to the next point judged healthy."""
        found: list[Outage] = []
        start: datetime | None = None
        state = ""
        for point in points:
            verdict = point.verdict
            if verdict is not None and verdict.state in _BAD:
                if start is None:
                    if verdict.state == Health.FAILING:
                        start = point.failing_since or point.at
                    else:
                        start = point.at - verdict.lag if verdict.lag is not None else point.at
                    state = verdict.state
                elif verdict.state == Health.FAILING:
                    state = Health.FAILING  # a stale feed that then failed: the failure is the news
            elif start is not None:
                found.append(Outage(self.source, state, start, point.at))
                start = None
        if start is not None:
            found.append(Outage(self.source, state, start, None))
        return found


class RunLog:
    """Source runs read once (``run_records.receipt_runs``), indexed so that each digest's
    receipt costs the runs of its own window, however many digests share the log."""

    def __init__(
        self,
        runs: Iterable[SourceRun],
        *,
        holidays: Collection[date] = (),
        grace: timedelta = timedelta(hours=4),
    ) -> None:
        by_source: defaultdict[str, list[SourceRun]] = defaultdict(list)
        for run in sorted(runs, key=lambda r: r.id or 0):
            by_source[run.source].append(run)
        self.timelines = [
            _Timeline(source, rows, holidays, grace) for source, rows in sorted(by_source.items())
        ]

    def receipt(self, *, since: datetime, until: datetime, matched: int, timezone: str = "UTC") -> Receipt:
        """The receipt of a digest of ``matched`` items for the window (since, until]."""
        scans: list[SourceScan] = []
        outages: list[Outage] = []
        for timeline in self.timelines:
            scan, found = timeline.scan(since, until)
            if scan is not None:
                scans.append(scan)
                outages.extend(found)
        # arXiv first, then by name: the source readers know leads.
        scans.sort(key=lambda s: (s.source not in CALENDAR_SOURCES, s.source))
        outages.sort(key=lambda o: (o.start, o.source))
        return Receipt(since, until, matched, tuple(scans), tuple(outages), timezone)


__all__ = ["LOOKBACK", "RUN_OVERLAP", "RunLog", "receipt_window"]
