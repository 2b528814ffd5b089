"""The names of the sources ``papertrail ingest`` runs, apart from the sources themselves.

The command line names them in its help; importing :mod:`papertrail.service.context` for that would load every
adapter (HTTP client, parsers, notifiers) before ``--help`` could print.
"""

from __future__ import annotations

SOURCE_NAMES = ("arxiv-rss", "hf-daily", "arxiv-oai", "arxiv-api")
