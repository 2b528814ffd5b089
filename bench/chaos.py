"""The chaos suite: exactly once under crashes, races and hostile mail servers.

Each trial ingests the recorded arXiv day (``tests/corpus/arxiv-rss/aioarxiv_rss_mock_feed.xml``, 1,504
items, served from 127.0.0.1) for a population of instant email subscribers into a fresh database
(a SQLite file, or a new PostgreSQL schema), with the real command line as separate processes
(``papertrail ingest``, ``papertrail run --role scheduler,worker``, ``papertrail worker``) sending to a
recording SMTP server in this process (:mod:`bench.chaos_smtp`). Then it injects its fault, lets the
survivors finish, and compares the (recipient, paper) pairs the server received with the pairs the store
matches when nothing fails (:func:`bench.chaos_ledger.expected_pairs`).

Faults (``--fault``):

* ``kill``: one ingester (``ingest`` or ``run``, drawn) and two workers; one or two SIGKILLs at random
  moments (seeded) of a random live process. A killed ingester is restarted at once (a supervisor's
  job); killed workers are not: the survivors finish (a fresh worker starts if none is left).
* ``race``: no fault: an ingester and two or three workers at once. Every duplicate here is a race.
* ``smtp-drop`` / ``smtp-451``: the server hangs up mid-DATA / answers 451 for a share of the messages
  (``--fault-rate``); ``smtp-550-one``: it refuses one recipient for good; ``smtp-550-all``: it refuses
  every recipient (server-wide 550) during the first delivery pass, then recovers.
* ``leader``: two ``run --role scheduler,worker`` processes; the leader is killed while it ingests.
* ``ingest-race``: two or three ``ingest`` processes of the same source at once, then the usual
  settling; no source run may be left ``running`` (the notes count them).
* ``early-history``: before the day's ingest, a reader's library import and Hugging Face picks completed
  through the arXiv API store a share of the day's followed versions as history; then the usual ingest and
  workers. The announcement must still bring every expected pair.
* ``first-commands``: no ingest and no mail: a new chat's follows all at once, through the Telegram bot and
  the Slack route; follows stored against replies sent (:mod:`bench.chaos_chat`, run on its own).
* ``smtp-slow`` (not in ``all``: a trial takes minutes): the day is ingested, then two workers send
  through a server that waits 3 to 10 s before accepting each mail, with a lease shorter than a batch's
  sends (``SLOW_LEASE``, ``SLOW_BATCH``). No process dies, so every duplicate is a lease that ran out
  under a live worker.

Read docs/chaos.md for how each figure is computed. Usage:

    python bench/chaos.py [--db sqlite|postgresql|both] [--fault kill|...|all] [--trials 30] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from core.follows import subscriber_records
from core.papers import paper_records

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from bench.chaos_chat import FIRST_COMMANDS, first_commands  # noqa: E402
from bench.chaos_ledger import (  # noqa: E402
    DOMAIN,
    SUBSCRIBER,
    VERSION,
    Pair,
    day_feed,
    expected_pairs,
    follow_lines,
    ledger_state,
    pair_rows,
    seed,
)
from bench.chaos_procs import SMTP_SESSIONS_PER_PROCESS, Service, Services, service_env, status_json  # noqa: E402
from bench.chaos_smtp import RecordingSmtp, recording_smtp  # noqa: E402
from bench.day import create_database, drop_database  # noqa: E402
from bench.ingest import POSTGRES, postgres_reachable  # noqa: E402
from core.db import (  # noqa: E402
    Database,
    make_engine,
)
from core.models import DigestState, SubscriberStatus  # noqa: E402
from core.papers.pipeline import complete_papers  # noqa: E402
from core.taste.library_file import read_library  # noqa: E402
from core.taste.library_import import import_library  # noqa: E402
from core.values import CommunityPick  # noqa: E402
from ingest.arxiv_rss_parse import parse_feed  # noqa: E402
from tests.recorded_lookup import RecordedLookup, bibtex_naming  # noqa: E402
from tests.servers import Reply, feed_server, free_port  # noqa: E402

FAULTS = (
    "kill",
    "race",
    "smtp-drop",
    "smtp-451",
    "smtp-550-one",
    "smtp-550-all",
    "leader",
    "early-history",
    "ingest-race",
)
# Faults run only when named (not by ``--fault all``): their trials take minutes each.
OPT_IN_FAULTS = ("smtp-slow",)
# The feed answers with this validator, and 304 to a request that sends it back: a restarted ingest
# that finds its validator stored must still match what the killed one stored.
ETAG = '"recorded-day-2024-11-28"'
# Seconds between two looks at the ledger while a trial settles.
SETTLE_POLL = 0.25
# A process the trial waits for (a log line, the first feed request) has this long.
WAIT_TIMEOUT = 90.0
# A pass of a worker that met failures: "worker NAME: 3 digests sent, 20 failed"
# (papertrail/service/worker.py).
FAILED_PASS = r"worker \S+: \d+ digests sent, [1-9]\d* failed"
LEADING = r"scheduler: leading"
# A failed (not killed) ingest is run again at most this many times in one trial.
MAX_INGEST_RERUNS = 3
# `papertrail ingest` found another ingest of the source running and did nothing
# (papertrail.cli.run.BUSY): not a failure, the other one does the work.
INGEST_BUSY = 75


@dataclass(frozen=True)
class Options:
    """How big and how hostile the trials are (the defaults are the full run's)."""

    subscribers: int = 300
    items: int | None = None  # the whole recorded day
    lease: float = 10.0  # PAPERTRAIL_DELIVERY_LEASE_SECONDS
    batch: int = 20  # PAPERTRAIL_WORKER_BATCH
    concurrency: int = 20  # PAPERTRAIL_WORKER_CONCURRENCY (the default)
    max_items: int = 5000  # PAPERTRAIL_DIGEST_MAX_ITEMS: every item listed, so every pair is readable
    workers: int = 2
    settle_timeout: float = 180.0
    fault_rate: float = 0.2
    seed: int = 14
    kill_horizon: float | None = None  # seconds; None: 90% of the fault-free trial's duration
    postgres: str = POSTGRES


# --quick and the fast test: a small population on the first 400 items of the day, one worker beside the
# ingester, and a 15 s lease with batches of 10 (a batch must go out well within its lease even on a loaded
# machine, or the lease itself makes duplicates: 4 s with batches of 20 did at a load average of 12).
QUICK: dict[str, Any] = {
    "subscribers": 40,
    "items": 400,
    "lease": 15.0,
    "batch": 10,
    "workers": 1,
    "settle_timeout": 60.0,
}


# Trials per fault: the full run (`make chaos`) and --quick.
FULL_TRIALS = {"trials": 30, "race_trials": 20, "smtp_trials": 3, "leader_trials": 5}
QUICK_TRIALS = {"trials": 3, "race_trials": 3, "smtp_trials": 1, "leader_trials": 1}


@dataclass
class Kill:
    """One SIGKILL and what was in flight then."""

    at: float  # seconds after the trial's first process started
    role: str
    pid: int
    phase: str  # where the ingest was: see Trial.ingest_phase
    in_flight: list[int]  # digests the SMTP server accepted from the victim that the ledger had not sent
    slots: int  # the victim's concurrent sends (PAPERTRAIL_WORKER_CONCURRENCY; 0 for `ingest`)
    sessions: int  # the victim's SMTP sessions, i.e. sends that can be on the wire at once
    restarted: bool
    duplicated: int = 0  # of in_flight, digests the server received more than once in the end


@dataclass
class TrialResult:
    """The figures of one trial."""

    database: str
    fault: str
    index: int
    processes: str = ""
    seconds: float = 0.0
    expected: int = 0
    received: int = 0
    lost: int = 0
    held: int = 0
    duplicated_pairs: int = 0
    duplicated_mails: int = 0
    unexplained_mails: int = 0
    mails: int = 0
    kills: list[Kill] = field(default_factory=list)
    paused: int = 0
    paused_in_outage: int | None = None
    alarm: bool | None = None
    takeover_s: float | None = None
    settled: bool = False
    refused: int = 0
    dropped: int = 0
    temporary: int = 0
    send_now: int = 0
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------------------
# The alarm a server-wide SMTP refusal must raise.


def read_alarm(env: dict[str, str], folder: Path) -> bool | None:
    """Whether PaperTrail shows a delivery alarm on the email channel now, as an operator would read it:
    the ``alarms`` list of ``papertrail status --json`` (docs/delivery.md). None: the status could not be
    read."""
    data = status_json(env, folder)
    if data is None:
        return None
    delivery = data.get("delivery")
    alarms = delivery.get("alarms") if isinstance(delivery, dict) else None
    if not isinstance(alarms, list):
        return None
    return any(isinstance(alarm, dict) and alarm.get("channel") == "email" for alarm in alarms)


# ------------------------------------------------------------------------------------------------------------
# One trial


class Trial:
    """The processes, servers and ledger of one trial, and the helpers its fault script uses."""

    def __init__(
        self,
        bench: Bench,
        result: TrialResult,
        url: str,
        feed_url: str,
        smtp: RecordingSmtp,
        folder: Path,
        rng: random.Random,
    ) -> None:
        self.bench = bench
        self.options = bench.options
        self.result = result
        self.url = url
        self.smtp = smtp
        self.folder = folder
        self.rng = rng
        self.engine = make_engine(url)
        self.env = service_env(
            database_url=url,
            feed_url=feed_url,
            smtp_port=smtp.port,
            config_path=folder / "absent.toml",
            lease_seconds=self.options.lease,
            batch=self.options.batch,
            concurrency=self.options.concurrency,
            max_items=self.options.max_items,
            dead_url=f"http://127.0.0.1:{free_port()}",
        )
        self.services = Services(self.env, folder)
        self.t0 = time.monotonic()
        self._recorded: set[int] = set()  # indexes of mails whose digest the ledger has as sent
        self.ingested_at: float | None = None  # seconds until every expected pair had its Match row

    # -- processes ---------------------------------------------------------------------------------

    def start(self, role: str) -> Service:
        """Start one process (see :meth:`Services.start`)."""
        return self.services.start(role)

    def elapsed(self) -> float:
        """Seconds since the trial's processes started."""
        return time.monotonic() - self.t0

    def sleep_until(self, at: float) -> None:
        """Sleep until ``at`` seconds into the trial."""
        time.sleep(max(0.0, at - self.elapsed()))

    def wait_for(self, probe: Callable[[], Any], what: str, timeout: float = WAIT_TIMEOUT) -> Any:
        """Poll ``probe`` until it returns something truthy; raise naming ``what`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            time.sleep(0.02)
        raise TimeoutError(f"waited {timeout:.0f} s for {what}")

    def kill(self, victim: Service, *, restart: bool | None = None) -> Kill:
        """SIGKILL ``victim`` and measure what it had in flight; restart an ingester (a supervisor would)."""
        at = self.elapsed()
        victim.kill()
        # Read after the kill, not before: a query first would give the victim time to record its sends.
        phase = self.ingest_phase()
        # A COMMIT the victim sent just before dying may still be landing on the server; the survivors
        # cannot take the victim's digests before its lease ends, so a moment's wait changes nothing else.
        time.sleep(0.2)
        in_flight = sorted(self.unrecorded(victim.worker)) if victim.delivers else []
        if restart is None:
            restart = victim.role in ("ingest", "run")
        if restart:
            self.start(victim.role)
        kill = Kill(
            at=round(at, 2),
            role=victim.role,
            pid=victim.pid,
            phase=phase,
            in_flight=in_flight,
            slots=self.options.concurrency if victim.delivers else 0,
            sessions=SMTP_SESSIONS_PER_PROCESS if victim.delivers else 0,
            restarted=restart,
        )
        self.result.kills.append(kill)
        return kill

    # -- the ledger ----------------------------------------------------------------------------------

    def unrecorded(self, worker: str | None = None) -> set[int]:
        """Digests whose mail the SMTP server accepted but the ledger does not have as sent (claimed by
        ``worker``, or by anyone): exactly the ones a crash of their sender makes go out again."""
        mails = self.smtp.mails()
        open_ = [(i, m) for i, m in enumerate(mails) if i not in self._recorded and m.versions]
        if not open_:
            return set()
        where = {
            (r, v): (digest, state, holder)
            for r, v, digest, state, holder in pair_rows(self.engine, {m.recipient for _, m in open_})
        }
        found = set()
        for i, mail in open_:
            digest, state, holder = where.get((mail.recipient, mail.versions[0]), (None, None, None))
            if state == DigestState.SENT:
                self._recorded.add(i)
            elif digest is not None and (worker is None or holder == worker):
                found.add(digest)
        return found

    def ingest_phase(self) -> str:
        """Where the ingest stands: ``fetch`` (nothing stored), ``match`` (stored, not all matched) or
        ``matched``."""
        with self.engine.connect() as conn:
            stored = conn.execute(sa.select(sa.func.count()).select_from(VERSION)).scalar_one()
            unmatched = conn.execute(
                sa.select(sa.func.count()).select_from(VERSION).where(VERSION.c.matched_at.is_(None))
            ).scalar_one()
        if not stored:
            return "fetch"
        return "match" if unmatched else "matched"

    def settle(self) -> None:
        """Let the survivors finish: until every expected pair is sent or held for a paused subscriber and
        nothing is queued, or ``settle_timeout``. A failed ingest is run again; with no sender left a fresh
        worker starts; digests only waiting out a back-off are sent with ``papertrail digest --now``."""
        expected = len(self.bench.expected)
        deadline = time.monotonic() + self.options.settle_timeout
        handled: set[int] = set()
        while time.monotonic() < deadline:
            for service in self.services.all:
                code = service.proc.poll()
                failed = (
                    service.role == "ingest" and code not in (None, 0, INGEST_BUSY) and not service.killed
                )
                if failed and service.pid not in handled and len(handled) < MAX_INGEST_RERUNS:
                    handled.add(service.pid)
                    self.result.notes.append(f"ingest exited with {code}; run again")
                    self.start("ingest")
            if not any(s.delivers and s.role != "digest" for s in self.services.alive()):
                self.result.notes.append(f"no sender left at {self.elapsed():.0f} s: a fresh worker")
                self.start("worker")
            state = ledger_state(self.engine)
            if self.ingested_at is None and state.match_rows >= expected and not state.unmatched_versions:
                self.ingested_at = self.elapsed()
            if state.settled(expected):
                self.result.settled = True
                return
            if state.only_backing_off():
                self.result.send_now += 1
                self.services.send_now()
                continue
            time.sleep(SETTLE_POLL)
        self.result.notes.append(
            f"not settled after {self.options.settle_timeout:.0f} s: {ledger_state(self.engine)}"
        )

    # -- the figures ------------------------------------------------------------------------------

    def finish(self) -> TrialResult:
        """Stop every process and compute the trial's figures."""
        self.services.stop_all()
        result = self.result
        result.seconds = round(self.elapsed(), 1)
        result.processes = "+".join(
            f"{n}×{role}" if n > 1 else role
            for role, n in Counter(s.role for s in self.services.all if s.role != "digest").items()
        )
        logged = sum(s.output().count("Traceback") for s in self.services.all)
        if logged:
            result.notes.append(f"{logged} tracebacks logged")
        counts = self.smtp.handler.counts
        result.refused, result.dropped, result.temporary = counts.refused, counts.dropped, counts.temporary
        mails = self.smtp.mails()
        rows = pair_rows(self.engine)
        with self.engine.connect() as conn:
            paused = {
                a.removeprefix("email:")
                for (a,) in conn.execute(
                    sa.select(SUBSCRIBER.c.address).where(SUBSCRIBER.c.status == SubscriberStatus.PAUSED)
                )
            }
        self.engine.dispose()
        expected = self.bench.expected
        received: Counter[Pair] = Counter((m.recipient, v) for m in mails for v in m.versions)
        sent_state = {(r, v): state == DigestState.SENT for r, v, _, state, _ in rows}
        held = {p for p in expected - received.keys() if p[0] in paused and not sent_state.get(p, False)}
        lost = expected - received.keys() - held
        result.expected, result.mails = len(expected), len(mails)
        result.received = len(expected & received.keys())
        result.lost, result.held, result.paused = len(lost), len(held), len(paused)
        result.duplicated_pairs = sum(n - 1 for n in received.values() if n > 1)
        if lost:
            result.notes.append(f"lost e.g. {sorted(lost)[:3]}")
        unexpected = received.keys() - expected
        if unexpected:
            result.notes.append(f"{len(unexpected)} pairs received that the store does not match")
        if any(m.capped for m in mails):
            result.notes.append("a digest was capped: raise --max-items")
        # Each mail belongs to the digest holding its first item's match (a digest's matches stay with it).
        digest_of = {(r, v): d for r, v, d, _, _ in rows}
        per_digest = Counter(digest_of.get((m.recipient, m.versions[0])) for m in mails if m.versions)
        extra = {d: n - 1 for d, n in per_digest.items() if d is not None and n > 1}
        result.duplicated_mails = sum(extra.values())
        for kill in result.kills:
            kill.duplicated = sum(1 for d in kill.in_flight if d in extra)
        explained = Counter(d for kill in result.kills for d in kill.in_flight)
        result.unexplained_mails = sum(max(0, n - explained[d]) for d, n in extra.items())
        return result


# ------------------------------------------------------------------------------------------------------------
# The fault scripts


def kill_script(trial: Trial) -> None:
    """An ingester and the workers; one or two SIGKILLs at random moments of random live processes.

    Each kill first draws its victim's kind: the ingester (one time in three), at a moment within the
    ingest (the fault-free trial's time to the last match), or a worker, at a moment within the whole
    fault-free trial. A victim that already exited is replaced by another live process.
    """
    ingester = trial.rng.choice(["ingest", "run"])
    trial.start(ingester)
    for _ in range(trial.options.workers):
        trial.start("worker")
    kills = []
    for _ in range(trial.rng.choice([1, 2])):
        if trial.rng.random() < 1 / 3:
            kills.append((trial.rng.uniform(0.3, trial.bench.ingest_window()), ingester))
        else:
            kills.append((trial.rng.uniform(0.3, trial.bench.kill_horizon()), "worker"))
    for at, role in sorted(kills):
        trial.sleep_until(at)
        alive = [s for s in trial.services.alive() if s.role in ("worker", "ingest", "run")]
        candidates = [s for s in alive if s.role == role] or alive
        if candidates:
            trial.kill(trial.rng.choice(candidates))
    trial.settle()


def busiest_kill_script(trial: Trial, *, threshold: int = 3) -> None:
    """``ingest`` and one ``worker``, the only sender; the worker is killed at its worst moment: as soon as
    the SMTP server has accepted ``threshold`` of its sends that the ledger has not recorded, or, if that
    never happens, once every subscriber has mail (or the worker exited). A fresh worker finishes.

    The fast test's kill: a random moment may fall where nothing is in flight and prove nothing.
    """
    trial.start("ingest")
    victim = trial.start("worker")
    everybody = len({r for r, _ in trial.bench.expected})
    seen, most = -1, 0

    def moment() -> bool:
        nonlocal seen, most
        accepted = trial.smtp.accepted()
        if accepted == seen:  # nothing new accepted: the count of unrecorded sends cannot have grown
            return not victim.alive()
        seen = accepted
        most = max(most, len(trial.unrecorded(victim.worker)))
        return most >= threshold or accepted >= everybody

    trial.wait_for(moment, "a moment to kill the worker")
    if victim.alive():
        trial.kill(victim)
    else:
        trial.result.notes.append("the worker exited before the kill")
    if most < threshold:
        trial.result.notes.append(f"at most {most} unrecorded sends seen before the kill")
    trial.start("worker")
    trial.settle()


def race_script(trial: Trial, *, ingester: str | None = None, senders: int | None = None) -> None:
    """No fault: an ingester (``ingest`` or ``run``, drawn) and two or three senders at once (``run``'s
    worker role counts as one)."""
    ingester = ingester or trial.rng.choice(["ingest", "run"])
    senders = senders or trial.rng.choice([2, 3])
    trial.start(ingester)
    for _ in range(senders - (ingester == "run")):
        trial.start("worker")
    trial.settle()


def smtp_script(trial: Trial) -> None:
    """The server's fault is on from the start; an ingest and the workers."""
    trial.start("ingest")
    for _ in range(trial.options.workers):
        trial.start("worker")
    trial.settle()


def refusal_script(trial: Trial) -> None:
    """Server-wide 550: the day is ingested first, then the workers meet a server that refuses every
    recipient; after their first pass that met it the alarm and the paused subscribers are read and the
    server recovers."""
    ingest = trial.start("ingest")
    code = ingest.proc.wait(timeout=WAIT_TIMEOUT)
    if code != 0:
        trial.result.notes.append(f"ingest exited with {code}")
    trial.smtp.refusing.set()
    workers = [trial.start("worker") for _ in range(trial.options.workers)]
    trial.wait_for(
        lambda: trial.smtp.handler.counts.refused and any(w.has_line(FAILED_PASS) for w in workers),
        "a delivery pass that met the refusal",
    )
    trial.result.paused_in_outage = ledger_state(trial.engine).paused
    trial.result.alarm = read_alarm(trial.env, trial.folder)
    trial.smtp.refusing.clear()
    trial.settle()


def leader_script(trial: Trial) -> None:
    """Two schedulers; the leader is killed while it ingests (a random moment after its feed request, within
    the time an ingest takes); the other one must take over and finish the day."""
    runs = [trial.start("run"), trial.start("run")]
    leader = trial.wait_for(
        lambda: next((r for r in runs if r.has_line(LEADING)), None), "a scheduler to lead"
    )
    follower = runs[1 - runs.index(leader)]
    trial.wait_for(lambda: trial.bench.feed_requests(), "the leader's feed request")
    trial.sleep_until(trial.elapsed() + trial.rng.uniform(0.0, trial.bench.ingest_seconds))
    killed_at = time.monotonic()
    trial.kill(leader, restart=False)
    trial.wait_for(lambda: follower.has_line(LEADING), "the other scheduler to take over")
    trial.result.takeover_s = round(time.monotonic() - killed_at, 1)
    trial.settle()


def early_history_script(trial: Trial, *, library_share: float = 0.3, picks_share: float = 0.15) -> None:
    """Before the announcement is ingested, versions of the day reach the store as history the two ways
    production stores them: a reader (who follows nothing) imports a library naming ``library_share`` of
    the day's followed papers, each looked up through the arXiv API (``import_library``, what the CLI and
    the manage page's upload run), and Hugging Face picks of another ``picks_share`` are completed through
    the arXiv API (``save_picks``, then ``complete_papers``). Then ``ingest`` and the workers, as usual."""
    day = parse_feed(trial.bench.feed).items
    followed = sorted({version.rsplit("v", 1)[0] for _, version in trial.bench.expected})
    trial.rng.shuffle(followed)
    library_ids = set(followed[: round(len(followed) * library_share)])
    pick_ids = set(followed[len(library_ids) : len(library_ids) + round(len(followed) * picks_share)])
    newest = {p.arxiv_id: p for p in sorted(day, key=lambda p: p.version)}
    db = Database(trial.engine)
    reader, _ = subscriber_records.ensure_subscriber(
        db, f"email:library-reader@{DOMAIN}", timezone="UTC", schedule="instant"
    )
    assert reader.id is not None
    library = read_library(bibtex_naming([newest[i] for i in sorted(library_ids)]), "reader.bib")
    imported = asyncio.run(import_library(db, reader.id, library, lookup=RecordedLookup(day)))
    paper_records.save_picks(
        db,
        [
            CommunityPick(i, date(2024, 11, 28), newest[i].title, newest[i].abstract, newest[i].authors)
            for i in sorted(pick_ids)
        ],
    )
    completed = asyncio.run(complete_papers(db, RecordedLookup(day)))
    trial.result.notes.append(
        f"before the ingest: {imported.fetched} papers looked up for a library, "
        f"{completed.fetched} picks completed"
    )
    trial.start("ingest")
    for _ in range(trial.options.workers):
        trial.start("worker")
    trial.settle()


# The slow server's case (``smtp-slow``). The server waits 3 to 10 s per mail (bench.chaos_smtp.SLOW_SECONDS)
# and each worker sends through one SMTP session, so a batch of SLOW_BATCH digests takes 75 to 250 s (about
# 160) while the lease is SLOW_LEASE: 4 to 12 leases, and most digests of a batch wait past their claim's
# lease. The lease is still twice the slowest single mail, so without the batch's renewal the duplicates
# come from digests waiting their turn, the defect, and not from one send outliving its lease. The batch is
# larger than half the recipients of the documented run (40): the first worker claims 25, the second 15,
# and once done it looks for work while the first still has some 10 digests waiting, as with the defect's
# 80 digests in batches of 50.
SLOW_LEASE = 20.0
SLOW_BATCH = 25
# The client's SMTP timeout: above the server's slowest answer, so no mail times out after the server took it.
SLOW_SMTP_TIMEOUT = 30
# Settling allows every mail its slowest answer one after another, and a minute more.
SLOW_SETTLE_PER_MAIL = 10.0


def slow_script(trial: Trial) -> None:
    """A slow mail server: the day is ingested first (one digest per subscriber), then two workers send it
    through a server that waits 3 to 10 s before accepting each mail, with the case's lease and batch."""
    trial.env.update(
        PAPERTRAIL_DELIVERY_LEASE_SECONDS=str(SLOW_LEASE),
        PAPERTRAIL_WORKER_BATCH=str(SLOW_BATCH),
        PAPERTRAIL_SMTP_TIMEOUT=str(SLOW_SMTP_TIMEOUT),
    )
    recipients = len({r for r, _ in trial.bench.expected})
    trial.options = dataclasses.replace(
        trial.options,
        settle_timeout=max(trial.options.settle_timeout, recipients * SLOW_SETTLE_PER_MAIL + 60),
    )
    ingest = trial.start("ingest")
    code = ingest.proc.wait(timeout=WAIT_TIMEOUT)
    if code != 0:
        trial.result.notes.append(f"ingest exited with {code}")
    for _ in range(trial.options.workers):
        trial.start("worker")
    trial.settle()


def ingest_race_script(trial: Trial) -> None:
    """Two or three ``papertrail ingest`` of the same source at once (a cron job beside an operator's
    retry), with the workers; then the usual settling. Afterwards no source run may be left ``running``;
    the notes say how each ingest exited and how many runs were left."""
    ingesters = [trial.start("ingest") for _ in range(trial.rng.choice([2, 3]))]
    for _ in range(trial.options.workers):
        trial.start("worker")
    trial.wait_for(lambda: not any(s.alive() for s in ingesters), "the concurrent ingests to end")
    exits = Counter(s.proc.poll() for s in ingesters)
    trial.result.notes.append("ingest exits " + " ".join(f"{n}×{code}" for code, n in sorted(exits.items())))
    trial.settle()
    with trial.engine.connect() as conn:
        left = conn.execute(sa.text("SELECT count(*) FROM source_run WHERE state = 'running'")).scalar_one()
    trial.result.notes.append(f"{left} runs left running")


SCRIPTS: dict[str, Callable[[Trial], None]] = {
    "kill": kill_script,
    "race": race_script,
    "smtp-drop": smtp_script,
    "smtp-451": smtp_script,
    "smtp-550-one": smtp_script,
    "smtp-550-all": refusal_script,
    "leader": leader_script,
    "early-history": early_history_script,
    "smtp-slow": slow_script,
    "ingest-race": ingest_race_script,
}


# ------------------------------------------------------------------------------------------------------------
# The bench: one database kind, its expectation, its trials


class Bench:
    """Trials on one kind of database, sharing the day, the subscribers and the expected pairs."""

    def __init__(self, database: str, options: Options, folder: Path, *, keep: bool = False) -> None:
        self.database = database
        self.options = options
        self.folder = folder
        self.keep = keep
        self.feed = day_feed(options.items)
        self.lines = follow_lines(self.feed, options.subscribers, options.seed)
        self.calibrated: float | None = None
        self.ingested: float | None = None
        self._feed_requests: Callable[[], int] = lambda: 0
        started = time.monotonic()
        with self.database_url() as url:
            self.expected: set[Pair] = expected_pairs(url, self.feed, self.lines)
        # About what one ingest of the day takes (fetch, store, match, fan-out; the reference's, with the
        # migration and the follows): a leader kill falls within this after the leader's feed request.
        self.ingest_seconds = time.monotonic() - started

    @contextmanager
    def database_url(self) -> Iterator[str]:
        """A fresh empty database of this kind, dropped afterwards."""
        url = create_database(self.database, self.options.postgres, self.folder)
        try:
            yield url
        finally:
            drop_database(url, self.options.postgres)
            if self.database == "sqlite":  # the scheduler's lock file (papertrail.service.leader.FileLock)
                Path(url.split("///", 1)[1] + ".scheduler.lock").unlink(missing_ok=True)

    def feed_requests(self) -> int:
        """Requests the current trial's feed server answered."""
        return self._feed_requests()

    def ingest_window(self) -> float:
        """Kills of an ingester fall in [0.3 s, this]: when the fault-free trial had matched everything."""
        return max(1.0, self.ingested or 5.0)

    def kill_horizon(self) -> float:
        """Kills fall in [0.3 s, this]: most of a fault-free trial's duration."""
        if self.options.kill_horizon is not None:
            return self.options.kill_horizon
        return max(1.0, 0.9 * (self.calibrated or 10.0))

    def run(
        self,
        fault: str,
        index: int,
        script: Callable[[Trial], None] | None = None,
        victim: str | None = None,
    ) -> TrialResult:
        """One trial of ``fault`` (``script`` replaces the fault's usual script)."""
        rng = random.Random(f"{self.options.seed}/{self.database}/{fault}/{index}")
        result = TrialResult(self.database, fault, index)
        folder = self.folder / f"{self.database}-{fault}-{index:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        smtp_fault = fault.removeprefix("smtp-") if fault.startswith("smtp-") else "none"
        if fault == "smtp-550-one":
            victim = victim or rng.choice(sorted({r for r, _ in self.expected}))
            result.notes.append(f"refused recipient {victim}")
        with (
            self.database_url() as url,
            feed_server(Reply(200, self.feed), etag=ETAG) as feed,
            recording_smtp(
                smtp_fault, rate=self.options.fault_rate, seed=rng.randrange(2**32), victim=victim
            ) as smtp,
        ):
            seed(url, self.lines)
            self._feed_requests = lambda: len(feed.requests)
            trial = Trial(self, result, url, feed.url, smtp, folder, rng)
            try:
                (script or SCRIPTS[fault])(trial)
            except TimeoutError as exc:
                result.notes.append(str(exc))
            finally:
                trial.finish()
            if fault == "race" and self.calibrated is None and result.settled:
                self.calibrated = result.seconds
                self.ingested = trial.ingested_at
        if result.settled and not result.lost and not self.keep:
            shutil.rmtree(folder, ignore_errors=True)
        return result


# ------------------------------------------------------------------------------------------------------------
# The report


def kill_cell(kill: Kill) -> str:
    """``worker@3.2s 4→4`` : victim, moment, in flight → duplicated (and where the ingest was)."""
    phase = f" {kill.phase}" if kill.role in ("ingest", "run") else ""
    return f"{kill.role}@{kill.at:.1f}s{phase} {len(kill.in_flight)}→{kill.duplicated}"


def trial_table(results: Sequence[TrialResult]) -> str:
    """One row per trial."""
    lines = [
        "| db | fault | # | processes | kills: victim@moment in-flight→dup | expected | received | lost "
        "| held | dup pairs | dup mails | unexplained | paused | alarm | s | notes |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in results:
        kills = ", ".join(kill_cell(k) for k in r.kills)
        paused = f"{r.paused_in_outage} (end {r.paused})" if r.paused_in_outage is not None else str(r.paused)
        alarm = "" if r.fault != "smtp-550-all" else {None: "n/a", True: "yes", False: "no"}[r.alarm]
        notes = "; ".join(
            [*(["not settled"] if not r.settled else []), *r.notes]
            + ([f"take-over {r.takeover_s} s"] if r.takeover_s is not None else [])
            + ([f"{r.refused} refused"] if r.refused else [])
            + ([f"{r.dropped} dropped"] if r.dropped else [])
            + ([f"{r.temporary}×451"] if r.temporary else [])
            + ([f"{r.send_now}× digest --now"] if r.send_now else [])
        )
        lines.append(
            f"| {r.database} | {r.fault} | {r.index} | {r.processes} | {kills} | {r.expected:,} "
            f"| {r.received:,} | {r.lost:,} | {r.held:,} | {r.duplicated_pairs:,} | {r.duplicated_mails} "
            f"| {r.unexplained_mails} | {paused} | {alarm} | {r.seconds:.0f} | {notes} |"
        )
    return "\n".join(lines)


def totals_table(results: Sequence[TrialResult]) -> str:
    """Per database and fault, per database, and in all: sums over the trials."""
    lines = [
        "| db | fault | trials | expected | received | lost | held | dup pairs | dup mails | unexplained "
        "| kills | in flight at kills | max dup mails per kill | paused |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, str], list[TrialResult]] = {}
    for r in results:
        groups.setdefault((r.database, r.fault), []).append(r)
    for r in results:
        groups.setdefault((r.database, "**all**"), []).append(r)
    if len({r.database for r in results}) > 1:
        groups[("**both**", "**all**")] = list(results)
    for (db, fault), rs in groups.items():
        kills = [k for r in rs for k in r.kills]
        lines.append(
            f"| {db} | {fault} | {len(rs)} | {sum(r.expected for r in rs):,} "
            f"| {sum(r.received for r in rs):,} "
            f"| {sum(r.lost for r in rs):,} | {sum(r.held for r in rs):,} "
            f"| {sum(r.duplicated_pairs for r in rs):,} | {sum(r.duplicated_mails for r in rs)} "
            f"| {sum(r.unexplained_mails for r in rs)} | {len(kills)} "
            f"| {sum(len(k.in_flight) for k in kills)} | {max((k.duplicated for k in kills), default=0)} "
            f"| {sum(r.paused for r in rs)} |"
        )
    return "\n".join(lines)


def verdicts(results: Sequence[TrialResult]) -> list[str]:
    """The chaos suite's targets, one line each per database: PASS or FAIL with the figure."""
    lines = []
    for db in sorted({r.database for r in results}):
        mine = [r for r in results if r.database == db]
        killed = [r for r in mine if r.kills]
        kills = [k for r in killed for k in r.kills]
        races = [r for r in mine if r.fault == "race"]
        lost = sum(r.lost for r in mine)
        over = [k for k in kills if k.duplicated > k.sessions]
        unexplained = sum(r.unexplained_mails for r in mine)
        race_dups = sum(r.duplicated_pairs for r in races)
        worst = max((k.duplicated for k in kills), default=0)
        lines += [
            f"{db}: lost pairs over {len(mine)} trials ({len(kills)} kills in {len(killed)} trials): "
            f"{lost} -> {'PASS' if lost == 0 else 'FAIL'}",
            f"{db}: every duplicate was a send in flight at a kill (accepted by the server, not recorded): "
            f"{unexplained} unexplained duplicate mails -> {'PASS' if unexplained == 0 else 'FAIL'}",
            f"{db}: duplicates per kill <= the killed process's sends on the wire "
            f"({SMTP_SESSIONS_PER_PROCESS} SMTP session): {len(over)} of {len(kills)} kills over, "
            f"worst {worst} -> {'PASS' if not over else 'FAIL'}",
            f"{db}: duplicates without kills over {len(races)} race runs: {race_dups} -> "
            f"{'PASS' if race_dups == 0 else 'FAIL'}",
        ]
        slow = [r for r in mine if r.fault == "smtp-slow"]
        if slow:
            dups, lost_slow = sum(r.duplicated_mails for r in slow), sum(r.lost for r in slow)
            lines.append(
                f"{db}: slow SMTP server ({len(slow)} trials, lease {SLOW_LEASE:.0f} s, batch {SLOW_BATCH}): "
                f"{dups} digests sent twice, {lost_slow} pairs lost -> "
                f"{'PASS' if dups == 0 and lost_slow == 0 else 'FAIL'}"
            )
        for r in (r for r in mine if r.fault == "smtp-550-all"):
            alarm = {None: "n/a (no alarm API)", True: "yes", False: "no"}[r.alarm]
            ok = r.paused_in_outage == 0 and r.alarm is True
            lines.append(
                f"{db}: server-wide 550 (trial {r.index}): paused subscribers after one pass "
                f"{r.paused_in_outage}, alarm raised? {alarm} -> {'PASS' if ok else 'FAIL'}"
            )
    return lines


# ------------------------------------------------------------------------------------------------------------
# The command line


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(fault, index) of every trial, in order. A fault-free race comes first: it calibrates the kill
    moments (and counts as a race run)."""
    faults = FAULTS if args.fault == "all" else (args.fault,)

    def count(fault: str) -> int:
        if args.fault != "all" or fault == "kill":
            return int(args.trials)
        return int({"race": args.race_trials, "leader": args.leader_trials}.get(fault, args.smtp_trials))

    # The slow server's case runs with its own lease and batch, and has no kill to calibrate.
    trials = [] if args.fault == "smtp-slow" else [("race", 0)]
    for fault in faults:
        first = 1 if fault == "race" else 0
        trials += [(fault, index) for index in range(first, count(fault))]
    return trials


def load(paths: Sequence[Path]) -> list[TrialResult]:
    """The trials saved by earlier ``--json`` runs."""
    results = []
    for path in paths:
        for saved in json.loads(path.read_text()):
            kills = [Kill(**k) for k in saved.pop("kills")]
            results.append(TrialResult(**saved, kills=kills))
    return results


def report(results: Sequence[TrialResult]) -> bool:
    """Print the tables and the targets; True when every target is met."""
    print(trial_table(results))
    print()
    print(totals_table(results))
    print()
    lines = verdicts(results)
    print("\n".join(lines))
    return all(line.endswith("PASS") for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the trials and print the tables; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--fault", choices=(*FAULTS, *OPT_IN_FAULTS, FIRST_COMMANDS, "all"), default="all")
    parser.add_argument("--trials", type=int, help="trials of --fault (kill trials with 'all'); 30")
    parser.add_argument("--race-trials", type=int, help="fault-free runs with --fault all; 20")
    parser.add_argument("--smtp-trials", type=int, help="trials of each SMTP fault with --fault all; 3")
    parser.add_argument("--leader-trials", type=int, help="leader kills with --fault all; 5")
    parser.add_argument("--subscribers", type=int, default=Options.subscribers)
    parser.add_argument("--items", type=int, help="only the first N items of the recorded day")
    parser.add_argument("--seed", type=int, default=Options.seed)
    parser.add_argument(
        "--lease", type=float, default=Options.lease, help="PAPERTRAIL_DELIVERY_LEASE_SECONDS"
    )
    parser.add_argument(
        "--fault-rate", type=float, default=Options.fault_rate, help="share of mails 451/drop"
    )
    parser.add_argument("--postgres", default=POSTGRES, help="PostgreSQL URL (a schema per trial)")
    parser.add_argument("--json", type=Path, help="also write every trial's figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep every trial's logs (default: failed ones)")
    parser.add_argument("--report", type=Path, nargs="+", help="print the tables of earlier --json files")
    parser.add_argument(
        "--quick", action="store_true", help="the fast test's sizes (bench.chaos.QUICK), 3 trials per fault"
    )
    args = parser.parse_args(argv)
    if args.report:
        return 0 if report(load(args.report)) else 1
    options = Options(
        subscribers=args.subscribers,
        items=args.items,
        seed=args.seed,
        lease=args.lease,
        fault_rate=args.fault_rate,
        postgres=args.postgres,
    )
    counts = QUICK_TRIALS if args.quick else FULL_TRIALS
    for name, default in counts.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.quick:
        options = dataclasses.replace(options, **QUICK)
    databases = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    if "postgresql" in databases and not postgres_reachable(options.postgres):
        print(f"PostgreSQL unreachable at {options.postgres}", file=sys.stderr)
        return 2
    if args.fault == FIRST_COMMANDS:  # chat commands only: none of the ingest-and-mail trial below
        return first_commands(databases, options.postgres, args.trials, options.seed)
    results: list[TrialResult] = []
    keep = Path(tempfile.mkdtemp(prefix="papertrail-chaos-"))
    for database in databases:
        print(f"{database}: the expected pairs (a fault-free ingest) ...", file=sys.stderr, flush=True)
        bench = Bench(database, options, keep, keep=args.keep)
        print(
            f"{database}: {len(bench.expected):,} expected pairs for {options.subscribers} subscribers",
            file=sys.stderr,
            flush=True,
        )
        for fault, index in plan(args):
            result = bench.run(fault, index)
            results.append(result)
            print(trial_table([result]).splitlines()[-1], file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    print(f"\nChaos: {os.cpu_count()} cores; {options}\n")
    met = report(results)
    if args.keep or any(not r.settled or r.lost for r in results):
        print(f"\nlogs of the trials kept in {keep}")
    else:
        shutil.rmtree(keep, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
