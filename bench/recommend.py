"""Benchmark: learned follows (issue 17, ``core.taste_model``): the cost at 10,000 subscribers, the quality.

The day is the recorded rss.arxiv.org mailing of 28 Nov 2024 (``tests/corpus/arxiv-rss``, 1,504 versions, all
20 archives). Everything runs through the functions production calls: ``train`` (or ``train_vectors``),
``TasteModel.to_bytes`` / ``from_bytes``, ``vectorise``, ``score_many`` and ``top_n``.

**Cost.** ``--distinct`` models (default 1,000) are trained with ``train(Signals(...))`` from real papers:
3..30 positives each, drawn from the day and the other recorded papers under ``tests/corpus`` (OAI-PMH
samples of 2014 and 2016, the snapshot's 2007 head: 2,988 papers in all), 0..5 dislikes from the same pool
and 50 implicit negatives from the day. Each training is timed: that is what a vote costs (the model is
retrained from the subscriber's signals). The worst case at the caps (100 liked, 100 disliked, 200
implicit) is timed apart. Their bytes, cycled, stand for ``--subscribers`` (default 10,000) stored models;
the scoring pass loads them (``from_bytes``), vectorises the day once, scores every model in batches of
``--batch`` (one ``score_many`` call each) and takes each subscriber's top 10 above the threshold. Times are
CPU seconds of this one process (numpy and scipy are held to one thread); the machine is shared.

**Quality.** Simulated readers: the day's papers that share a pair of categories (``cs.LG`` and ``eess.SP``),
for each pair held by at least 10 versions, one reader per distinct set of papers (so an alias pair such as
``math-ph``/``math.MP`` counts once). Per reader, ``--draws`` times: 5 of its papers are the seeds, the
others (5 or more) are to be found among all the day's versions but the seeds. Each ranking gives
precision@10 and recall@50, averaged per reader, then over readers (± the standard error over readers):

* random: a seeded shuffle;
* best category follow: the category that holds the most seeds (ties: the smaller category), its versions
  first in random order, then the rest;
* BM25 over the seeds (k1 1.2, b 0.75, the day's IDF; query: every term of the seeds, weighted by how many
  seeds hold it), over the same hashed n-grams as the model;
* the model: the seeds as positives and 50 of the day's other versions (random; held-out papers of the
  reader may be among them, as they would be in production) as implicit negatives;
* the model with 5 dislikes as well: versions of the seeds' best category outside the reader's set.

"True cross-listings" are the readers whose set is smaller than each of its two categories, so that no
single category follow can describe them exactly. The model's threshold table gives, per threshold, how
many versions a reader would get that day, the precision of those and the recall. ``--ablation`` (not with
``--quick``) compares the choices: the number of kept weights K, the implicit sample size, an IDF (of the
day itself, stale-prone; or frozen from the other recorded papers) and SGD instead of liblinear.

Usage: python bench/recommend.py [--quick] [--subscribers 10000] [--distinct 1000] [--batch 10000]
                                 [--draws 10] [--ablation]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import itertools  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TypedDict, TypeVar  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from sklearn.preprocessing import normalize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core import taste_model as tm  # noqa: E402
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
SEEDS = 5
IMPLICIT = tm.IMPLICIT_SAMPLE
THRESHOLDS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
_T = TypeVar("_T")


class Result(TypedDict):
    """One ranking's precision@10 and recall@50 per reader; per threshold: recommended, right, relevant."""

    readers: dict[str, tuple[float, float]]
    thresholds: dict[float, list[int]]


Ranker = Callable[[list[int], random.Random], np.ndarray]


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
    load_s, models = cpu(lambda: [tm.TasteModel.from_bytes(b) for b in stored])
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


class Quality:
    """The day, its readers, and rankings to compare on them."""

    def __init__(self, day: list[PaperIn], draws: int, *, two_interests: bool = False) -> None:
        """Readers of one cross-listing each, or with ``two_interests`` of two unrelated ones each."""
        self.day, self.draws = day, draws
        self.n = len(day)
        self.texts = [(p.title, p.abstract) for p in day]
        self.rows = tm.vectorise(self.texts)
        self.categories: dict[str, set[int]] = defaultdict(set)
        pairs: dict[tuple[str, str], set[int]] = defaultdict(set)
        for i, p in enumerate(day):
            for c in set(p.categories):
                self.categories[c].add(i)
            for pair in itertools.combinations(sorted(set(p.categories)), 2):
                pairs[pair].add(i)
        # A reader: its name and the papers of each of its interests.
        self.readers: dict[str, tuple[frozenset[int], ...]] = {}
        crossed: set[str] = set()
        for pair, members in sorted(pairs.items()):
            if len(members) >= 10 and (frozenset(members),) not in self.readers.values():
                self.readers["+".join(pair)] = (frozenset(members),)
                if all(len(members) < len(self.categories[c]) for c in pair):
                    crossed.add("+".join(pair))
        if two_interests:
            # As many readers again, each of two cross-listings sharing no category and no paper.
            single, rng = sorted(self.readers.items()), random.Random(2)
            self.readers = {}
            while len(self.readers) < len(single):
                (a, (ma,)), (b, (mb,)) = rng.sample(single, 2)
                if not set(a.split("+")) & set(b.split("+")) and not ma & mb:
                    self.readers[f"{a} & {b}"] = (ma, mb)
            crossed = {k for k in self.readers if all(part in crossed for part in k.split(" & "))}
        self.crossed = crossed
        self.bm25 = self._bm25_matrix()
        self.reader: frozenset[int] = frozenset()

    def _bm25_matrix(self, k1: float = 1.2, b: float = 0.75) -> sp.csr_matrix:
        counts = tm.term_counts(self.texts).astype(np.float64)
        self.present = (counts > 0).astype(np.float64).tocsr()
        length = np.asarray(counts.sum(axis=1)).ravel()
        df = np.bincount(counts.indices, minlength=tm.N_FEATURES)
        idf = np.log(1 + (self.n - df + 0.5) / (df + 0.5))
        row_of = np.repeat(np.arange(self.n), np.diff(counts.indptr))
        tf = counts.data
        counts.data = (
            idf[counts.indices] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length[row_of] / length.mean()))
        )
        return counts

    def shuffled(self, seeds: list[int], rng: random.Random) -> np.ndarray:
        """A shuffle."""
        return np.array([rng.random() for _ in range(self.n)])

    def best_category(self, seeds: list[int]) -> str:
        """The category holding the most seeds; the smaller one on a tie."""
        held = Counter(c for i in seeds for c in set(self.day[i].categories))
        return max(held, key=lambda c: (held[c], -len(self.categories[c]), c))

    def category(self, seeds: list[int], rng: random.Random) -> np.ndarray:
        """The best category follow: its versions first, each group shuffled."""
        scores = self.shuffled(seeds, rng)
        scores[list(self.categories[self.best_category(seeds)])] += 1
        return scores

    def bm25_rank(self, seeds: list[int], rng: random.Random) -> np.ndarray:
        """BM25 with the seeds' terms as the query, each weighted by the number of seeds holding it."""
        query = np.asarray(self.present[seeds].sum(axis=0)).ravel()
        scores: np.ndarray = np.asarray(self.bm25 @ query).ravel()
        return scores

    def model(
        self,
        rows: sp.csr_matrix | None = None,
        implicit: int = IMPLICIT,
        dislikes: int = 0,
        fit: Callable[..., tm.TasteModel | None] = tm.train_vectors,
        **options: object,
    ) -> Ranker:
        """The learned model over ``rows`` (the production features unless given)."""
        x = self.rows if rows is None else rows

        def rank(seeds: list[int], rng: random.Random) -> np.ndarray:
            others = [i for i in range(self.n) if i not in seeds]
            near = sorted(self.categories[self.best_category(seeds)] - self.reader)
            disliked = rng.sample(near, min(dislikes, len(near)))
            model = fit(
                x[seeds],
                [self.day[i].arxiv_id for i in seeds],
                x[disliked],
                x[rng.sample(others, implicit)],
                **options,
            )
            assert model is not None
            scores: np.ndarray = tm.score_many([model], x)[0]
            return scores

        return rank

    def evaluate(self, ranker: Ranker, thresholds: bool = False) -> Result:
        """Precision@10 and recall@50 per reader (and per threshold), over the same seeds for every ranker."""
        rng = random.Random(1)
        per_reader: dict[str, tuple[float, float]] = {}
        counts = {t: [0, 0, 0] for t in THRESHOLDS}  # recommended, relevant among them, relevant in all
        for name, interests in self.readers.items():
            hits: list[tuple[float, float]] = []
            members = self.reader = frozenset().union(*interests)
            for _ in range(self.draws):
                seeds = [i for part in interests for i in rng.sample(sorted(part), SEEDS)]
                scores = np.array(ranker(seeds, random.Random(rng.random())), dtype=np.float64)
                scores[seeds] = -np.inf
                order = np.argsort(-scores, kind="stable")
                relevant = members - set(seeds)
                hits.append(
                    (
                        len(relevant & set(order[:10].tolist())) / 10,
                        len(relevant & set(order[:50].tolist())) / len(relevant),
                    )
                )
                for t in THRESHOLDS if thresholds else ():
                    chosen = set(np.flatnonzero(scores >= t).tolist())
                    counts[t][0] += len(chosen)
                    counts[t][1] += len(chosen & relevant)
                    counts[t][2] += len(relevant)
            per_reader[name] = (statistics.mean(h[0] for h in hits), statistics.mean(h[1] for h in hits))
        return Result(readers=per_reader, thresholds=counts)

    def row(self, label: str, result: Result, base: Result) -> str:
        """One Markdown row: P@10 and R@50 over all readers and over the true cross-listings (± the standard
        error over readers), and the difference from ``base`` reader by reader (paired: same seeds)."""
        per, ref = result["readers"], base["readers"]

        def cell(values: list[float], signed: bool = False) -> str:
            if not values:
                return "–"
            se = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
            return f"{statistics.mean(values):{'+' if signed else ''}.3f} ± {se:.3f}"

        crossed = [v for k, v in per.items() if k in self.crossed]
        return (
            f"| {label} | {cell([v[0] for v in per.values()])} | {cell([v[1] for v in per.values()])} "
            f"| {cell([v[0] for v in crossed])} | {cell([v[1] for v in crossed])} "
            f"| {cell([per[k][0] - ref[k][0] for k in per], True)} "
            f"| {cell([per[k][1] - ref[k][1] for k in per], True)} |"
        )


def quality(args: argparse.Namespace, day: list[PaperIn], pool: list[PaperIn]) -> list[str]:
    """The quality tables, as Markdown lines: readers of one interest, then of two."""
    lines: list[str] = []
    for two in (False, True):
        q = Quality(day, args.draws, two_interests=two)
        sizes = [sum(len(m) for m in parts) for parts in q.readers.values()]
        print(
            f"{len(q.readers)} readers ({len(q.crossed)} true cross-listings), {min(sizes)}..{max(sizes)} "
            f"versions each, {args.draws} draws of {SEEDS} seeds per interest",
            flush=True,
        )
        runs: list[tuple[str, Ranker]] = [
            ("random", q.shuffled),
            ("best single category follow", q.category),
            ("BM25 over the seeds", q.bm25_rank),
            (f"model, {IMPLICIT} implicit negatives", q.model()),
        ]
        if not two:
            runs.append((f"model, {IMPLICIT} implicit negatives + 5 dislikes", q.model(dislikes=5)))
        if args.ablation:
            runs += ablations(q, pool) if not two else ablations_k(q)
        kind = "two interests, 2 × 5 seeds" if two else f"one interest, {SEEDS} seeds"
        lines += [
            f"| ranking ({len(q.readers)} readers: {kind}; {len(q.crossed)} true cross-listings) | P@10 "
            "| R@50 | P@10, cross-listings | R@50, cross-listings | P@10 − model's | R@50 − model's |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        base = q.evaluate(runs[3][1], thresholds=True)
        for label, ranker in runs:
            start = time.process_time()
            result = base if ranker is runs[3][1] else q.evaluate(ranker)
            lines.append(q.row(label, result, base))
            print(lines[-1], f"({time.process_time() - start:.1f} s)", flush=True)
        draws = len(q.readers) * args.draws
        lines += [
            "",
            f"| threshold ({kind}) | recommended per reader-day | precision | recall |",
            "|---:|---:|---:|---:|",
        ]
        for t, (chosen, right, relevant) in base["thresholds"].items():
            precision = f"{right / chosen:.3f}" if chosen else "–"
            lines.append(f"| {t:.1f} | {chosen / draws:.1f} | {precision} | {right / relevant:.3f} |")
        lines.append("")
    return lines


def ablations_k(q: Quality) -> list[tuple[str, Ranker]]:
    """The number of kept weights."""
    return [(f"ablation: K = {k:,} weights", q.model(max_weights=k)) for k in (1024, 2048, 8192)]


def ablations(q: Quality, pool: list[PaperIn]) -> list[tuple[str, Ranker]]:
    """The choices, each against the production model."""
    counts = tm.term_counts([(p.title, p.abstract) for p in q.day])
    reference = tm.term_counts([(p.title, p.abstract) for p in pool[len(q.day) :]])

    def with_idf(df: np.ndarray, n: int) -> sp.csr_matrix:
        rows = counts.copy()
        rows.data = (1 + np.log(rows.data)) * (np.log((1 + n) / (1 + df)) + 1)[rows.indices]
        result: sp.csr_matrix = normalize(rows)
        return result

    day_df = np.bincount(counts.indices, minlength=tm.N_FEATURES)
    ref_df = np.bincount(reference.indices, minlength=tm.N_FEATURES)
    return [
        *ablations_k(q),
        *[(f"ablation: {n} implicit negatives", q.model(implicit=n)) for n in (40, 50, 200)],
        ("ablation: IDF of the day itself", q.model(with_idf(day_df, q.n))),
        (
            f"ablation: IDF frozen from {reference.shape[0]:,} other recorded papers",
            q.model(with_idf(ref_df, reference.shape[0])),
        ),
        ("ablation: SGD (log loss) instead of liblinear", q.model(fit=sgd_train)),
    ]


def sgd_train(
    positives: sp.csr_matrix, ids: Sequence[str | None], negatives: sp.csr_matrix, implicit: sp.csr_matrix
) -> tm.TasteModel:
    """``train_vectors`` with scikit-learn's SGDClassifier in place of liblinear (no signatures)."""
    from sklearn.linear_model import SGDClassifier

    rows = sp.vstack([positives, negatives, implicit], format="csr")
    y = np.r_[np.ones(positives.shape[0]), np.zeros(rows.shape[0] - positives.shape[0])]
    columns = np.unique(rows.indices)
    compact = sp.csr_matrix(
        (rows.data, np.searchsorted(columns, rows.indices), rows.indptr), shape=(rows.shape[0], len(columns))
    )
    clf = SGDClassifier(loss="log_loss", class_weight="balanced", max_iter=50, tol=None, random_state=0)
    clf.fit(compact, y)
    coef = clf.coef_.ravel()
    keep = np.sort(np.argsort(-np.abs(coef))[: tm.MAX_WEIGHTS])
    return tm.TasteModel.with_signatures(
        columns[keep], coef[keep], float(clf.intercept_[0]), positives.shape[0]
    )


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
    args = parser.parse_args()
    if args.quick:
        args.subscribers, args.distinct, args.draws, args.repeat, args.ablation = 1_000, 200, 3, 1, False
    day = list(parse_feed(FEED.read_bytes()).items)
    pool = day + other_papers()
    print(f"{len(day):,} versions in the day; {len(pool):,} real papers in the training pool", flush=True)
    lines = quality(args, day, pool)
    lines = [*cost(args, day, pool), "", *lines]
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
