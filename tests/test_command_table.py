"""The chat commands' one table (bot/commands_table.py): every command the grammar runs has its help, menu
line and rights there, and nothing outside it runs.

The grammar and help read the same rows, so a command cannot be run without help text or shown without a
handler; these tests keep the rows complete and the words unambiguous, and check that the grammar and the
documentation name the same commands as the table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import bot.commands
from bot.commands_base import Problem
from bot.commands_table import ALIASES, BY_NAME, COMMANDS, HINTS, Command, find, page
from core.db import Database
from tests.support.chat_commands import (  # noqa: F401  (fixtures)
    GROUP_ADMIN,
    GROUP_MEMBER,
    PRIVATE,
    migrated_template_fixture,
    say,
    store_fixture,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_every_command_has_its_texts_and_a_handler(command: Command) -> None:
    assert re.fullmatch(r"[a-z]+", command.name)
    assert command.summary and len(command.summary) <= 60  # Telegram's menu shows one short line
    assert f"{{p}}{command.name}" in command.page  # the page shows how to type it
    assert page(command.name, "/").startswith(f"/{command.name}")
    assert callable(command.run)
    assert not command.shows_without_arguments or command.changes
    assert not command.vote or command.changes


def test_every_word_runs_or_suggests_one_command() -> None:
    names = [command.name for command in COMMANDS]
    assert len(set(names)) == len(names)
    words = [*names, *(a for c in COMMANDS for a in c.aliases), *(h for c in COMMANDS for h in c.hints)]
    assert len(set(words)) == len(words), "a word names two commands, or is both run and only suggested"
    assert all(find(alias) is BY_NAME[name] for alias, name in ALIASES.items())
    assert all(find(hint) is None for hint in HINTS)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_the_grammar_runs_every_command_of_the_table(db: Database, command: Command) -> None:
    reply = say(db, f"/{command.name}", PRIVATE)
    assert reply.error is not Problem.UNKNOWN_COMMAND
    assert reply.command == command.name
    helped = say(db, f"/help {command.name}", PRIVATE)
    assert helped.ok and helped.text == page(command.name, "/")


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.changes], ids=lambda command: command.name)
def test_a_group_member_runs_only_what_changes_nothing(db: Database, command: Command) -> None:
    say(db, "/start", GROUP_ADMIN)
    with_arguments = say(db, f"/{command.name} 1", GROUP_MEMBER)
    assert (with_arguments.error is Problem.NOT_ALLOWED) is not command.checks_rights_itself
    without = say(db, f"/{command.name}", GROUP_MEMBER)
    refused = not command.checks_rights_itself and not command.shows_without_arguments
    assert (without.error is Problem.NOT_ALLOWED) is refused


def test_the_grammar_and_the_docs_name_the_table_s_commands() -> None:
    grammar = (bot.commands.__doc__ or "").split("COMMAND :=", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"[a-z]+", grammar) == [command.name for command in COMMANDS]
    documented = re.findall(r"^### (.+)$", (ROOT / "docs" / "chat-commands.md").read_text(), re.M)
    named = {word for heading in documented for word in re.findall(r"(?:^|, )([a-z]+)", heading)}
    assert named == set(BY_NAME)
