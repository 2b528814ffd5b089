"""The quality half of ``bench/recommend.py``: simulated readers, the baselines and the ablations.

Its protocol is described in ``bench/recommend.py``'s docstring; run that file.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import TypedDict

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from core.taste import model as tm
from core.taste.model_format import N_FEATURES, TasteModel
from core.values import PaperIn

SEEDS = 5
IMPLICIT = tm.IMPLICIT_SAMPLE
THRESHOLDS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)


class Result(TypedDict):
    """One ranking's precision@10 and recall@50 per reader; per threshold: recommended, right, relevant."""

    readers: dict[str, tuple[float, float]]
    thresholds: dict[float, list[int]]


Ranker = Callable[[list[int], random.Random], np.ndarray]


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
        df = np.bincount(counts.indices, minlength=N_FEATURES)
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
        fit: Callable[..., TasteModel | None] = tm.train_vectors,
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
    return [(f"ablation: K = {k:,} weights", q.model(max_weights=k)) for k in (1024, 4096, 8192)]


def ablations(q: Quality, pool: list[PaperIn]) -> list[tuple[str, Ranker]]:
    """The choices, each against the production model."""
    counts = tm.term_counts([(p.title, p.abstract) for p in q.day])
    reference = tm.term_counts([(p.title, p.abstract) for p in pool[len(q.day) :]])

    def with_idf(df: np.ndarray, n: int) -> sp.csr_matrix:
        rows = counts.copy()
        rows.data = (1 + np.log(rows.data)) * (np.log((1 + n) / (1 + df)) + 1)[rows.indices]
        result: sp.csr_matrix = normalize(rows)
        return result

    day_df = np.bincount(counts.indices, minlength=N_FEATURES)
    ref_df = np.bincount(reference.indices, minlength=N_FEATURES)
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
) -> TasteModel:
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
    return TasteModel.with_signatures(columns[keep], coef[keep], float(clf.intercept_[0]), positives.shape[0])
