"""The ``papertrail`` command line: the app (:mod:`papertrail.cli.app`), one typer sub-app per command
family, their shared helpers (:mod:`papertrail.cli.common`), and what only commands run (demo, backfill)."""
