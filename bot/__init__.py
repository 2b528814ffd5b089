"""PaperTrail bot package."""
