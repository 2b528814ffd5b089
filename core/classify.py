"""Which papers count as AI-related on the status page."""

from __future__ import annotations

from collections.abc import Iterable

# The arXiv categories whose papers the status page counts as AI-related: artificial intelligence,
# machine learning (cs and stat), computation and language, computer vision, neural and evolutionary
# computing, multiagent systems. A paper counts when any of its categories (primary or cross-list) is here.
AI_CATEGORIES = frozenset({"cs.AI", "cs.LG", "cs.CL", "cs.CV", "cs.NE", "cs.MA", "stat.ML"})


def is_ai_related(categories: Iterable[str]) -> bool:
    """True when any category, primary or cross-list, is one of :data:`AI_CATEGORIES`."""
    return any(category in AI_CATEGORIES for category in categories)
