"""The notifier contract shared by every channel adapter, and the one error they raise."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, TextIO

from core.values import Message, SendResult

if TYPE_CHECKING:
    from core.config import Settings
    from core.delivery.rate_limit import RateLimit


class DeliveryError(Exception):
    """A message could not be delivered.

    ``retryable`` says whether trying again later may work (a timeout, a 429, an unreachable server)
    or not (a blocked bot, an address that does not exist). ``retry_after`` is the platform's own hint in
    seconds, when it gave one.

    ``delivered_parts`` counts the parts of a split digest the platform accepted before the failure
    (counting any the message asked to skip), so that a retry resumes after them instead of repeating them.

    ``kind`` names the way the platform said no, the same for every recipient it says it to (``rcpt 550
    5.7.1`` for an SMTP server refusing a recipient with that reply): refusals of one kind by many
    recipients at once are the server's problem, not theirs (core.delivery.alarm). None: unclassified.
    ``operator`` marks a failure of the sender's own setup (SMTP login or sender address refused): an
    alarm for the operator whatever the count, never a reason to pause a subscriber.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        delivered_parts: int = 0,
        kind: str | None = None,
        operator: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.delivered_parts = delivered_parts
        self.kind = kind
        self.operator = operator


class LeaseLost(Exception):
    """The digest being sent is no longer this worker's: its lease ran out and another worker took it.

    Raised by :func:`part_delivered` between two parts of a split digest. Adapters let it pass (it is not a
    :class:`DeliveryError`): the parts already sent stay sent, and the digest is the other worker's to finish
    and record.
    """


# What the ledger runs after each part a platform accepted (core.delivery.digests sets it per delivery). A
# context
# variable, not a parameter of Notifier.send, so that adapters that never split need not know about it.
_part_hook: ContextVar[Callable[[int], Awaitable[None]] | None] = ContextVar("part_hook", default=None)


async def part_delivered(parts: int) -> None:
    """Adapters call this after the platform accepted a part of a split digest, before sending the next.

    ``parts`` counts the parts delivered so far, including any the message asked to skip. The ledger renews
    the digest's lease, so that a long digest sent at a chat's pace is never taken over mid-send, and
    raises :class:`LeaseLost` when the digest is no longer this worker's: the adapter must then stop.
    Outside a delivery (tests, the console) it does nothing.
    """
    hook = _part_hook.get()
    if hook is not None:
        await hook(parts)


@contextmanager
def on_part_delivered(hook: Callable[[int], Awaitable[None]]) -> Iterator[None]:
    """Run ``hook(parts)`` for every :func:`part_delivered` in this task while the block runs."""
    token = _part_hook.set(hook)
    try:
        yield
    finally:
        _part_hook.reset(token)


# What the ledger runs the moment a platform accepted a whole digest (core.delivery.digests sets it per
# delivery).
# Adapters whose send completes on the event loop need not call it: the ledger records the send as soon as
# ``Notifier.send`` returns. An adapter that sends from its own thread (email) takes the recorder on the
# loop with :func:`accepted_recorder` and calls it in that thread right after the platform's acceptance,
# before it takes the next send: a crash can then repeat at most the one send that thread had in flight,
# however busy the event loop is.
_accepted_hook: ContextVar[Callable[[SendResult], None] | None] = ContextVar("accepted_hook", default=None)


def accepted_recorder() -> Callable[[SendResult], None] | None:
    """The ledger's recorder for the delivery running in this task, or None outside a delivery.

    Call it on the event loop (context variables do not follow a job into a thread) and hand the result to
    the thread that talks to the platform. The recorder is thread-safe, never raises, and records once.
    """
    return _accepted_hook.get()


@contextmanager
def on_accepted(hook: Callable[[SendResult], None]) -> Iterator[None]:
    """Make ``hook`` this task's :func:`accepted_recorder` while the block runs."""
    token = _accepted_hook.set(hook)
    try:
        yield
    finally:
        _accepted_hook.reset(token)


class Notifier(Protocol):
    """One channel adapter. ``address`` is the part of the subscriber address after ``channel:``.

    ``max_length`` is the platform's limit per message in the units the platform counts (None: no limit).
    It is the limit the adapter's split uses: an adapter that splits passes its own ``max_length`` to
    :func:`pack_blocks`, so the declared limit and the enforced one cannot drift apart.
    """

    channel: ClassVar[str]
    max_length: ClassVar[int | None]

    async def send(self, address: str, message: Message) -> SendResult:
        """Deliver one rendered digest, or raise :class:`DeliveryError`."""
        ...

    async def aclose(self) -> None:
        """Release connections and sessions; the notifier may not be used afterwards."""
        ...


@dataclass(frozen=True, slots=True)
class Packed:
    """One message of a split digest: its text and the versioned ids (``2306.03564v2``) of the items its
    blocks show, recorded as the message is packed (never read back out of the text)."""

    text: str
    items: tuple[str, ...] = ()


def pack_blocks(
    blocks: Sequence[str],
    limit: int | None,
    *,
    shorten: Callable[[str, int], str],
    measure: Callable[[str], int] = len,
    items: Sequence[tuple[str, ...]] | None = None,
    max_items: int | None = None,
) -> list[Packed]:
    """Join blocks into as few messages of at most ``limit`` units as possible, in order.

    ``limit`` is the adapter's declared :attr:`Notifier.max_length` (None: no length limit). Messages break
    only between blocks, never inside one. A single block longer than ``limit`` on its own is passed to
    ``shorten(block, limit)``, which must return a well-formed block within the limit (e.g. the block with
    its text cut and its markup closed); the adapter knows its format. ``measure`` counts units the way the
    platform does (Telegram counts UTF-16 code units, for instance). ``items`` gives, per block, the ids of
    the items it shows; each message carries those of its blocks, and with ``max_items`` holds at most that
    many (Telegram: the items whose buttons one message can carry).
    """
    if items is not None and len(items) != len(blocks):
        raise ValueError(f"{len(items)} item records for {len(blocks)} blocks")
    messages: list[Packed] = []
    current = ""
    size = 0
    held: tuple[str, ...] = ()
    for index, block in enumerate(blocks):
        length = measure(block)
        if limit is not None and length > limit:
            block = shorten(block, limit)
            length = measure(block)
            if length > limit:
                raise ValueError(f"shorten() returned {length} units for a limit of {limit}")
        shows = items[index] if items is not None else ()
        full = max_items is not None and len(held) + len(shows) > max_items
        if current and ((limit is not None and size + length > limit) or full):
            messages.append(Packed(current, held))
            current, size, held = "", 0, ()
        current += block
        size += length
        held += shows
    if current.strip():
        messages.append(Packed(current, held))
    return messages


def split_address(address: str) -> tuple[str, str]:
    """Split ``email:ada@example.org`` into ``("email", "ada@example.org")``.

    Raises ValueError with a hint (addresses of the registered channels) when the address has no known shape.
    """
    channel, sep, target = address.partition(":")
    if not sep or not channel or not target.strip():
        raise ValueError(
            f"address {address!r} is not of the form CHANNEL:TARGET; use e.g. {_installed.examples()}"
        )
    return channel.strip().lower(), target.strip()


def http_target(channel: str, target: str) -> str:
    """The address rule of a channel whose target is a URL: an http(s) URL, or a ValueError that says so."""
    if not target.startswith(("https://", "http://")):
        raise ValueError(f"{channel} target {target!r} must be an http(s) URL, e.g. {channel}:https://…")
    return target


class Channel(Protocol):
    """One delivery channel's rules, behind which core never names a channel.

    Each channel package (notifiers/<name>/) implements it; the composition root registers them
    (:func:`install_channels`) and core asks the registered channel of an address for its rules.
    """

    @property
    def name(self) -> str:
        """The address prefix: ``telegram`` in ``telegram:12345``."""
        ...

    @property
    def example(self) -> str:
        """One address of this channel, shown in hints: ``telegram:12345``."""
        ...

    @property
    def delivers(self) -> bool:
        """False for a pseudo-channel no notifier serves (a newsletter's hidden subscriber)."""
        ...

    @property
    def vote_links(self) -> bool:
        """Whether its digests carry signed vote links per item (chats vote with buttons of their own)."""
        ...

    @property
    def confirms_by_mail(self) -> bool:
        """Whether an address of this channel can sign up on the web: a confirmation mail reaches it."""
        ...

    def normalise(self, target: str) -> str:
        """The canonical spelling of ``target`` (the part after ``name:``); raises ValueError or a
        :class:`Refusal` saying how to write it."""
        ...

    def mask(self, target: str) -> str:
        """``target`` fit to print: its credentials (a URL's password, token, query values) masked."""
        ...

    def missing_setting(self, settings: Settings) -> str | None:
        """What to set for this process to deliver here (``set PAPERTRAIL_…``), or None when configured."""
        ...

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """The channel's notifier, from its own slice of ``settings``; called only when configured."""
        ...


@dataclass(frozen=True, slots=True)
class NotifierParts:
    """What the shell shares with the notifiers it builds: where the console writes, and the send slots the
    rate-limited adapters share (core.delivery.rate_limit.rate_limit_for; None: each its own, in memory)."""

    console: TextIO | None = None
    slots: RateLimit | None = None


# ``newsletter:NAME`` is the hidden subscriber holding a newsletter's follows and schedule. No notifier
# serves this channel: its matches become issues fanned out to the members (core.people.newsletters). It is
# core's own channel, so every registry holds it.
NEWSLETTER_CHANNEL = "newsletter"
NEWSLETTER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


class NewsletterChannel:
    """The newsletter pseudo-channel: a name, no notifier."""

    name = NEWSLETTER_CHANNEL
    example = "newsletter:ml-weekly"
    delivers = False
    vote_links = False
    confirms_by_mail = False

    def normalise(self, target: str) -> str:
        """A newsletter's name, checked."""
        if not NEWSLETTER_NAME.match(target):
            raise ValueError(
                f"newsletter name {target!r} must be lowercase letters, digits and dashes (at most 64), "
                "e.g. newsletter:ml-weekly"
            )
        return target

    def mask(self, target: str) -> str:
        """A name carries no credential."""
        return target

    def missing_setting(self, settings: Settings) -> str | None:
        """Nothing to configure: nothing is sent to a newsletter itself."""
        return None

    def build(self, settings: Settings, parts: NotifierParts) -> Notifier:
        """Never called: the registry builds notifiers only for channels that deliver."""
        raise TypeError("no notifier serves the newsletter pseudo-channel")


class Channels:
    """The registered channels, in order, and the address rules that ask them.

    ``examples`` names the channels whose example addresses a malformed address's hint shows, in that order.
    """

    def __init__(self, channels: Sequence[Channel], *, examples: Sequence[str] = ()) -> None:
        self._channels: dict[str, Channel] = {c.name: c for c in channels}
        self._channels.setdefault(NEWSLETTER_CHANNEL, NewsletterChannel())
        self._examples = tuple(examples)

    def __iter__(self) -> Iterator[Channel]:
        return iter(self._channels.values())

    def find(self, name: str) -> Channel | None:
        """The channel called ``name`` (lower case), or None."""
        return self._channels.get(name)

    def of(self, address: str) -> Channel:
        """The channel of a (normalised) address; raises ValueError for an unknown one."""
        name, _ = split_address(address)
        found = self._channels.get(name)
        if found is None:
            raise ValueError(
                f"unknown channel {name!r} in {address!r}; known channels: {', '.join(self._channels)}"
            )
        return found

    def examples(self) -> str:
        """``email:ada@example.org, telegram:12345 or console:NAME``: the hint's example addresses."""
        shown = [self._channels[n].example for n in self._examples if n in self._channels]
        shown = shown or [c.example for c in self._channels.values()]
        return ", ".join(shown[:-1]) + f" or {shown[-1]}" if len(shown) > 1 else shown[0]

    def normalise_address(self, address: str) -> str:
        """Validate an address with its channel's rules and return its canonical spelling."""
        channel = self.of(address)
        return f"{channel.name}:{channel.normalise(split_address(address)[1])}"

    def unconfigured(self, settings: Settings) -> dict[str, str]:
        """Channels this process cannot deliver to, with the setting that would enable each."""
        found = {c.name: c.missing_setting(settings) for c in self._channels.values() if c.delivers}
        return {name: hint for name, hint in found.items() if hint is not None}

    def build_notifiers(self, settings: Settings, parts: NotifierParts | None = None) -> dict[str, Notifier]:
        """Every configured channel's notifier, keyed by channel, each built from its own slice of settings.

        A channel that is not configured is not built: a subscriber there keeps its matches pending until a
        process that can deliver them runs, instead of burning through retries and dead-lettering.
        """
        parts = parts or NotifierParts()
        return {
            c.name: c.build(settings, parts)
            for c in self._channels.values()
            if c.delivers and c.missing_setting(settings) is None
        }


# The channels the composition root registered (papertrail/service/channels.py); until then, core's own only.
_installed = Channels(())


def install_channels(channels: Channels) -> None:
    """Register the process's channels; core's address rules ask them from then on."""
    global _installed
    _installed = channels


def channels() -> Channels:
    """The registered channels."""
    return _installed


def channel_of(address: str) -> Channel:
    """The registered channel of ``address``; raises ValueError for an unknown one."""
    return _installed.of(address)


def normalise_address(address: str) -> str:
    """Validate an address and return its canonical spelling, by the rules of its registered channel."""
    return _installed.normalise_address(address)
