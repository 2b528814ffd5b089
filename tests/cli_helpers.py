"""What the command-line tests share: a way to run a command (the ``env`` fixture, a store in the test's
folder, is in tests/conftest.py)."""

from __future__ import annotations

from typer.testing import CliRunner

from papertrail.cli.app import app

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    """Run ``papertrail ARGS`` in this process: exit code, stdout, stderr."""
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr
