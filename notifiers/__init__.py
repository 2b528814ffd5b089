"""PaperTrail notifiers package."""
