"""Learned follows: votes, a reader's reference library, the per-reader model, and recommendations."""
