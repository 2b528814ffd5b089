"""``python -m papertrail`` is the same as the ``papertrail`` command."""

from papertrail.cli.app import app

app()
