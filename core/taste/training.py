"""Training a subscriber's recommendation model from what is stored: the one step that keeps a
model current, called after every vote (:mod:`core.taste.votes`) and after a library import adds seeds.

The signals come from :func:`core.taste.taste_records.training_texts` (likes and seeds, dislikes, a
sample of :data:`core.taste.model.IMPLICIT_SAMPLE` of the last week's other papers); the model is
:mod:`core.taste.model`'s. Fewer liked papers than a model needs (:data:`core.taste.model.MIN_POSITIVES`),
or too few other papers to contrast them with (:data:`core.taste.model.MIN_IMPLICIT` stored in the last
week: a new instance, or one whose ingest stopped), leave the subscriber without a model: a stored one is
dropped, so it never outlives the likes it came from.
"""

from __future__ import annotations

from datetime import datetime

from core.db import Database
from core.models import utcnow
from core.taste import taste_records
from core.taste.model import (
    IMPLICIT_SAMPLE,
    MAX_NEGATIVES,
    MAX_POSITIVES,
    MIN_IMPLICIT,
    Example,
    Signals,
    train,
)
from core.taste.model_format import TasteModel
from core.taste.taste_records import TasteText

__all__ = ["retrain"]


def retrain(db: Database, subscriber_id: int, *, now: datetime | None = None) -> TasteModel | None:
    """Train the subscriber's model from its stored signals and store it; returns it, or None (and no
    stored model) when the signals are not enough for one."""
    now = now or utcnow()
    texts = taste_records.training_texts(
        db,
        subscriber_id,
        implicit=IMPLICIT_SAMPLE,
        positives=MAX_POSITIVES,
        negatives=MAX_NEGATIVES,
        now=now,
    )
    model = None
    if len(texts.implicit) >= MIN_IMPLICIT:
        # Newest first from the store; the model reads each kind oldest first and keeps the most recent,
        # so reversed: the seeds come first and the votes, the reader's latest word, last.
        model = train(
            Signals(
                positives=_examples(texts.positives),
                negatives=_examples(texts.negatives),
                implicit_negatives=_examples(texts.implicit),
            )
        )
    if model is None:
        taste_records.drop_model(db, subscriber_id)
        return None
    taste_records.save_model(
        db,
        subscriber_id,
        model.to_bytes(),
        positives=len(texts.positives),
        negatives=len(texts.negatives),
        now=now,
    )
    return model


def _examples(texts: tuple[TasteText, ...]) -> list[Example]:
    return [Example(text.title, text.abstract, text.arxiv_id) for text in reversed(texts)]
