"""The recommendation pass: each new paper scored once against every model that wants it, and
the best few per subscriber written to the ledger as matches without a follow.

Runs before digest planning (``core.delivery.digests.send_due_digests``), and at the end of a one-shot
``papertrail ingest``. One pass (:func:`recommend_new`) fans out the waiting query matches first (so that
what a follow brought is in the ledger), then goes a batch of papers at a time:

1. The next :data:`PAPERS_PER_BATCH` news v1 versions above the cursor that matching has seen and the
   fan-out has written (:func:`core.taste.recommend_records.next_papers`; a first pass starts at the last
   day's news), read with the first page of models in the fan-out's last transaction; when no model is
   read the cursor moves past the batch there, and the pass writes nothing else.
   Revisions are never recommended: a revision is news about a paper, for the readers who follow it
   (``id:`` follows, or the follow that brought v1); a paper recommended as v1 is not recommended again.
2. Each version is vectorised once (:func:`core.taste.model.vectorise`).
3. The models of the subscribers that want recommendations are read :data:`MODELS_PER_SLICE` at a time
   and scored together (:func:`core.taste.model.score_many`). Per subscriber: the versions already in its
   ledger (a follow brought them), voted on, or in its imported library are left out; of the rest, those
   scoring at least :data:`core.taste.model.DEFAULT_THRESHOLD`, best first, up to its room: ``recommend``
   (N) less its recommendations not sent yet, so a digest holds at most N.
4. Each pick's reasons (:func:`core.taste.model.explain`: the closest liked paper, the strongest shared
   terms) are stored with its score (:func:`core.reasons.recommendation_hit`); the rows and the
   cursor's advance go in one transaction (:func:`core.taste.recommend_records.write`).

Two passes at once (two workers) score the same batch, but only the first to write moves the cursor and
writes its rows; the other writes nothing and stops. A pass that dies before its write leaves the cursor
where it was: the next pass scores the batch again.

:func:`preview` is ``try recommended``: what the model would have picked from the last days' papers.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from core.db import Database, Db
from core.follows import match_records
from core.models import utcnow
from core.reasons import LIKED, SHARED, Reason, reason, recommendation_hit
from core.taste import recommend_records, taste_records
from core.taste.recommend_records import ModelOf, NewPaper, PaperBatch, RecommendationRow

if TYPE_CHECKING:
    import numpy as np

    from core.taste.model import Explainable, Explanation
    from core.taste.model_format import TasteModel

log = logging.getLogger(__name__)

# New papers vectorised and written per transaction: a day's announcement (about 1,500 versions, 1,000 of
# them new papers) in one batch; their vectors take a few MB.
PAPERS_PER_BATCH = 2_000
# Models read and scored together: their scores (4 bytes per model and paper, 8 MB for a full batch) and
# the models themselves (about 40 KB each) bound the pass's memory.
MODELS_PER_SLICE = 1_000
# ``try recommended`` looks this far back, reads this many papers at a time, and shows this many at most
# when the reader has not chosen N (``recommend on N``).
PREVIEW_DAYS = 7
PREVIEW_PAGE = 2_000
PREVIEW_SHOWN = 5


@dataclass(frozen=True, slots=True)
class PassReport:
    """What one recommendation pass did."""

    papers: int = 0
    """New papers scored."""
    models: int = 0
    """Model scorings (a subscriber counts once per batch of papers)."""
    written: int = 0
    """Recommendations written to the ledger."""
    lost: bool = False
    """True when another pass had scored the same papers first (and this one wrote nothing for them)."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A paper a model picked, with its score and reasons (:data:`core.reasons.LIKED`, ``SHARED``)."""

    arxiv_id: str
    version_id: int
    title: str
    score: float
    reasons: tuple[Reason, ...]


def recommend_new(
    db: Database,
    *,
    now: datetime | None = None,
    papers_per_batch: int = PAPERS_PER_BATCH,
    models_per_slice: int = MODELS_PER_SLICE,
    threshold: float | None = None,
) -> PassReport:
    """Fan out the waiting query matches, then score the new papers since the last pass for every
    subscriber who wants recommendations, and write the picks to the ledger; returns what was done. Safe
    to run in several processes at once.

    When this returns, everything matched before the call is in the ledger (the fan-out runs first; when
    it raises, the fan-out may be undone: the caller fans out before it reads the ledger). The first
    batch's papers and models are read in the fan-out's last transaction; when nobody wants
    recommendations (no model is read) the cursor moves past the batch in that same transaction and
    nothing else is written. A batch shorter than ``papers_per_batch`` was the last: the pass ends
    without a read that would find nothing.

    ``threshold``: the lowest score recommended (None: :data:`core.taste.model.DEFAULT_THRESHOLD`).
    """
    now = now or utcnow()
    report = PassReport()
    first: list[_Read] = []

    def read_first(tx: Db) -> None:
        first.append(_read(tx, now=now, papers=papers_per_batch, models=models_per_slice))

    # The follows' matches go into the ledger first: what a follow brought is never recommended.
    match_records.expand_matches(db, now=now, then=read_first)
    while True:
        if first:
            read = first.pop()
        else:
            with db.transaction() as tx:
                read = _read(tx, now=now, papers=papers_per_batch, models=models_per_slice)
        batch = read.batch
        if batch.through <= batch.after:
            return report
        if read.models:
            rows, scored = _score_batch(
                db, batch, now=now, per_slice=models_per_slice, threshold=threshold, first=read.models
            )
            written = recommend_records.write(db, batch, rows, now=now)
        else:  # nothing to score: the cursor moved in the read (or another pass had moved it)
            written, scored = read.moved, 0
        if written is None:
            log.info(
                "recommendations: another pass scored versions %d-%d first", batch.after + 1, batch.through
            )
            return PassReport(report.papers, report.models, report.written, lost=True)
        report = PassReport(
            report.papers + len(batch.papers), report.models + scored, report.written + written
        )
        if written or batch.papers:
            log.info(
                "recommendations: %d new paper(s) scored for %d model(s), %d recommendation(s) written",
                len(batch.papers),
                scored,
                written,
            )
        if len(batch.papers) < papers_per_batch:
            return report  # the batch took every paper there was: reading again would find none


@dataclass(frozen=True, slots=True)
class _Read:
    """One batch's read: its papers and the first page of models; with no model, the cursor's move made
    in the read (``moved``: 0 rows written, or None when another pass had moved it first)."""

    batch: PaperBatch
    models: list[ModelOf]
    moved: int | None = 0


def _read(tx: Db, *, now: datetime, papers: int, models: int) -> _Read:
    """The next batch of papers and the first page of models, in ``tx``; with papers but no model, the
    cursor is moved past them there too (nothing to score, nothing else to write)."""
    batch = recommend_records.next_papers(tx, now=now, limit=papers)
    if batch.through <= batch.after:
        return _Read(batch, [])
    page = recommend_records.models(tx, now=now, after=0, limit=models) if batch.papers else []
    if page:
        return _Read(batch, page)
    return _Read(batch, [], moved=recommend_records.write(tx, batch, [], now=now))


def _score_batch(
    db: Database,
    batch: PaperBatch,
    *,
    now: datetime,
    per_slice: int,
    threshold: float | None = None,
    first: list[ModelOf] | None = None,
) -> tuple[list[RecommendationRow], int]:
    """The recommendations of one batch of papers for every model, a slice of models at a time (``first``:
    the first slice when it was read with the batch)."""
    if first is not None:
        page = first
    else:
        page = recommend_records.models(db, now=now, after=0, limit=per_slice) if batch.papers else []
    if not page:
        return [], 0
    # Loaded here, not with the module: scikit-learn takes a second or more to import, and a pass that
    # finds nothing new or nobody who wants recommendations (most minutes of most days) need not pay it.
    from core.taste.model import DEFAULT_THRESHOLD

    lowest = DEFAULT_THRESHOLD if threshold is None else threshold
    texts = _Texts(batch.papers)
    low, high = batch.papers[0].version_id, batch.papers[-1].version_id
    rows: list[RecommendationRow] = []
    scored = 0
    while page:
        unsent = recommend_records.unsent(db, [m.subscriber_id for m in page])
        room = {m.subscriber_id: m.wanted - unsent.get(m.subscriber_id, 0) for m in page}
        loaded = _load([m for m in page if room[m.subscriber_id] > 0])
        if loaded:
            excluded = recommend_records.excluded(db, [m.subscriber_id for m, _ in loaded], low, high)
            rows += _picks(loaded, texts, excluded, room, lowest)
            scored += len(loaded)
        if len(page) < per_slice:
            break
        page = recommend_records.models(db, now=now, after=page[-1].subscriber_id, limit=per_slice)
    return rows, scored


def _load(wanting: Sequence[ModelOf]) -> list[tuple[ModelOf, TasteModel]]:
    """The stored models, read; one that cannot be read is logged and skipped (its next retrain, after
    the reader's next vote, replaces it)."""
    from core.taste.model_format import TasteModel

    loaded: list[tuple[ModelOf, TasteModel]] = []
    for row in wanting:
        try:
            loaded.append((row, TasteModel.from_bytes(row.data)))
        except ValueError as exc:
            log.warning(
                "recommendations: the model of subscriber %d cannot be read: %s", row.subscriber_id, exc
            )
    return loaded


class _Texts:
    """One batch of papers: vectorised once for every model, and each picked paper prepared for
    explaining once for every model that picked it (most of an explanation's cost is the paper's text)."""

    def __init__(self, papers: Sequence[NewPaper]) -> None:
        from core.taste.model import vectorise

        self.papers = papers
        self.vectors = vectorise([(paper.title, paper.abstract) for paper in papers])
        self.column = {paper.version_id: index for index, paper in enumerate(papers)}
        self._prepared: dict[int, Explainable] = {}

    def explainable(self, index: int) -> Explainable:
        """The paper in column ``index``, prepared (``core.taste.model.prepare``) on first use."""
        from core.taste.model import prepare

        found = self._prepared.get(index)
        if found is None:
            paper = self.papers[index]
            found = self._prepared[index] = prepare(paper.title, paper.abstract, self.vectors[index])
        return found


def _picks(
    loaded: Sequence[tuple[ModelOf, TasteModel]],
    texts: _Texts,
    excluded: dict[int, set[int]],
    room: dict[int, int],
    threshold: float,
) -> list[RecommendationRow]:
    """Score one slice of models and choose each subscriber's picks, with their reasons."""
    from core.taste.model import explain_version, score_many

    scores = score_many([model for _, model in loaded], texts.vectors)
    picks: list[tuple[int, int]] = []  # (row in the slice, column), each subscriber's best first
    for at, ((row, _), line) in enumerate(zip(loaded, scores, strict=True)):
        skip = {texts.column[v] for v in excluded.get(row.subscriber_id, ()) if v in texts.column}
        picks += [(at, index) for index in _best(line, threshold, room[row.subscriber_id], skip)]
    # Explained a paper at a time, for all the models that picked it together (core.taste.model).
    pickers: dict[int, list[int]] = defaultdict(list)
    for at, index in picks:
        pickers[index].append(at)
    why: dict[tuple[int, int], tuple[Reason, ...]] = {}
    for index, rows in pickers.items():
        explained = explain_version([loaded[at][1] for at in rows], texts.explainable(index))
        for at, explanation in zip(rows, explained, strict=True):
            why[at, index] = _reasons(explanation)
    return [
        RecommendationRow(
            loaded[at][0].subscriber_id,
            texts.papers[index].version_id,
            recommendation_hit(float(scores[at, index]), why[at, index]),
        )
        for at, index in picks
    ]


def _best(line: np.ndarray, threshold: float, room: int, skip: set[int]) -> list[int]:
    """The columns of ``line`` scoring at least ``threshold``, not in ``skip``, best first, at most ``room``
    (ties: the older version first)."""
    import numpy as np

    above = np.flatnonzero(line >= threshold)
    if skip:
        above = np.array([i for i in above if int(i) not in skip], dtype=np.intp)
    if not len(above) or room <= 0:
        return []
    order = np.argsort(-line[above], kind="stable")[:room]
    return [int(i) for i in above[order]]


def _reasons(explanation: Explanation) -> tuple[Reason, ...]:
    """Why a model picked a paper: the closest liked paper, then the shared terms."""
    found = [reason(LIKED, explanation.nearest)] if explanation.nearest else []
    return (*found, *(reason(SHARED, term) for term in explanation.terms))


def preview(
    db: Database,
    subscriber_id: int,
    *,
    limit: int = PREVIEW_SHOWN,
    days: int = PREVIEW_DAYS,
    now: datetime | None = None,
    threshold: float | None = None,
) -> list[Recommendation] | None:
    """What the subscriber's model would have recommended from the new papers of the last ``days`` days
    (those its follows did not bring, not voted on, not in its library), best first, at most ``limit``;
    None when the subscriber has no model. Nothing is written. ``threshold`` as for
    :func:`recommend_new`."""
    from core.taste.model import DEFAULT_THRESHOLD, explain, score_many, vectorise
    from core.taste.model_format import TasteModel

    row = taste_records.model_of(db, subscriber_id)
    if row is None:
        return None
    model = TasteModel.from_bytes(row.data)
    lowest = DEFAULT_THRESHOLD if threshold is None else threshold
    since = (now or utcnow()) - timedelta(days=days)
    best: list[tuple[float, NewPaper]] = []
    after = 0
    while True:
        page = recommend_records.recent_papers(db, since=since, after=after, limit=PREVIEW_PAGE)
        if not page:
            break
        after = page[-1].version_id
        skip = recommend_records.excluded(db, [subscriber_id], page[0].version_id, page[-1].version_id).get(
            subscriber_id, set()
        )
        line = score_many([model], vectorise([(p.title, p.abstract) for p in page]))[0]
        chosen = _best(line, lowest, limit, {i for i, p in enumerate(page) if p.version_id in skip})
        best += [(float(line[i]), page[i]) for i in chosen]
        # Only the running best are kept: a week of papers is read a page at a time.
        best = sorted(best, key=lambda pair: -pair[0])[:limit]
        if len(page) < PREVIEW_PAGE:
            break
    return [
        Recommendation(
            paper.arxiv_id,
            paper.version_id,
            paper.title,
            score,
            _reasons(explain(model, paper.title, paper.abstract)),
        )
        for score, paper in best
    ]


__all__ = [
    "MODELS_PER_SLICE",
    "PAPERS_PER_BATCH",
    "PREVIEW_DAYS",
    "PassReport",
    "Recommendation",
    "preview",
    "recommend_new",
]
