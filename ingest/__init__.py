"""PaperTrail ingest package."""
