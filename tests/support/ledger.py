"""The delivery ledger's test doubles: a scripted notifier, papers and seeded digests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from core.db import Database
from core.follows.index import match_new
from core.follows.manage import follow
from core.papers import paper_records
from core.values import Message, PaperIn, SendResult


@dataclass
class ScriptedNotifier:
    """Answers each send with the next scripted outcome (a SendResult or a DeliveryError to raise)."""

    channel: ClassVar[str] = "console"
    max_length: ClassVar[int | None] = None
    outcomes: list[SendResult | Exception] = field(default_factory=list)
    sent: list[tuple[str, Message]] = field(default_factory=list)

    async def send(self, address: str, message: Message) -> SendResult:
        outcome = self.outcomes.pop(0) if self.outcomes else SendResult(platform_id="ok")
        if isinstance(outcome, Exception):
            raise outcome
        self.sent.append((address, message))
        return outcome

    async def aclose(self) -> None:
        pass


def paper(arxiv_id: str, version: int = 1, title: str = "Asynchronous rollouts") -> PaperIn:
    return PaperIn(arxiv_id, version, title, "An abstract.", ("Ada Lovelace",), ("cs.DC",))


def seed(db: Database, address: str = "console:ada", *, papers: int = 2, schedule: str = "instant") -> int:
    """A subscriber following cs.DC with ``papers`` matched new papers; returns the subscriber id."""
    result = follow(db, address, "cat:cs.DC", schedule=schedule)
    paper_records.save_versions(db, [paper(f"2611.{n:05d}") for n in range(papers)])
    assert match_new(db) == papers
    assert result.subscriber.id is not None
    return result.subscriber.id
