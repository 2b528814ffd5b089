"""Benchmark: the production recommendation pass (``core.taste.recommend.recommend_new``) and the
retrain
after a vote (``core.taste.votes.cast_vote``), on SQLite and on PostgreSQL.

The day is the recorded rss.arxiv.org mailing of 28 Nov 2024 (``tests/corpus/arxiv-rss``, 1,504 versions,
933 of them new papers: the pass scores v1 only), stored as news first seen an hour before the pass and
already matched. The other recorded papers (OAI-PMH samples of 2014 and 2016, the snapshot's 2007 head:
2,988 papers) are stored as history; readers' likes are drawn from them and from the day.

**Population** (bulk-inserted, not measured): ``--subscribers`` (default 10,000) active subscribers with
``recommend`` 5, each with a stored model: ``--distinct`` (default 300) models trained with
``core.taste.model.train`` from 3..30 real liked papers, 0..5 disliked ones and 100 of the day's other
papers, their bytes cycled over the subscribers. Each subscriber also holds ``--matches`` (default 20) Match
rows of the day (what its follows brought) and ``--votes`` (default 3) votes on the day's papers: the pass
reads both to leave those papers out.

**The pass**: ``recommend_new`` as the worker runs it before digest planning (first pass: the last day's
news), timed as wall and CPU seconds of this process, with the time spent in its parts (vectorising,
reading the models, scoring, explaining the picks, SQL) measured by wrapping the functions it calls.
Target: under 10 s on one core for 10,000 subscribers with models.

**A vote**: ``--vote-readers`` readers with 3, 10, 30 or 100 likes stored as votes each cast one more like
through ``core.taste.votes.cast_vote`` (which records it and retrains: ``core.taste.training.retrain`` reads
the
signals, trains, stores the model). Target: under 50 ms. Stored model sizes: target under 100 KB.

numpy and scipy are held to one thread. The machine is shared: CPU seconds are the comparable figure.

``--as-new`` stores every version of the day as v1, so that the pass scores all 1,504 (the issue's figure).

Usage: python bench/recommend_pass.py [--subscribers 10000] [--distinct 300] [--matches 20] [--votes 3]
                                      [--vote-readers 40] [--repeat 2] [--db sqlite,postgresql] [--as-new]
"""

from __future__ import annotations

import os

from core.follows import subscriber_records
from core.papers import paper_records

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlmodel import SQLModel  # noqa: E402

import core.follows.match_records  # noqa: E402
import core.taste.recommend  # noqa: E402
import core.taste.recommend_records  # noqa: E402
from bench.recommend import example, other_papers  # noqa: E402
from core.db import Database, make_engine  # noqa: E402
from core.db_migrate import migrate  # noqa: E402
from core.models import LIKE, utcnow  # noqa: E402
from core.papers.paper_records import Novelty  # noqa: E402
from core.reasons import CATEGORY, Reason, hit_data  # noqa: E402
from core.taste import model as tm  # noqa: E402
from core.taste.model_format import TasteModel  # noqa: E402
from core.taste.votes import cast_vote  # noqa: E402
from core.values import PaperIn  # noqa: E402
from ingest.arxiv_rss_parse import parse_feed  # noqa: E402
from tests.conftest import BIG_FEED, POSTGRES_URL  # noqa: E402

TARGET_PASS_S = 10.0
TARGET_VOTE_MS = 50.0
TARGET_MODEL_BYTES = 100_000
CHUNK = 10_000
RECOMMEND = 5
TABLES = {name: SQLModel.metadata.tables[name] for name in ("subscriber", "taste_model", "match", "vote")}


class Timers:
    """CPU seconds spent in wrapped functions, by label (nested calls count in both)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[label] += time.process_time() - start

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def undo(self) -> None:
        for step in reversed(self._undo):
            step()


def the_day(*, as_new: bool = False) -> list[PaperIn]:
    """The recorded day; with ``as_new`` every version is stored as v1, so that the pass scores all 1,504
    (the issue's figure) rather than the 933 new papers."""
    papers = list(parse_feed(BIG_FEED.read_bytes()).items)
    return [dataclasses.replace(p, version=1) for p in papers] if as_new else papers


def train_models(day: list[PaperIn], pool: list[PaperIn], distinct: int) -> list[bytes]:
    """``distinct`` models from real papers, as bench/recommend.py trains them."""
    rng = random.Random(17)
    blobs = []
    for _ in range(distinct):
        liked, disliked = rng.randint(3, 30), rng.randint(0, 5)
        picked = rng.sample(pool + day, liked + disliked)
        model = tm.train(
            tm.Signals(
                [example(p) for p in picked[:liked]],
                [example(p) for p in picked[liked:]],
                [example(p) for p in rng.sample(day, tm.IMPLICIT_SAMPLE)],
            )
        )
        assert model is not None
        blobs.append(model.to_bytes())
    return blobs


def _chunks(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def populate(
    db: Database, args: argparse.Namespace, day: list[PaperIn], pool: list[PaperIn], blobs: list[bytes]
) -> None:
    """The library, the subscribers, their models, matches and votes (not measured)."""
    now = utcnow()
    paper_records.save_versions(db, pool, now=now - timedelta(days=30), novelty=Novelty.HISTORY)
    paper_records.save_versions(db, day, now=now - timedelta(hours=1))
    engine, t = db.engine, TABLES
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE version SET matched_at = first_seen_at WHERE matched_at IS NULL"))
        day_ids = [
            int(v) for v in conn.execute(sa.text("SELECT id FROM version WHERE news ORDER BY id")).scalars()
        ]
    rng = random.Random(5)
    for rows in _chunks(
        {
            "address": f"email:reader{n}@example.org",
            "timezone": "UTC",
            "schedule": "daily 08:00",
            "status": "active",
            "created_at": now - timedelta(days=3),
            "failures": 0,
            "recommend": RECOMMEND,
        }
        for n in range(args.subscribers)
    ):
        with engine.begin() as conn:
            conn.execute(sa.insert(t["subscriber"]), rows)
    with engine.begin() as conn:
        ids = [int(i) for i in conn.execute(sa.text("SELECT id FROM subscriber ORDER BY id")).scalars()]
    for rows in _chunks(
        {
            "subscriber_id": sid,
            "data": blobs[n % len(blobs)],
            "positives": 10,
            "negatives": 2,
            "trained_at": now,
        }
        for n, sid in enumerate(ids)
    ):
        with engine.begin() as conn:
            conn.execute(sa.insert(t["taste_model"]), rows)
    hit = [hit_data([Reason(CATEGORY, "cs.LG")], follow=1)]
    for rows in _chunks(
        {
            "subscriber_id": sid,
            "version_id": vid,
            "follow_ids": [1],
            "reasons": hit,
            "created_at": now,
            "instant": False,
        }
        for sid in ids
        for vid in rng.sample(day_ids, args.matches)
    ):
        with engine.begin() as conn:
            conn.execute(sa.insert(t["match"]), rows)
    for rows in _chunks(
        {"subscriber_id": sid, "version_id": vid, "value": rng.choice((1, -1)), "created_at": now}
        for sid in ids
        for vid in rng.sample(day_ids, args.votes)
    ):
        with engine.begin() as conn:
            conn.execute(sa.insert(t["vote"]), rows)


def run_pass(db: Database) -> tuple[float, float, core.taste.recommend.PassReport, dict[str, float]]:
    """One production pass: wall and CPU seconds, its report, and the CPU seconds of its parts."""
    timers = Timers()
    timers.wrap(tm, "vectorise", "vectorise (once)")
    timers.wrap(TasteModel, "from_bytes", "read models (from_bytes)")
    timers.wrap(tm, "score_many", "score_many")
    timers.wrap(tm, "prepare", "prepare the picked papers' texts (once each)")
    timers.wrap(tm, "explain_version", "explain the picks (per paper, for all its models)")
    for name in ("next_papers", "models", "unsent", "excluded", "write"):
        timers.wrap(core.taste.recommend_records, name, f"SQL: {name}")
    timers.wrap(core.follows.match_records, "expand_matches", "SQL: expand_matches")
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        report = core.taste.recommend.recommend_new(db)
        return time.perf_counter() - wall, time.process_time() - cpu, report, dict(timers.spent)
    finally:
        timers.undo()


def reset(db: Database) -> None:
    """Undo a pass: its rows and the cursor."""
    with db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM match WHERE CAST(follow_ids AS TEXT) = '[]'"))
        conn.execute(sa.text("DELETE FROM recommend_cursor"))


def votes(
    db: Database, args: argparse.Namespace, day: list[PaperIn], pool: list[PaperIn]
) -> tuple[list[float], list[float], list[int]]:
    """Readers with 3, 10, 30 or 100 stored likes cast one more: wall and CPU ms of each cast_vote, and the
    sizes of the models they leave."""
    rng = random.Random(9)
    wall_ms: list[float] = []
    cpu_ms: list[float] = []
    sizes: list[int] = []
    for n in range(args.vote_readers):
        liked = (3, 10, 30, 100)[n % 4]
        subscriber, _ = subscriber_records.ensure_subscriber(
            db, f"email:voter{n}@example.org", timezone="UTC", schedule="daily 08:00"
        )
        sid = subscriber.id or 0
        picked = rng.sample(pool, liked + 1)
        with db.engine.begin() as conn:
            found: dict[str, int] = dict(
                conn.execute(
                    sa.text("SELECT paper_id, id FROM version WHERE paper_id IN :ids").bindparams(
                        sa.bindparam("ids", expanding=True)
                    ),
                    {"ids": [p.arxiv_id for p in picked]},
                ).all()
            )
            conn.execute(
                sa.insert(TABLES["vote"]),
                [
                    {
                        "subscriber_id": sid,
                        "version_id": found[p.arxiv_id],
                        "value": LIKE,
                        "created_at": utcnow(),
                    }
                    for p in picked[:-1]
                ],
            )
        wall, cpu = time.perf_counter(), time.process_time()
        cast_vote(db, sid, picked[-1].arxiv_id, LIKE)
        wall_ms.append((time.perf_counter() - wall) * 1e3)
        cpu_ms.append((time.process_time() - cpu) * 1e3)
        with db.engine.begin() as conn:
            size = conn.execute(
                sa.text("SELECT length(data) FROM taste_model WHERE subscriber_id = :s"), {"s": sid}
            ).scalar_one()
        sizes.append(int(size))
    return wall_ms, cpu_ms, sizes


@contextmanager
def database(kind: str) -> Iterator[Database]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            engine = make_engine(f"sqlite:///{folder}/bench.db")
            migrate(engine)
            yield Database(engine)
            engine.dispose()
        return
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in POSTGRES_URL else "?"
    engine = make_engine(f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}")
    try:
        migrate(engine)
        yield Database(engine)
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def yes(value: float, target: float) -> str:
    return f"{'yes' if value < target else 'no'} ({value / target:.2f} of it)"


def table(
    args: argparse.Namespace,
    day: list[PaperIn],
    runs: list[tuple[float, float, core.taste.recommend.PassReport, dict[str, float]]],
    vote: tuple[list[float], list[float]],
    sizes: list[int],
) -> list[str]:
    """The Markdown rows of one database's results."""
    wall, cpu, report, parts = min(runs, key=lambda run: run[1])
    vote_wall, vote_cpu = vote
    vote_ms = statistics.median(vote_cpu)
    sizes = sorted(sizes)
    n = args.subscribers
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    return [
        "| measure | value | target | met |",
        "|---|---:|---:|---|",
        f"| the pass, {n:,} subscribers with models × {report.papers:,} new papers (of {len(day):,} "
        f"versions), CPU, best of {len(runs)} | {cpu:.2f} s | < {TARGET_PASS_S:.0f} s "
        f"| {yes(cpu, TARGET_PASS_S)} |",
        f"| the same pass, wall | {wall:.2f} s | | |",
        *(
            f"| … {label} (CPU) | {seconds:.2f} s | | |"
            for label, seconds in sorted(parts.items(), key=lambda item: -item[1])
        ),
        f"| recommendations written | {report.written:,} ({report.written / n:.2f} a subscriber) | | |",
        f"| a like through cast_vote (retrain included), {len(vote_cpu)} readers of 3–100 likes, median / "
        f"p90 CPU | {vote_ms:.0f} / {_p(vote_cpu, 0.9):.0f} ms | < {TARGET_VOTE_MS:.0f} ms "
        f"| {yes(vote_ms, TARGET_VOTE_MS)} |",
        f"| the same, wall median / p90 | {statistics.median(vote_wall):.0f} / {_p(vote_wall, 0.9):.0f} ms "
        "| | |",
        f"| stored model, median / max of {len(sizes)} | {sizes[len(sizes) // 2] / 1e3:.1f} / "
        f"{sizes[-1] / 1e3:.1f} KB | < 100 KB | {yes(sizes[-1], TARGET_MODEL_BYTES)} |",
        f"| process peak RSS | {rss:,.0f} MiB | | |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--distinct", type=int, default=300)
    parser.add_argument("--matches", type=int, default=20)
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--vote-readers", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--db", default="sqlite,postgresql")
    parser.add_argument("--as-new", action="store_true", help="Store every version of the day as v1.")
    args = parser.parse_args()
    day, pool = the_day(as_new=args.as_new), other_papers()
    started = time.process_time()
    blobs = train_models(day, pool, args.distinct)
    sizes = sorted(len(b) for b in blobs)
    print(f"trained {len(blobs)} distinct models in {time.process_time() - started:.1f} s CPU", flush=True)
    for kind in args.db.split(","):
        with database(kind) as db:
            started = time.perf_counter()
            populate(db, args, day, pool, blobs)
            print(f"{kind}: population in {time.perf_counter() - started:.0f} s", flush=True)
            runs = []
            for attempt in range(args.repeat):
                if attempt:
                    reset(db)
                runs.append(run_pass(db))
                wall, cpu, report, _ = runs[-1]
                print(f"{kind}: pass {attempt + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU, {report}", flush=True)
            vote_wall, vote_cpu, vote_sizes = votes(db, args, day, pool)
            print(f"\n### {kind}\n")
            for line in table(args, day, runs, (vote_wall, vote_cpu), sizes + vote_sizes):
                print(line)
            print(flush=True)


if __name__ == "__main__":
    main()
