"""Events of the simulation, and the one order they are processed in.

Every event carries its virtual time (integer nanoseconds on the run clock) and a *rank*;
the heap key is ``(time_ns, rank, seq)``:

1. **time** first;
2. at the same nanosecond, **rank** decides (lower first):
   ``STEP_END`` (a replica delivers tokens and frees capacity) before ``LIFECYCLE``
   (a replica becomes ready, crashes or restarts) before ``CONTROL`` (health checks,
   autoscaler syncs, scheduled scaling) before ``ARRIVAL`` (a request is sent) before
   ``TIMEOUT`` (a queued request gives up) before ``SAMPLE`` (the timeline reads the
   gauges, so it sees everything that happened at that instant);
3. then **seq**, the order the events were created: first scheduled, first processed.

Nothing else orders events: handlers never look at the heap, they return their follow-up
events and the main loop pushes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["Rank", "Event", "Call"]


class Rank(IntEnum):
    STEP_END = 0
    LIFECYCLE = 1
    CONTROL = 2
    ARRIVAL = 3
    TIMEOUT = 4
    SAMPLE = 5


class Event:
    """Something that happens at ``time``; ``handle`` returns the events it causes."""

    __slots__ = ("time", "cancelled")
    rank: Rank = Rank.CONTROL

    def __init__(self, time: int) -> None:
        self.time = time
        self.cancelled = False

    def handle(self, sim: Simulator) -> Iterable[Event]:  # pragma: no cover - interface
        raise NotImplementedError


class Call(Event):
    """An event that runs ``fn(sim, *args)`` at its time, with an explicit rank."""

    __slots__ = ("fn", "args", "rank")

    def __init__(self, time: int, rank: Rank, fn: Callable[..., Iterable[Event] | None], *args: Any) -> None:
        self.time, self.cancelled, self.rank, self.fn, self.args = time, False, rank, fn, args

    def handle(self, sim: Simulator) -> Iterable[Event]:
        return self.fn(sim, *self.args) or ()

    def __repr__(self) -> str:
        return f"Call({self.time}, {self.rank.name}, {getattr(self.fn, '__qualname__', self.fn)})"
