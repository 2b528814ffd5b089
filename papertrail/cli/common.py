"""What every ``papertrail`` command shares: the typer app, the consoles, the exit codes and the helpers
that read the settings, open the store or the whole application context, run async work and report errors.

The commands themselves live in the family modules of ``papertrail/cli/``, one typer sub-app each, which
``papertrail/cli/app.py`` adds to the root app in the order ``papertrail --help`` lists them.
Module-level imports are only what defining the commands takes (typer, rich's console, the standard
library): each command imports the rest when it runs. ``papertrail --help`` thus loads no database,
network or chat library, and a command that only reads or changes the store opens it without the HTTP
client, the sources and the notifiers (tests/test_cli_imports.py keeps it so, bench/cli.py
measures it).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    import asyncio

    from core.config import Settings
    from core.db import Database
    from core.models import DeliveryAlarm, Subscriber
    from papertrail.service.context import AppContext
    from papertrail.service.store_context import StoreContext

# Markup off: addresses, queries and titles are user text, and "[...]" in them must print as written.
out = Console(markup=False, highlight=False, soft_wrap=True)
err = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


# Exit codes (README, "Exit codes"): 2 when what was typed or configured is wrong (a malformed argument or
# option, invalid or missing settings, a file argument that is not a file), 1 when a well-formed command
# failed while running (not found in the store, network, database, delivery, a file that cannot be read).
USAGE = 2
FAILURE = 1


def fail(message: str, code: int = FAILURE) -> typer.Exit:
    err.print(Text("error: ", style="bold red") + Text(_masked(message)))
    return typer.Exit(code)


def count_of(count: int, singular: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """``count`` and the word in the form it takes: "1 item", "19 items", "2 matches" ("1 passes").

    The command line speaks English to the operator; readers' messages go through the catalogs' ngettext.
    """
    from core.english import counted

    return counted(count, singular, plural, grouped=grouped)


def exit_code_for(exc: Exception) -> int:
    """The exit code for an error from core: not found (LookupError) is a failure, anything else usage.

    A ValueError, a QueryError or a missing setting means the command line or the configuration is wrong;
    an unknown subscriber, paper or newsletter is a well-formed command that found nothing.
    """
    return FAILURE if isinstance(exc, LookupError) else USAGE


def _masked(message: str) -> str:
    """``message`` with every configured secret masked (a URL in an error may carry a token)."""
    from pydantic import ValidationError

    from core.config import Settings
    from papertrail.service import redact

    try:
        settings = Settings()
    except ValidationError:
        return message
    return redact.SecretRedactor(redact.secrets_of(settings)).mask(message)


def explain(exc: Exception) -> str:
    """The error text; for a query, followed by the query with a caret under the bad spot."""
    from core.follows.query import QueryError

    if isinstance(exc, QueryError):
        return f"{exc}\n{exc.excerpt()}"
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])  # str() of a KeyError is the repr of its message, quotes and all
    # Not stripped of quotes: "'notanemail' is not an email address" lost its opening quote.
    return str(exc)


# --verbose, as the main callback found it; logging is set up with the settings, when a command reads them
# (setting it up in the callback would load the settings' libraries for `papertrail follow --help`).
_VERBOSE: ContextVar[bool] = ContextVar("papertrail_cli_verbose", default=False)


def load_settings() -> Settings:
    """The settings, with logging set up from them; exit 2 saying what is wrong with invalid ones."""
    from pydantic import ValidationError

    from core.config import Settings
    from papertrail.service import channels, redact
    from papertrail.service.logs import configure_logging

    channels.install()  # before any address is read: core asks the registered channels for their rules
    try:
        settings = Settings()
    except ValidationError as exc:
        configure_logging(None, _VERBOSE.get())  # plain text: nothing to mask with yet
        # pydantic words a validator's own message "Value error, ...": the message is ours, whole.
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise fail(f"invalid settings: {problems}", 2) from exc
    configure_logging(settings, _VERBOSE.get())
    redact.install(settings)
    return settings


T = TypeVar("T")
# The event loop of the command being run (set by app_context). The HTTP client's pooled keep-alive
# connections, the chat clients and the notifiers belong to the loop that opened them: closing them in a
# second asyncio.run() would touch a closed loop ("Event loop is closed", exit 1 after a good run).
_RUNNER: ContextVar[asyncio.Runner | None] = ContextVar("papertrail_cli_runner", default=None)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in the current command's one event loop (a fresh one outside ``app_context``)."""
    runner = _RUNNER.get()
    if runner is not None:
        return runner.run(coro)
    import asyncio

    return asyncio.run(coro)


@contextmanager
def app_context() -> Iterator[AppContext]:
    """The app context of one command, with one event loop for all its async work, closing included."""
    import asyncio

    from papertrail.service.context import build_context

    settings = load_settings()
    try:
        ctx = build_context(settings)
    except Exception as exc:  # cannot reach or migrate the database: say which one, without the password
        raise cannot_open(settings, exc) from exc
    with asyncio.Runner() as runner:
        token = _RUNNER.set(runner)
        try:
            yield ctx
        finally:
            try:
                runner.run(ctx.aclose())
            finally:
                _RUNNER.reset(token)


def known_subscriber(db: Database, address: str) -> Subscriber:
    """The stored subscriber at ``address`` (its id set); exit 2 for a malformed address, 1 for an
    unknown one."""
    from core.channel import normalise_address
    from core.follows.subscribers import subscriber_by_address

    try:
        found = subscriber_by_address(db, normalise_address(address))
    except ValueError as exc:
        raise fail(str(exc), USAGE) from exc
    if found is None or found.id is None:
        raise fail(f"no subscriber {address}; add a follow with: papertrail follow {address} QUERY", FAILURE)
    return found


@contextmanager
def store_context() -> Iterator[StoreContext]:
    """The settings and the store of a command that needs nothing else (no network, no notifiers)."""
    from papertrail.service.store_context import StoreContext, open_store

    settings = load_settings()
    try:
        db = open_store(settings)
    except Exception as exc:  # cannot reach or migrate the database: say which one, without the password
        raise cannot_open(settings, exc) from exc
    ctx = StoreContext(settings, db)
    try:
        yield ctx
    finally:
        ctx.close()


def cannot_open(settings: Settings, exc: Exception) -> typer.Exit:
    """The exit for a database that cannot be opened, naming it without its password."""
    from core.config import mask_url_password
    from core.db import DatabaseFolderMissing

    # A mistyped path is configuration (exit 2); a server that cannot be reached, a failure (exit 1).
    code = USAGE if isinstance(exc, DatabaseFolderMissing) else FAILURE
    return fail(f"cannot open database {mask_url_password(settings.database_url)}: {exc}", code)


def set_verbose(verbose: bool) -> None:
    """Remember ``--verbose`` for :func:`load_settings`, which sets up logging when a command runs."""
    _VERBOSE.set(verbose)


def iso(value: datetime | None) -> str | None:
    """``value`` in ISO 8601, or None: how JSON output writes a time."""
    return value.isoformat() if value else None


def webhook_refusal(settings: Settings) -> Callable[[str], str | None]:
    """Why delivery would refuse an address: for ``webhook:`` its URL's rules
    (notifiers.public_address.refusal), for other channels nothing, and they load nothing here."""

    def refuse(address: str) -> str | None:
        channel, _, target = address.partition(":")
        if channel.strip().lower() != "webhook":
            return None
        import asyncio

        from notifiers.public_address import refusal

        return asyncio.run(refusal(target.strip(), settings.webhook_allowed_hosts))

    return refuse


def language_option(value: str | None) -> str | None:
    """``--language``: en or zh (codes such as zh-CN accepted); exit 2 naming the choices otherwise."""
    if value is None:
        return None
    from core.languages import LANGUAGES, normalize_language

    chosen = normalize_language(value)
    if chosen is None:
        raise fail(f"--language {value!r} is not one of: {', '.join(LANGUAGES)}", 2)
    return chosen


def alarm_line(alarm: DeliveryAlarm) -> str:
    """One delivery alarm as ``alarms`` and ``status`` print it."""
    return (
        f"delivery alarm on {alarm.channel}: {count_of(alarm.recipients, 'recipient')} refused the same way "
        f"({alarm.kind}) since {alarm.first_seen.isoformat()}, last {alarm.last_seen.isoformat()}; "
        f"{count_of(alarm.held, 'delivery', 'deliveries')} held for a retry, nobody paused. e.g. "
        f"{alarm.sample}"
    )
