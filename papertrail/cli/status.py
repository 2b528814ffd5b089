"""The read-only commands that look at the store: ``status`` (papers, delivery and the health of each
source), ``show`` (one paper and its versions) and ``try`` (what a follow query would have matched).

Its sub-app :data:`app` is added to the root app by ``papertrail/cli/app.py``; a command
imports what it needs when it runs (tests/test_cli_imports.py). ``--json`` output is written byte for
byte to stdout, not through the rich console.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from papertrail.cli.common import alarm_line, count_of, err, explain, fail, iso, out, store_context
from papertrail.service.source_names import SOURCE_NAMES

if TYPE_CHECKING:
    from core.overview.status import SourceStatus


# This family's commands and groups: a sub-app, which papertrail/cli/app.py adds to the root app.
app = typer.Typer()


@app.command()
def status(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Papers stored; new papers, revisions and AI-related papers in the last 24 h; health of each source."""
    from core.overview.screens import queues
    from core.overview.status import source_statuses
    from core.people.masking import mask_address, mask_text
    from papertrail.service.channels import CHANNELS
    from papertrail.service.ingest_claim import status_summary

    with store_context() as ctx:
        summary = status_summary(ctx.db, SOURCE_NAMES)
        queued = queues(ctx.db)
        dead, backlog = queued.dead, queued.search_backlog
        settings = ctx.settings
        unconfigured = CHANNELS.unconfigured(settings)
        waiting = {
            channel: (count, unconfigured[channel])
            for channel, count in queued.waiting_by_channel.items()
            if channel in unconfigured
        }
    judged = source_statuses(
        summary,
        holidays=settings.holiday_dates,
        grace=timedelta(hours=settings.arxiv_stale_grace_hours),
    )
    if as_json:
        data = {
            "papers": summary.papers,
            "versions": summary.versions,
            "last_24h": {
                "new_papers": summary.new_papers_24h,
                "revisions": summary.revisions_24h,
                "ai_related": summary.ai_related_24h,
                "ai_guides": summary.guides_24h,
            },
            "subscribers": summary.subscribers,
            "follows": summary.follows,
            "pending_matches": summary.pending_matches,
            # Of pending_matches, the learned recommendations.
            "pending_recommended": summary.pending_recommended,
            "delivery": {
                "queued_digests": summary.queued_digests,
                "dead_digests": summary.dead_digests,
                "paused_subscribers": summary.paused_subscribers,
                "waiting_for_configuration": {
                    channel: {"pending_matches": count, "hint": hint}
                    for channel, (count, hint) in waiting.items()
                },
                "alarms": [
                    {
                        "channel": a.channel,
                        "kind": a.kind,
                        "first_seen": iso(a.first_seen),
                        "last_seen": iso(a.last_seen),
                        "recipients": a.recipients,
                        "held": a.held,
                        "sample": a.sample,
                    }
                    for a in summary.alarms
                ],
                "dead": [
                    {
                        "digest": d.id,
                        "address": mask_address(address),
                        "attempts": d.attempts,
                        "error": mask_text(d.error or ""),
                    }
                    for d, address in dead
                ],
            },
            "community_discoveries_24h": summary.community_24h,
            "search_index": {"waiting": backlog},
            "sources": [
                {
                    "source": j.facts.source,
                    "state": j.verdict.state,
                    "reason": j.verdict.reason,
                    "lag_seconds": round(j.verdict.lag.total_seconds()) if j.verdict.lag else 0,
                    "last_run": j.facts.last_state,
                    "last_check": iso(j.facts.last_check),
                    # Set while a check is in flight; last_run and last_check are then the last finished one.
                    "checking_since": iso(j.facts.checking_since),
                    "last_success": iso(j.facts.last_success),
                    "last_new_version": iso(j.facts.last_new_version),
                    "error": j.facts.last_error,
                    "note": j.facts.last_note,
                }
                for j in judged
            ],
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    recommended = f" ({summary.pending_recommended} recommended)" if summary.pending_recommended else ""
    out.print(
        f"papers stored: {summary.papers} ({count_of(summary.versions, 'version')})\n"
        f"last 24 h: {count_of(summary.new_papers_24h, 'new paper')}, "
        f"{count_of(summary.revisions_24h, 'revision')}, "
        f"{summary.ai_related_24h} AI-related, AI guides: +{summary.guides_24h}\n"
        f"subscribers: {summary.subscribers}, follows: {summary.follows}, "
        f"pending matches: {summary.pending_matches}{recommended}\n"
        f"community discoveries in the last 24 h: {summary.community_24h}\n"
        f"delivery: {count_of(summary.queued_digests, 'digest')} queued, {summary.dead_digests} "
        "dead-lettered, "
        f"{count_of(summary.paused_subscribers, 'subscriber')} paused"
    )
    if backlog:
        out.print(
            f"search index: {count_of(backlog, 'paper')} not yet searchable (the service indexes them; "
            "`papertrail index` does it now)"
        )
    for alarm in summary.alarms:
        err.print(alarm_line(alarm) + f" (`papertrail alarms clear {alarm.channel}` once fixed)")
    for channel, (count, hint) in waiting.items():
        waits = "match waits" if count == 1 else "matches wait"
        err.print(f"{count} {waits} for the {channel} channel, which is not configured: {hint}")
    for digest, address in dead:
        err.print(
            f"dead digest {digest.id} to {mask_address(address)} after "
            f"{count_of(digest.attempts, 'attempt')}: "
            f"{mask_text(digest.error or '')} "
            "(`papertrail retry` re-queues it)"
        )
    _print_sources(judged)


# Below this many columns the sources are printed one block each instead of as a table: seven columns of
# which three are dates need about 120, and an 80-column table wrapped "why" one word a line.
STATUS_TABLE_MIN_WIDTH = 120


def _print_sources(judged: list[SourceStatus]) -> None:
    """The sources' health: a table on a wide terminal, stacked blocks on a narrow one (COLUMNS)."""
    import textwrap

    from rich.table import Table

    # COLUMNS as it is now: a console made while COLUMNS was set keeps that width for good.
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() else out.size.width
    if width >= STATUS_TABLE_MIN_WIDTH:
        table = Table("source", "state", "last check", "last success", "last new version", "lag", "why")
        for column in table.columns[2:6]:
            column.no_wrap = True  # a date is read whole or not at all
        for j in judged:
            table.add_row(
                j.facts.source,
                j.verdict.state,
                _when(j.facts.last_check),
                _when(j.facts.last_success),
                _when(j.facts.last_new_version),
                _duration(j.verdict.lag),
                j.verdict.reason,
            )
        # A console of this width: ``out`` may have fixed another one when it was made.
        Console(markup=False, highlight=False, width=width).print(table)
        return
    for j in judged:
        lag = _duration(j.verdict.lag)
        out.print(f"\n{j.facts.source}: {j.verdict.state}" + (f", lag {lag}" if lag else ""))
        out.print(f"  last check        {_when(j.facts.last_check)}")
        out.print(f"  last success      {_when(j.facts.last_success)}")
        out.print(f"  last new version  {_when(j.facts.last_new_version)}")
        why = textwrap.wrap(j.verdict.reason, width=max(width - 7, 20), break_long_words=False)
        out.print("\n".join(("  why: " if i == 0 else "       ") + line for i, line in enumerate(why)))


def _when(value: datetime | None) -> str:
    """A time for people: ``2026-12-02 01:00 UTC``, or ``never``."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if value else "never"


def _duration(lag: timedelta | None) -> str:
    if not lag:
        return ""
    hours = lag.total_seconds() / 3600
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} d"


@app.command()
def show(
    arxiv_id: Annotated[str, typer.Argument(metavar="ARXIV_ID", help="e.g. 2411.17700 or quant-ph/0201082")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """One paper with every known version, what each revision changed, and its sources."""
    from core.papers.status import show_paper

    with store_context() as ctx:
        try:
            paper = show_paper(ctx.db, arxiv_id)
        except LookupError as exc:
            raise fail(explain(exc), 1) from exc
    if as_json:
        data = {
            "id": paper.id,
            "title": paper.title,
            "authors": list(paper.authors),
            "categories": list(paper.categories),
            "abstract": paper.abstract,
            "url": f"https://arxiv.org/abs/{paper.id}",
            "sources": list(paper.sources),
            "upvotes": paper.upvotes,
            "community": [
                {
                    "source": pick.source,
                    "day": pick.day.isoformat(),
                    "upvotes": pick.upvotes,
                    "comments": pick.comments,
                    "keywords": pick.keywords,
                    "github_repo": pick.github_repo,
                }
                for pick in paper.picks
            ],
            "versions": [
                {
                    "version": v.version,
                    "date": v.date.isoformat(),
                    "announce_type": v.announce_type,
                    "source": v.source,
                    "changed": list(v.changed),
                }
                for v in paper.versions
            ],
        }
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    out.print(f"{paper.id}  {paper.title}\n{', '.join(paper.authors)}\n{' '.join(paper.categories)}")
    out.print(f"https://arxiv.org/abs/{paper.id} · sources: {', '.join(paper.sources)}")
    for pick in paper.picks:
        repo = f" · {pick.github_repo}" if pick.github_repo else ""
        out.print(
            f"  {pick.source} {pick.day}: {count_of(pick.upvotes, 'upvote')}, "
            f"{count_of(pick.comments, 'comment')}{repo}"
        )
    for v in paper.versions:
        what = (
            ("changed: " + ", ".join(v.changed))
            if v.changed
            else ("first seen" if v is paper.versions[0] else "")
        )
        out.print(f"  v{v.version}  {v.date:%Y-%m-%d %H:%M} UTC  {v.announce_type:<13} {what}")


@app.command(name="try")
def try_command(
    query: Annotated[str, typer.Argument(help="A follow query to test, e.g. 'cat:cs.DC graph'.")],
    days: Annotated[int, typer.Option(min=1, help="Look at versions first seen in the last N days.")] = 7,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many.")] = 20,
) -> None:
    """Show which stored papers of the last N days a query would have matched, and why."""
    from core.follows.query import QueryError
    from core.papers.query_trial import try_query

    with store_context() as ctx:
        try:
            hits = try_query(ctx.db, query, days=days)
        except QueryError as exc:
            raise fail(explain(exc), 2) from exc
    for hit in hits[:limit]:
        out.print(f"{hit.arxiv_id}v{hit.version}  {hit.title}\n    why: {'; '.join(hit.reasons)}")
    shown = min(limit, len(hits))
    out.print(
        f"{count_of(len(hits), 'match', 'matches')} in the last {count_of(days, 'day')}"
        + (f", {shown} shown" if shown < len(hits) else "")
    )
