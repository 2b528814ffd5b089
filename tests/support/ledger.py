"""The delivery ledger's test doubles: a scripted notifier, papers and seeded digests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from core.follows.manage import follow
from core.papers.pipeline import match_new
from core.store.facade import Store
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


def seed(store: Store, address: str = "console:ada", *, papers: int = 2, schedule: str = "instant") -> int:
    """A subscriber following cs.DC with ``papers`` matched new papers; returns the subscriber id."""
    result = follow(store, address, "cat:cs.DC", schedule=schedule)
    store.papers.save_versions([paper(f"2611.{n:05d}") for n in range(papers)])
    assert match_new(store) == papers
    assert result.subscriber.id is not None
    return result.subscriber.id
