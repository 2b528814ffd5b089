"""PaperTrail core package."""
