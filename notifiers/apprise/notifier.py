"""Apprise notifier: one adapter for Discord, ntfy, Matrix, Teams, Gotify and ~100 other services.

The address is any Apprise URL (``apprise:ntfy://topic``, ``apprise:discord://id/token``,
``apprise:json://host/path``). Apprise is an optional extra (``pip install 'papertrail[apprise]'``) and is
imported only when a digest goes out, so PaperTrail runs without it.

The digest goes out as plain text (title = subject): Apprise escapes plain text for services that take
HTML or Markdown, whereas Markdown built from paper titles would let a title inject links. Apprise URLs
carry credentials (bot tokens, passwords, webhook tokens), so messages name a target only by its scheme
and host, as Apprise's own privacy view masks it. The generic HTTP services (json, form, xml) can point
anywhere, so they get the webhook channel's address check (see docs/webhooks.md).
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote, urlsplit

from core.channel import DeliveryError
from core.config_edges import AppriseSettings
from core.escaping import one_line
from core.values import Message, SendResult
from notifiers.public_address import public_addresses

# Apprise's plugin objects (NotifyBase) are only partly annotated; they are handled as Any here.
NotifyPlugin = Any

# Format: plain text (Apprise converts per service). Limit: per service, handled by Apprise (add
# ``overflow=split`` or ``overflow=truncate`` to the URL to choose); PAPERTRAIL_DIGEST_MAX_ITEMS caps digests.

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'papertrail[apprise]'"
# Apprise services whose URL names an arbitrary HTTP host: checked like webhook URLs.
_GENERIC_HTTP = frozenset({"json", "jsons", "form", "forms", "xml", "xmls"})
# Parts of a URL shorter than this are not scrubbed from Apprise's messages (ports, "x", "v1").
_MIN_SECRET = 4
_MAX_REASONS = 2


def load_apprise() -> ModuleType:
    """Import Apprise, or explain how to install it (a permanent error: retrying will not install it)."""
    try:
        import apprise
    except ImportError as exc:
        raise DeliveryError(
            f"apprise: addresses need the Apprise library, which is not installed: {INSTALL_HINT}, "
            "then restart PaperTrail",
            retryable=False,
        ) from exc
    return apprise


def describe(address: str, plugin: NotifyPlugin | None = None) -> str:
    """``scheme://host`` with credentials dropped and, when Apprise knows the service, tokens masked."""
    scheme = urlsplit(address).scheme.lower() or "?"
    netloc = ""
    if plugin is not None:
        netloc = urlsplit(str(plugin.url(privacy=True))).netloc
    elif scheme in _GENERIC_HTTP:
        netloc = urlsplit(address).netloc
    host = netloc.rpartition("@")[2]
    return f"{scheme}://{host or '…'}"


def _secret_parts(address: str, shown: str) -> list[str]:
    """Pieces of the URL that may be credentials, longest first, for scrubbing Apprise's messages."""
    parts = urlsplit(address)
    pieces = [parts.username or "", parts.password or ""]
    pieces += [unquote(segment) for segment in parts.path.split("/")]
    pieces += [value for _name, value in parse_qsl(parts.query)]
    if parts.hostname and parts.hostname not in shown:
        pieces.append(parts.hostname)  # the privacy view masked the host: it is a token (tgram://…)
    return sorted({piece for piece in pieces if len(piece) >= _MIN_SECRET}, key=len, reverse=True)


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "****")
    return one_line(text)[:300]


class AppriseNotifier:
    """Sends each digest through the Apprise service its URL names."""

    channel: ClassVar[str] = "apprise"
    max_length: ClassVar[int | None] = None

    def __init__(self, settings: AppriseSettings) -> None:
        self.settings = settings

    async def send(self, address: str, message: Message) -> SendResult:
        """Deliver one digest; raises DeliveryError (permanent for a missing library or a bad URL)."""
        if message.skip_parts >= 1:
            return SendResult(platform_id=None, parts=1)  # an earlier attempt was accepted
        apprise = load_apprise()
        asset = self._asset(apprise)
        plugin = apprise.Apprise.instantiate(address, asset=asset)
        if plugin is None:
            raise DeliveryError(
                f"{describe(address)} is not an Apprise URL this installation can use (unknown service, "
                "missing token or a malformed URL); check it against the Apprise wiki and register "
                "it again",
                retryable=False,
            )
        where = describe(address, plugin)
        await self._check_host(address, plugin)
        notifier = apprise.Apprise(asset=asset)
        notifier.add(plugin)
        try:
            result = await notifier.async_notify(
                body=message.text,
                title=one_line(message.subject),
                body_format=apprise.NotifyFormat.TEXT,
                timeout=self.settings.timeout,
            )
        except Exception as exc:
            # Apprise turns a plugin's failures into a False result; anything escaping is a bug in it or
            # in a plugin, reported here without the URL.
            raise DeliveryError(
                f"Apprise failed while sending to {where}: {type(exc).__name__}; will retry later",
                retryable=True,
            ) from exc
        try:
            if bool(result):
                log.info("apprise digest %s delivered to %s", message.key, where)
                return SendResult(platform_id=None, parts=1)
            raise self._failure(result, address, where)
        finally:
            close = getattr(result, "close", None)
            if callable(close):
                close()  # AppriseResult may keep captured logs in a temporary file

    async def aclose(self) -> None:
        """Nothing held between sends: each send builds its own Apprise object."""

    def _asset(self, apprise: ModuleType) -> Any:
        wanted: dict[str, Any] = {
            "app_id": "PaperTrail",
            "app_desc": "PaperTrail paper alerts",
            "app_url": self.settings.public_url,
            # Titles like ":rocket:" stay as typed, and a redirect cannot lead a request elsewhere.
            "interpret_emojis": False,
            "http_redirects": False,
            "secure_logging": True,
        }
        # Older Apprise releases lack some of these knobs; pass only the ones this one has.
        known = {name: value for name, value in wanted.items() if hasattr(apprise.AppriseAsset, name)}
        return apprise.AppriseAsset(**known)

    async def _check_host(self, address: str, plugin: NotifyPlugin) -> None:
        scheme = urlsplit(address).scheme.lower()
        if scheme not in _GENERIC_HTTP:
            return
        if hasattr(plugin, "redirects"):
            plugin.redirects = False  # even if the URL asked for ?redirect=yes
        host = str(getattr(plugin, "host", "") or "").strip("[]").lower()
        if host in self.settings.allowed_hosts:
            return
        port = getattr(plugin, "port", None)
        secure = scheme.endswith("s")
        await public_addresses(host, port if isinstance(port, int) else (443 if secure else 80),
                               self.settings.allowed_hosts)  # fmt: skip

    def _failure(self, result: object, address: str, where: str) -> DeliveryError:
        status = getattr(getattr(result, "status", None), "name", "FAILURE")
        if status == "TIMEOUT":
            return DeliveryError(
                f"Apprise could not reach {where} within {self.settings.timeout:g} s "
                "(PAPERTRAIL_WEBHOOK_TIMEOUT); will retry later",
                retryable=True,
            )
        reasons = _reasons(result, _secret_parts(address, where))
        detail = (
            f"Apprise says: {' / '.join(reasons)}"
            if reasons
            else "Apprise gave no reason; its log goes to the Python logger 'apprise' (set it to DEBUG "
            "to see the exchange)"
        )
        # Apprise reports only success or failure, not whether the service would ever accept the
        # message: treat every failure as retryable and let the ledger's attempt limit end it.
        return DeliveryError(
            f"Apprise could not deliver to {where}: {detail}; will retry later", retryable=True
        )


def _reasons(result: object, secrets: list[str]) -> list[str]:
    """The last warnings and errors Apprise captured during the call (Apprise 2.x), scrubbed."""
    logs = getattr(result, "logs", None)
    if not callable(logs):
        return []
    messages: list[str] = []
    for entry in logs():
        if str(getattr(entry, "level", "")).upper() in ("WARNING", "ERROR", "CRITICAL"):
            text = _scrub(str(getattr(entry, "message", "")), secrets).rstrip(".")
            if text and text not in messages:
                messages.append(text)
    return messages[-_MAX_REASONS:]
