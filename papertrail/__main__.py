"""``python -m papertrail`` is the same as the ``papertrail`` command."""

from papertrail.cli import app

app()
