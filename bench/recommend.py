"""Benchmark: learned follows (``core.taste.model``): the cost at 10,000 subscribers, the quality.

The day is the recorded rss.arxiv.org mailing of 28 Nov 2024 (``tests/corpus/arxiv-rss``, 1,504 versions, all
20 archives). Everything runs through the functions production calls: ``train`` (or ``train_vectors``),
``TasteModel.to_bytes`` / ``from_bytes``, ``vectorise``, ``score_many`` and ``top_n``.

**Cost.** ``--distinct`` models (default 1,000) are trained with ``train(Signals(...))`` from real papers:
3..30 liked each, drawn from the day and the other recorded papers under ``tests/corpus`` (OAI-PMH samples
of 2014 and 2016, the snapshot's 2007 head: 2,988 papers in all), 0..5 disliked from the same pool and 100
implicit negatives from the day. Each training is timed: that is what a vote costs (the model is retrained
from the subscriber's signals); the caps (100 liked, 100 disliked, 200 implicit) are timed apart. Their
bytes, cycled, stand for ``--subscribers`` (default 10,000) stored models; the scoring pass loads them
(``from_bytes``, reported apart), vectorises the day once, scores the models in batches of ``--batch`` (one
``score_many`` call each) and takes each subscriber's top 10 above the threshold (``top_n``). Times are CPU
seconds of this one process (BLAS held to one thread), median of ``--repeat`` passes; the machine is shared.

**Quality** (``bench/recommend_quality.py``). Simulated readers: the day's papers sharing a pair of
categories (``cs.LG`` and ``eess.SP``), for each pair held by at least 10 versions, one reader per distinct
set of papers (an alias pair such as ``math-ph``/``math.MP`` counts once). Per reader, ``--draws`` times: 5
of its papers are the seeds and the others are to be found among all the day's versions but the seeds;
precision@10 and recall@50 are averaged per reader, then over readers (± the standard error over readers;
the last two columns: the difference from the model reader by reader, same seeds, ± its standard error):

* random: a seeded shuffle;
* best category follow: the category that holds the most seeds (ties: the smaller category), its versions
  first in random order, then the rest;
* BM25 over the seeds (k1 1.2, b 0.75, the day's IDF; query: every term of the seeds, weighted by how many
  seeds hold it), over the same hashed n-grams as the model;
* the model: ``train_vectors`` with the seeds as liked papers and 100 of the day's other versions (random;
  held-out papers of the reader may be among them, as in production) as implicit negatives;
* the model with 5 dislikes as well: versions of the seeds' best category outside the reader's set.

"True cross-listings" are the readers whose set is smaller than each of its two categories, so that no
single category follow describes them exactly. A second table has readers of two interests: two such
readers sharing no category and no paper, 5 seeds from each. The threshold tables give, per threshold,
how many versions a reader gets that day, the precision of those and the recall. ``--ablation`` compares
the choices: the number of kept weights K, the implicit sample size, an IDF (of the day itself; or frozen
from the other recorded papers) and SGD instead of liblinear.

Usage: python bench/recommend.py [--quick] [--ablation] [--subscribers 10000] [--distinct 1000]
                                 [--batch 10000] [--draws 10] [--repeat 3] [--cost-only]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TypeVar  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.recommend_quality import quality  # noqa: E402
from core.taste import model as tm  # noqa: E402
from core.taste.model_format import TasteModel  # noqa: E402
from core.values import PaperIn  # noqa: E402
from ingest.arxiv_oai_parse import parse_oai  # noqa: E402
from ingest.arxiv_rss_parse import parse_feed  # noqa: E402
from ingest.snapshot_parse import SnapshotRecord, iter_snapshot, open_snapshot  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
FEED = CORPUS / "arxiv-rss" / "aioarxiv_rss_mock_feed.xml"
OAI = (
    "litpuvn_ListRecords_arXivRaw_from2016-10-20.xml",
    "scrapi_ListRecords_oai_dc_2014-12-24_2014-12-25.xml",
)
SNAPSHOT = CORPUS / "arxiv-snapshot" / "wanng-ide_arxiv-metadata-oai-snapshot_first200.jsonl"
IMPLICIT = tm.IMPLICIT_SAMPLE
_T = TypeVar("_T")


def example(p: PaperIn) -> tm.Example:
    """A recorded version as a training example."""
    return tm.Example(p.title, p.abstract, p.arxiv_id)


def other_papers() -> list[PaperIn]:
    """The recorded papers of other days: the OAI-PMH samples (2014, 2016) and the snapshot head (2007)."""
    papers: list[PaperIn] = []
    for name in OAI:
        for record in parse_oai((CORPUS / "arxiv-oai" / name).read_bytes()).records:
            if record.metadata is not None:
                papers.append(record.latest or record.paper(1))
    with open_snapshot(SNAPSHOT) as stream:
        papers += [r.versions[-1] for r in iter_snapshot(stream) if isinstance(r, SnapshotRecord)]
    return papers


def cpu(fn: Callable[[], _T]) -> tuple[float, _T]:
    """CPU seconds of this process spent in ``fn``, and its result."""
    start = time.process_time()
    result = fn()
    return time.process_time() - start, result


def cost(args: argparse.Namespace, day: list[PaperIn], pool: list[PaperIn]) -> list[str]:
    """Train, store, load and score; the Markdown rows of the cost table."""
    rng = random.Random(17)
    train_times: list[float] = []
    blobs: list[bytes] = []
    for _ in range(args.distinct):
        liked, disliked = rng.randint(3, 30), rng.randint(0, 5)
        picked = rng.sample(pool, liked + disliked)
        signals = tm.Signals(
            [example(p) for p in picked[:liked]],
            [example(p) for p in picked[liked:]],
            [example(p) for p in rng.sample(day, IMPLICIT)],
        )
        seconds, model = cpu(functools.partial(tm.train, signals))
        assert model is not None
        train_times.append(seconds)
        blobs.append(model.to_bytes())
    worst = tm.Signals(
        [example(p) for p in rng.sample(pool, tm.MAX_POSITIVES)],
        [example(p) for p in rng.sample(pool, tm.MAX_NEGATIVES)],
        [example(p) for p in rng.sample(day, tm.MAX_IMPLICIT)],
    )
    worst_times = [cpu(lambda: tm.train(worst))[0] for _ in range(5)]
    sizes = sorted(len(b) for b in blobs)

    stored = [blobs[i % len(blobs)] for i in range(args.subscribers)]
    load_s, models = cpu(lambda: [TasteModel.from_bytes(b) for b in stored])
    texts = [(p.title, p.abstract) for p in day]
    passes: list[tuple[float, float, float, float]] = []
    for _ in range(args.repeat):
        wall = time.perf_counter()
        vec_s, versions = cpu(functools.partial(tm.vectorise, texts))
        score_s = pick_s = 0.0
        picked_total = 0
        for start in range(0, len(models), args.batch):
            seconds, scores = cpu(
                functools.partial(tm.score_many, models[start : start + args.batch], versions)
            )
            score_s += seconds
            seconds, tops = cpu(functools.partial(tm.top_n, scores, 10))
            pick_s += seconds
            picked_total += sum(len(t) for t in tops)
            del scores
        passes.append((vec_s, score_s, pick_s, time.perf_counter() - wall))
    vec_s, score_s, pick_s, wall_s = (statistics.median(p[i] for p in passes) for i in range(4))
    # The reasons of the first 1,000 readers' recommendations, as a digest pass would ask for them (the
    # same versions recur across readers: each version's analysis is cached).
    some = models[:1000]
    tops = tm.top_n(tm.score_many(some, versions), 10)
    picks = [(m, day[c]) for m, top in zip(some, tops, strict=True) for c in top]
    explain_s, _ = cpu(lambda: [tm.explain(m, p.title, p.abstract) for m, p in picks])
    total = vec_s + score_s + pick_s
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    train_med = statistics.median(train_times)
    train_p95 = sorted(train_times)[int(0.95 * (len(train_times) - 1))]
    print(f"scoring passes (vectorise, score_many, top_n, wall): {passes}; recommended {picked_total:,}")
    n, v = args.subscribers, len(day)
    return [
        "| measure | value | target | met |",
        "|---|---:|---:|---|",
        f"| scoring pass, {n:,} models × {v:,} versions: vectorise + score_many + top_n (CPU) "
        f"| {total:.2f} s ({vec_s:.2f} + {score_s:.2f} + {pick_s:.2f}) | < 10 s "
        f"| {'yes' if total < 10 else 'no'} ({total / 10:.2f} of it) |",
        f"| the same pass, wall time (batches of {min(args.batch, n):,} models) | {wall_s:.2f} s | | |",
        f"| per subscriber | {total / n * 1e6:,.0f} µs | | |",
        f"| loading the {n:,} models (from_bytes), once per pass | {load_s:.2f} s | | |",
        f"| explain() for the {len(picks):,} recommendations of {len(some):,} readers "
        f"| {explain_s:.2f} s ({explain_s / max(len(picks), 1) * 1e6:,.0f} µs each) | | |",
        f"| retrain after a vote: train(Signals), 3–30 liked, 0–5 disliked, {IMPLICIT} implicit "
        "(median / p95) "
        f"| {train_med * 1e3:.0f} / {train_p95 * 1e3:.0f} ms | < 50 ms "
        f"| {'yes' if train_med < 0.05 else 'no'} ({train_med / 0.05:.2f} of it) |",
        f"| retrain at the caps: {tm.MAX_POSITIVES} liked, {tm.MAX_NEGATIVES} disliked, "
        f"{tm.MAX_IMPLICIT} implicit (median of 5) | {statistics.median(worst_times) * 1e3:.0f} ms | | |",
        f"| stored model (to_bytes), median / max of {len(sizes):,} | {sizes[len(sizes) // 2] / 1e3:.1f} / "
        f"{sizes[-1] / 1e3:.1f} KB | < 100 KB | {'yes' if sizes[-1] < 100_000 else 'no'} "
        f"({sizes[-1] / 100_000:.2f} of it) |",
        f"| process peak RSS | {rss:,.0f} MiB | | |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000 subscribers, 200 models, 3 draws")
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument(
        "--distinct", type=int, default=1_000, help="models trained (cycled to --subscribers)"
    )
    parser.add_argument("--batch", type=int, default=10_000, help="models per score_many call")
    parser.add_argument("--draws", type=int, default=10, help="seed draws per simulated reader")
    parser.add_argument("--repeat", type=int, default=3, help="scoring passes (median reported)")
    parser.add_argument("--ablation", action="store_true", help="compare K, IDF, sample size, SGD")
    parser.add_argument("--cost-only", action="store_true", help="skip the quality tables")
    args = parser.parse_args()
    if args.quick:
        args.subscribers, args.distinct, args.draws, args.repeat, args.ablation = 1_000, 200, 3, 1, False
    day = list(parse_feed(FEED.read_bytes()).items)
    pool = day + other_papers()
    print(f"{len(day):,} versions in the day; {len(pool):,} real papers in the training pool", flush=True)
    lines = [] if args.cost_only else quality(args, day, pool)
    lines = [*cost(args, day, pool), "", *lines]
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
