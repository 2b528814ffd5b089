"""PaperTrail papertrail package."""
