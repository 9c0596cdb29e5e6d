"""The scheduling policy's interface: the order requests wait in, and who gives way when KV runs out.

The engine keeps the mechanics, the way vLLM's V1 scheduler does for every policy: each step it
schedules the running batch in batch order, and when a sequence cannot grow its KV cache it
preempts the running sequence the policy names (its blocks freed, its work recomputed later)
until it can; then it admits the policy's next waiting request while there is a sequence slot,
step-token budget and KV for its whole prompt. The first that does not fit blocks those behind
it. A policy only orders: it never touches the KV cache or the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from surgelab.engine.request import EngineRequest

__all__ = ["S", "Scheduler", "Sequenced"]


class Sequenced(Protocol):
    """What a policy may read of a request inside the engine."""

    @property
    def request(self) -> EngineRequest: ...

    @property
    def generated(self) -> int:
        """Tokens generated so far (a preempted sequence keeps them: it recomputes prompt and these)."""
        ...

    @property
    def place(self) -> int:
        """When it last joined the running batch (increasing; -1 before it first did)."""
        ...


S = TypeVar("S", bound=Sequenced)


class Scheduler(Protocol[S]):
    """One engine's waiting queue and preemption choice; a fresh one per engine (it holds the queue)."""

    name: str

    def __len__(self) -> int:
        """Requests waiting."""
        ...

    def add(self, seq: S) -> None:
        """A new request waits."""
        ...

    def requeue(self, seq: S) -> None:
        """A preempted sequence waits again."""
        ...

    def remove(self, seq: S) -> None:
        """A waiting request is aborted."""
        ...

    def peek(self) -> S:
        """The request to admit next (only asked while one waits)."""
        ...

    def pop(self) -> S:
        """Take the request ``peek`` named: it is admitted."""
        ...

    def victim(self, running: Sequence[S], first: int) -> int:
        """The index in ``running`` (batch order) of the sequence to preempt, ``first`` or later: those
        before ``first`` are scheduled in this step already; ``first`` is the one that needs the blocks."""
        ...
