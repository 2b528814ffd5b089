"""The ``papertrail`` command line: the ``papertrail`` console entry point is :data:`app` here.

The commands live in family modules beside this one, each registering its commands on the one typer app
of :mod:`papertrail.cli_common` (which also holds the helpers they share) when it is imported:

- ``cli_service``: run, ingest, backfill, index
- ``cli_follows``: follow, unfollow, follows, schedule, subscribe
- ``cli_import_export``: import and export of follows, subscriptions and OPML (``cli_library``: import
  library)
- ``cli_newsletters``: newsletter create, list, show, add, remove
- ``cli_delivery``: resume, digest, worker, retry, alarms, guides, webhook-secret
- ``cli_status``: status, show, try
- ``cli_recommend``: recommend, try-recommended
- ``cli_setup``: demo, config
- ``cli_votes``: like, dislike, unvote, likes

``papertrail --help`` lists the commands, and then the command groups, in the order they were registered,
that is in the order of the imports below: keep them in this order (isort would sort them).
"""

# isort: off
from papertrail.cli_common import app
from papertrail import cli_service  # noqa: F401  (each import registers its commands on app)
from papertrail import cli_follows  # noqa: F401
from papertrail import cli_import_export  # noqa: F401
from papertrail import cli_library  # noqa: F401
from papertrail import cli_newsletters  # noqa: F401
from papertrail import cli_delivery  # noqa: F401
from papertrail import cli_status  # noqa: F401
from papertrail import cli_recommend  # noqa: F401
from papertrail import cli_setup  # noqa: F401
from papertrail import cli_votes  # noqa: F401
# isort: on

__all__ = ["app"]
