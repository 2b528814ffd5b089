"""The channel registry: core names no channel, asks the registered one, and says the same as before."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.channel import Channels, channel_of, normalise_address
from core.config import Settings
from core.people.masking import mask_address, mask_text
from papertrail.service.channels import CHANNELS

ROOT = Path(__file__).resolve().parent.parent


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings (examples in prose are fine)."""
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_core_names_no_channel_of_the_edges() -> None:
    # A channel's name as a value in core would be a rule that belongs to the channel's package.
    names = {c.name for c in CHANNELS if c.delivers}
    # PAPERTRAIL_TELEGRAM_MODE's values: how the bot receives updates ("polling" or "webhook"), no channel.
    allowed = {("core/config.py", "webhook")}
    found = [
        f"{path.relative_to(ROOT)}:{line} {value!r}"
        for path in sorted((ROOT / "core").rglob("*.py"))
        for line, value in _strings(ast.parse(path.read_text(encoding="utf-8")))
        if (value in names or (value.partition(":")[0] in names and ":" in value))
        and (str(path.relative_to(ROOT)), value) not in allowed
    ]
    assert found == []


def test_the_address_errors_read_as_before() -> None:
    with pytest.raises(ValueError, match=r"known channels: console, email, telegram, slack, slack-webhook, "):
        normalise_address("fax:123")
    with pytest.raises(ValueError) as form:
        normalise_address("nobody-at-all")
    assert str(form.value).endswith(
        "use e.g. email:ada@example.org, telegram:12345, slack:C0123 or console:NAME"
    )
    with pytest.raises(ValueError, match="telegram chat id 'abc' must be a number"):
        normalise_address("telegram:abc")
    assert normalise_address("Email:Ada@Example.ORG") == "email:Ada@example.org"
    assert normalise_address("newsletter:ml-weekly") == "newsletter:ml-weekly"


def test_each_channel_masks_its_own_addresses() -> None:
    assert mask_address("webhook:https://h.example/x?token=abc") == "webhook:https://h.example/x?token=****"
    assert mask_address("telegram:12345") == "telegram:12345"
    # Free text: a URL channel's address fully, other URLs only where a key names a credential.
    text = "posting to webhook:https://h.example/x?id=7 then https://api.example/x?id=7&token=s"
    assert mask_text(text) == (
        "posting to webhook:https://h.example/x?id=**** then https://api.example/x?id=7&token=****"
    )


def test_only_the_newsletter_pseudo_channel_delivers_nothing() -> None:
    assert [c.name for c in CHANNELS if not c.delivers] == ["newsletter"]
    assert not channel_of("newsletter:ml-weekly").delivers
    # A registry without the edges' channels still knows core's own.
    assert [c.name for c in Channels(())] == ["newsletter"]


def test_unconfigured_channels_say_what_to_set() -> None:
    missing = CHANNELS.unconfigured(Settings(_env_file=None, smtp_host="", telegram_token=None))
    assert missing["email"] == "set PAPERTRAIL_SMTP_HOST"
    assert missing["telegram"] == "set PAPERTRAIL_TELEGRAM_TOKEN"
    assert "console" not in missing and "newsletter" not in missing
