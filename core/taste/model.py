"""Learned follows: one small linear model per subscriber, trained from what they liked.

Pure: texts and bytes in, models, scores and explanations out; no database, no I/O.

**Features.** A version is its title and abstract, lower-cased, TeX control words (``\\mathcal``) dropped,
cut into words of two or more characters with at least one letter, English stop words removed, and read
as word uni- and bi-grams. Each n-gram is hashed (scikit-learn's ``HashingVectorizer``, murmurhash3 into
2**20 buckets, no alternate sign), so no vocabulary is stored and a model stays valid however the library
grows. Weights are sublinear term frequencies (1 + log tf), l2-normalised. There is no IDF: on the
benchmark an IDF frozen from the other recorded papers (the only stable sample we could ship) left
precision@10 within the noise and added 0.025 to recall@50, for a table of some 100,000 buckets in the
package; the IDF of the day itself did better but was measured on the very day it ranks and would
change under models trained on another day's (docs/recommendations.md; figures in docs/benchmarks.md).

**Model.** L2-regularised logistic regression (liblinear, C = 1, classes balanced) over the liked papers
(positives), the disliked ones (explicit negatives, each weighing :data:`EXPLICIT_NEGATIVE_WEIGHT`) and
half of a sample of the day's other papers (implicit negatives). Only the :data:`MAX_WEIGHTS` weights of
largest magnitude are kept (sparse int32 buckets + float32 weights, 16 KB), plus, for the reasons shown in
a digest, a *signature* of each of the :data:`MAX_SIGNATURES` most recent liked papers with an arXiv id:
its :data:`SIGNATURE_TERMS` features that push the model most and are rarest among the negatives.

**Calibration.** A score is in standard deviations above an ordinary paper: the kept weights' margins
over the other half of the implicit sample (papers the fit never saw) give a mean and a spread, folded
into the stored weights and bias, so a score is ``(margin - mean) / spread`` and one threshold,
:data:`DEFAULT_THRESHOLD`, means the same for every subscriber whatever their number of votes. Not a
probability: a sigmoid of the logistic margin sat between 0.3 and 0.45 for nearly every paper after five
seeds (the fit is strongly regularised), and a probability-like squashing of this score would round the
best papers to 1.0 in float32 and tie them.

**Scoring.** A scoring pass vectorises each version once (:func:`vectorise`) and scores every model in one
sparse product (:func:`score_many`); :func:`top_n` picks each subscriber's best versions.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import normalize

from core.taste.model_format import N_FEATURES, Signature, TasteModel
from core.values import ARXIV_ID_PATTERN

__all__ = [
    "DEFAULT_THRESHOLD",
    "IMPLICIT_SAMPLE",
    "MAX_IMPLICIT",
    "MAX_NEGATIVES",
    "MAX_POSITIVES",
    "MAX_SIGNATURES",
    "MAX_WEIGHTS",
    "MIN_IMPLICIT",
    "MIN_POSITIVES",
    "SIGNATURE_TERMS",
    "Example",
    "Explainable",
    "Explanation",
    "Signals",
    "explain",
    "explain_prepared",
    "explain_version",
    "prepare",
    "score_many",
    "term_counts",
    "top_n",
    "train",
    "train_vectors",
    "vectorise",
]

# Fewer liked papers than this give no model: two papers do not say what a reader's taste is.
MIN_POSITIVES = 3
# The weights kept per model (by magnitude): 8 bytes each, 16 KB. On the benchmark 2,048 ranked as well as
# 4,096, 8,192 or all of them (readers of one and of two interests), 1,024 slightly worse; the scoring pass
# costs about in proportion. Each stored model says how many it holds, so changing K needs no migration.
MAX_WEIGHTS = 2048
# The liked papers a model remembers for "close to 2306.03564, which you liked", and the features of each.
MAX_SIGNATURES = 50
SIGNATURE_TERMS = 32
# Training reads at most this many of each kind (the most recent): bounds the retraining time of a vote.
MAX_POSITIVES = 100
MAX_NEGATIVES = 100
MAX_IMPLICIT = 200
# Implicit negatives: at least MIN_IMPLICIT, IMPLICIT_SAMPLE advised; half are fitted, half calibrate.
MIN_IMPLICIT = 20
IMPLICIT_SAMPLE = 100
# The least spread of an ordinary paper's margin (when the held-out papers share no feature with the model).
_MIN_SPREAD = 0.01
# A dislike is a judgement; an implicit negative only a paper the reader did not pick (maybe never saw).
EXPLICIT_NEGATIVE_WEIGHT = 2.0
# Standard deviations above an ordinary paper of the day; chosen on the benchmark (docs/benchmarks.md,
# "Recommendations"): about 6 versions of a 1,504-version day per reader pass it, a fifth of them relevant.
DEFAULT_THRESHOLD = 4.0
_C = 1.0

_ID_RE = re.compile(ARXIV_ID_PATTERN)
_TEX_COMMAND = re.compile(r"\\[a-zA-Z]+")
# Two or more word characters, at least one a letter: "3d" and "gpt4" are kept, "2024" and "x" are not.
_TOKEN_PATTERN = r"(?u)\b(?=\w*[^\W\d_])\w\w+\b"
_TOKEN_RE = re.compile(_TOKEN_PATTERN)


def _preprocess(text: str) -> str:
    return _TEX_COMMAND.sub(" ", text.lower())


_VECTORIZER = HashingVectorizer(
    n_features=N_FEATURES,
    alternate_sign=False,
    ngram_range=(1, 2),
    stop_words="english",
    preprocessor=_preprocess,
    token_pattern=_TOKEN_PATTERN,
    norm=None,
    dtype=np.float32,
)
_ANALYSE = _VECTORIZER.build_analyzer()
# Words that name no topic in an abstract: kept as features (the model weighs them), never shown as a reason.
_UNINFORMATIVE = frozenset(
    {
        "approach", "approaches", "based", "data", "demonstrate", "existing", "framework", "method",
        "methods", "model", "models", "novel", "paper", "performance", "propose", "proposed", "proposes",
        "result", "results", "show", "shows", "study", "task", "tasks", "use", "used", "using", "work",
    }
)  # fmt: skip
# The same hashing of one n-gram as HashingVectorizer applies to each n-gram of a text.
_NGRAM_HASHER = FeatureHasher(n_features=N_FEATURES, input_type="string", alternate_sign=False)


@dataclass(frozen=True, slots=True)
class Example:
    """One paper as a signal: its title and abstract, and its arXiv id (None for a text-only seed)."""

    title: str
    abstract: str
    arxiv_id: str | None = None


@dataclass(frozen=True, slots=True)
class Signals:
    """What a model is trained from, each sequence oldest first (the most recent are kept past the caps).

    ``positives``: liked papers and library seeds; ``negatives``: explicit dislikes; ``implicit_negatives``:
    a random sample of recent versions the reader did not vote on, :data:`IMPLICIT_SAMPLE` of them (40 to
    200 ranked alike on the benchmark; fewer than :data:`MIN_IMPLICIT` is refused).
    """

    positives: Sequence[Example]
    negatives: Sequence[Example] = ()
    implicit_negatives: Sequence[Example] = ()


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a version was recommended: the nearest liked paper (an arXiv id) and up to three shared terms."""

    nearest: str | None
    terms: tuple[str, ...]


def term_counts(texts: Sequence[tuple[str, str]]) -> sp.csr_matrix:
    """(title, abstract) pairs -> the raw count of each hashed n-gram (float32, 2**20 columns)."""
    counts: sp.csr_matrix = _VECTORIZER.transform(
        [f"{title}\n{abstract}" for title, abstract in texts]
    ).tocsr()
    return counts


def vectorise(texts: Sequence[tuple[str, str]]) -> sp.csr_matrix:
    """(title, abstract) pairs -> one l2-normalised sublinear-tf row each (float32, 2**20 columns)."""
    counts = term_counts(texts)
    counts.data = 1 + np.log(counts.data)
    result: sp.csr_matrix = normalize(counts, copy=False).astype(np.float32).tocsr()
    return result


def train(signals: Signals, *, max_weights: int = MAX_WEIGHTS) -> TasteModel | None:
    """Train a subscriber's model; None with fewer than :data:`MIN_POSITIVES` liked papers.

    Only the most recent :data:`MAX_POSITIVES`, :data:`MAX_NEGATIVES` and :data:`MAX_IMPLICIT` of each kind
    are read. Raises ``ValueError`` for a positive whose ``arxiv_id`` is not an arXiv id (without version)
    and for fewer than :data:`MIN_IMPLICIT` implicit negatives.
    """
    positives = list(signals.positives)[-MAX_POSITIVES:]
    if len(positives) < MIN_POSITIVES:
        return None
    negatives = list(signals.negatives)[-MAX_NEGATIVES:]
    implicit = list(signals.implicit_negatives)[-MAX_IMPLICIT:]
    rows = vectorise([(e.title, e.abstract) for e in positives + negatives + implicit])
    p, n = len(positives), len(negatives)
    return train_vectors(
        rows[:p], [e.arxiv_id for e in positives], rows[p : p + n], rows[p + n :], max_weights=max_weights
    )


def train_vectors(
    positives: sp.csr_matrix,
    positive_ids: Sequence[str | None],
    negatives: sp.csr_matrix,
    implicit_negatives: sp.csr_matrix,
    *,
    max_weights: int = MAX_WEIGHTS,
) -> TasteModel | None:
    """:func:`train` over rows already made by :func:`vectorise` (a scoring pass has the day's rows).

    ``positive_ids`` gives each positive row's arXiv id or None, oldest first. No caps are applied here.
    Every other implicit negative is held out of the fit to calibrate the scores (see :func:`score_many`).
    """
    if positives.shape[0] != len(positive_ids):
        raise ValueError(f"{positives.shape[0]} positive rows but {len(positive_ids)} ids")
    for arxiv_id in positive_ids:
        if arxiv_id is not None and not _ID_RE.fullmatch(arxiv_id):
            raise ValueError(f"{arxiv_id!r} is not an arXiv id (without version)")
    if positives.shape[0] < MIN_POSITIVES:
        return None
    if implicit_negatives.shape[0] < MIN_IMPLICIT:
        raise ValueError(
            f"a taste model needs at least {MIN_IMPLICIT} implicit negatives (a sample of the day's other "
            f"papers), got {implicit_negatives.shape[0]}"
        )
    implicit, held_out = implicit_negatives[0::2], implicit_negatives[1::2]
    rows = sp.vstack([positives, negatives, implicit], format="csr")
    n_pos, n_neg = positives.shape[0], negatives.shape[0] + implicit.shape[0]
    y = np.r_[np.ones(n_pos), np.zeros(n_neg)]
    weight = np.r_[
        np.ones(n_pos), np.full(negatives.shape[0], EXPLICIT_NEGATIVE_WEIGHT), np.ones(implicit.shape[0])
    ]
    # Fit over the columns the rows use only: a few thousand instead of 2**20.
    columns = np.unique(rows.indices)
    compact = sp.csr_matrix(
        (rows.data, np.searchsorted(columns, rows.indices), rows.indptr), shape=(rows.shape[0], len(columns))
    )
    classifier = LogisticRegression(solver="liblinear", C=_C, class_weight="balanced", random_state=0)
    classifier.fit(compact, y, sample_weight=weight)
    coef = classifier.coef_.ravel()
    keep = np.arange(len(coef))
    if len(coef) > max_weights:
        keep = np.sort(np.argpartition(-np.abs(coef), max_weights)[:max_weights])
    keep = keep[coef[keep] != 0]
    indices, weights = columns[keep].astype(np.int32), coef[keep].astype(np.float32)
    # Calibration: the kept weights' margins over the held-out papers of the day, an ordinary paper's.
    kept = sp.csr_matrix((weights, indices, [0, len(indices)]), shape=(1, N_FEATURES))
    margins = np.asarray((held_out @ kept.T).todense()).ravel() + classifier.intercept_[0]
    mean, spread = float(margins.mean()), max(float(margins.std(ddof=1)), _MIN_SPREAD)
    # A signature keeps what is particular to a liked paper: contribution to the score times rarity among
    # the negatives (an IDF of this training sample, used here only, so nothing goes stale).
    negative_counts = np.bincount(compact[n_pos:].indices, minlength=len(columns))
    full = np.zeros(N_FEATURES, dtype=np.float64)
    full[columns] = np.maximum(coef, 0) * np.log((1 + n_neg) / (1 + negative_counts))
    return TasteModel.with_signatures(
        indices,
        weights / spread,
        (classifier.intercept_[0] - mean) / spread,
        n_pos,
        _signatures(positives, positive_ids, full),
    )


def _signatures(rows: sp.csr_matrix, ids: Sequence[str | None], weights: np.ndarray) -> list[Signature]:
    """The most recent liked papers with an id (one per id), each by its features of largest ``weights``
    times value."""
    chosen: dict[str, Signature] = {}
    for i in range(len(ids) - 1, -1, -1):
        arxiv_id = ids[i]
        if arxiv_id is None or arxiv_id in chosen:
            continue
        row = rows.getrow(i)
        # Features the model did not favour only when nothing else is left.
        push = row.data * weights[row.indices] + row.data * 1e-6
        top = np.argsort(-push, kind="stable")[:SIGNATURE_TERMS]
        order = np.argsort(row.indices[top])
        indices, values = row.indices[top][order], row.data[top][order]
        norm = float(np.linalg.norm(values)) or 1.0
        chosen[arxiv_id] = Signature(arxiv_id, indices.astype(np.int32), (values / norm).astype(np.float32))
        if len(chosen) == MAX_SIGNATURES:
            break
    return list(reversed(chosen.values()))


def score_many(models: Sequence[TasteModel], versions: sp.csr_matrix) -> np.ndarray:
    """Scores, subscribers x versions (float32, standard deviations above an ordinary paper; the module's
    docstring): one sparse product of all the models' weights with the versions' features.

    ``versions`` comes from :func:`vectorise`. Memory grows with ``len(models)`` times the versions (4 bytes
    each, dense) plus the models' weights: pass a few thousand models per call.
    """
    n = len(models)
    if n == 0:
        return np.zeros((0, versions.shape[0]), dtype=np.float32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(m.indices) for m in models], out=indptr[1:])
    weights = sp.csr_matrix(
        (
            np.concatenate([m.weights for m in models]),
            np.concatenate([m.indices for m in models]),
            indptr,
        ),
        shape=(n, N_FEATURES),
    )
    scores = np.asarray((weights @ versions.T.tocsr()).toarray(), dtype=np.float32)
    scores += np.array([m.bias for m in models], dtype=np.float32)[:, None]
    return scores


def top_n(scores: np.ndarray, n: int, threshold: float = DEFAULT_THRESHOLD) -> list[np.ndarray]:
    """Per subscriber (row), the column indices of at most ``n`` versions scoring ``threshold`` or more, best
    first."""
    rows, cols = scores.shape
    if n <= 0 or cols == 0:
        return [np.zeros(0, dtype=np.intp) for _ in range(rows)]
    k = min(n, cols)
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k] if k < cols else np.tile(np.arange(cols), (rows, 1))
    best = np.take_along_axis(scores, part, axis=1)
    order = np.argsort(-best, axis=1, kind="stable")
    part, best = np.take_along_axis(part, order, axis=1), np.take_along_axis(best, order, axis=1)
    return [p[b >= threshold] for p, b in zip(part, best, strict=True)]


@dataclass(frozen=True, slots=True, eq=False)
class Explainable:
    """A version as :func:`explain_prepared` reads it, made once by :func:`prepare` for every model that
    picked it: its features (sorted indices, values) and its candidate terms with their hashed buckets."""

    indices: np.ndarray
    values: np.ndarray
    grams: tuple[str, ...]
    buckets: np.ndarray


def prepare(title: str, abstract: str, row: sp.csr_matrix | None = None) -> Explainable:
    """What explaining a version needs, whichever model asks: ``row`` is its :func:`vectorise` row when the
    caller has it (a scoring pass has every version's), else it is made here, and kept (below).

    Most of an explanation's work is the version's text (its n-grams, their hashes): a scoring pass does
    it once per version (:func:`explain_version`) instead of once per pick.
    """
    if row is None:
        return _analysed(title, abstract)
    return _explainable(title, abstract, row)


# A digest pass explains the same recommended versions for many readers: each is analysed once. 4,096 holds
# a whole day's announcement (1,000 readers' recommendations drew on 1,475 of the recorded day's 1,504
# versions; 1,024 thrashed), at about 11 KB each.
@functools.lru_cache(maxsize=4096)
def _analysed(title: str, abstract: str) -> Explainable:
    return _explainable(title, abstract, vectorise([(title, abstract)]))


def _explainable(title: str, abstract: str, x: sp.csr_matrix) -> Explainable:
    order = np.argsort(x.indices, kind="stable")
    text = f"{title}\n{abstract}"
    words = _TOKEN_RE.findall(_preprocess(text))
    adjacent = {f"{a} {b}" for a, b in itertools.pairwise(words)}
    grams = tuple(
        g
        for g in dict.fromkeys(_ANALYSE(text))
        if (" " in g and g in adjacent) or (" " not in g and g not in _UNINFORMATIVE)
    )
    buckets = _NGRAM_HASHER.transform([[g] for g in grams]).indices if grams else np.zeros(0, np.int32)
    return Explainable(
        x.indices[order].astype(np.int32), x.data[order].astype(np.float32), grams, np.asarray(buckets)
    )


def explain(model: TasteModel, title: str, abstract: str) -> Explanation:
    """The liked paper closest to this version (cosine over the signatures) and its three strongest terms.

    Terms are the version's own n-grams (no stop words; a bigram only where its words stand side by side)
    ranked by the model's weight times the feature's value; a term inside a stronger one is left out.
    """
    return explain_version((model,), prepare(title, abstract))[0]


def explain_prepared(model: TasteModel, version: Explainable) -> Explanation:
    """:func:`explain` of a version made by :func:`prepare`."""
    return explain_version((model,), version)[0]


def explain_version(models: Sequence[TasteModel], version: Explainable) -> list[Explanation]:
    """:func:`explain_prepared` of one version for each of ``models`` (those that picked it in a scoring
    pass), in order: the look-ups of every model run together, as one array each.

    Each model's features are offset by its position times :data:`N_FEATURES`, so that the models' sorted
    indices (and their signatures') make one sorted array and one ``searchsorted`` answers them all.
    """
    if not models:
        return []
    grams, buckets = version.grams, np.asarray(version.buckets, dtype=np.int64)
    offsets = np.arange(len(models), dtype=np.int64) * N_FEATURES
    # The closest liked paper: every signature of every model against the version, summed per signature.
    sizes = np.concatenate([np.zeros(0, np.int64), *(m.signature_sizes.astype(np.int64) for m in models)])
    owner = np.repeat(np.arange(len(sizes)), sizes)
    products = _at(version, np.concatenate([np.zeros(0, np.int32), *(m.signature_indices for m in models)]))
    products = products * np.concatenate([np.zeros(0, np.float32), *(m.signature_values for m in models)])
    similarity = np.bincount(owner, weights=products, minlength=len(sizes))
    # Shared terms: each model's weight of each n-gram, kept to the n-grams of its signatures when any.
    # Looked up in bucket order (sorted needles make searchsorted several times faster), then put back
    # in the n-grams' own order, which breaks ties between terms.
    order = np.argsort(buckets, kind="stable")
    weight = np.empty((len(models), len(buckets)), dtype=np.float32)
    weight[:, order] = _lookup(
        [m.indices for m in models], [m.weights for m in models], offsets, buckets[order]
    )
    signed = [np.sort(m.signature_indices) for m in models]
    keep = np.empty((len(models), len(buckets)), dtype=bool)
    keep[:, order] = (
        _lookup(signed, [np.ones(len(k), np.float32) for k in signed], offsets, buckets[order]) > 0
    )
    has_liked = keep.any(axis=1, keepdims=True)
    weight = np.where(has_liked & ~keep, np.float32(0), weight)
    push = weight * _at(version, buckets)[None, :]
    found: list[Explanation] = []
    first = 0
    for row, model in enumerate(models):
        count = len(model.signature_ids)
        nearest = None
        if count:
            best = first + int(np.argmax(similarity[first : first + count]))
            nearest = model.signature_ids[best - first] if similarity[best] > 0 else None
        first += count
        terms = _choose(grams, buckets, push[row]) if grams and len(model.indices) else ()
        found.append(Explanation(nearest, terms))
    return found


def _lookup(
    keys: Sequence[np.ndarray], values: Sequence[np.ndarray], offsets: np.ndarray, queries: np.ndarray
) -> np.ndarray:
    """(models × queries): ``values[m]`` where ``keys[m]`` (sorted) holds the query, else 0."""
    shifted = (k.astype(np.int64) + o for k, o in zip(keys, offsets, strict=True))
    joined = np.concatenate([np.zeros(0, np.int64), *shifted])
    data = np.concatenate([np.zeros(0, np.float32), *values]).astype(np.float32)
    asked = (offsets[:, None] + queries[None, :]).ravel()
    if not len(joined):
        return np.zeros((len(offsets), len(queries)), dtype=np.float32)
    at = np.minimum(np.searchsorted(joined, asked), len(joined) - 1)
    return np.where(joined[at] == asked, data[at], np.float32(0)).reshape(len(offsets), len(queries))


def _at(version: Explainable, keys: np.ndarray) -> np.ndarray:
    """The version's feature values at ``keys`` (0 where it has none)."""
    if not len(version.indices):
        return np.zeros(len(keys), dtype=np.float32)
    at = np.minimum(np.searchsorted(version.indices, keys), len(version.indices) - 1)
    return np.where(version.indices[at] == keys, version.values[at], np.float32(0))


def _choose(grams: tuple[str, ...], buckets: np.ndarray, push: np.ndarray) -> tuple[str, ...]:
    """The three n-grams that push most, a term inside a stronger one left out."""
    chosen: list[str] = []
    seen: set[int] = set()
    for i in np.argsort(-push, kind="stable"):
        if push[i] <= 0 or len(chosen) == 3:
            break
        gram, words = grams[i], set(grams[i].split())
        if buckets[i] in seen or any(words <= set(c.split()) or set(c.split()) <= words for c in chosen):
            continue
        seen.add(int(buckets[i]))
        chosen.append(gram)
    return tuple(chosen)
