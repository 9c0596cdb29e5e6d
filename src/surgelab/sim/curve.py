"""A replica whose every request takes a time set by how many requests it holds (``latency_curve``).

Seed 002's toy ``InferenceService`` is such a service: ``latency(c)`` falls as log2(c + 1)
while c requests fit in memory, rises quadratically past it, and a share of the requests
fails past 1.2 × capacity. The seed computes one latency per steady level c; here each
request's latency is **fixed at its admission** from ``c``, the requests the replica holds
at that instant with it included, and does not change afterwards:

- requests that arrive at the same nanosecond are admitted together, once every arrival
  due at that instant is in, so all of them see the same ``c`` (a closed loop of c users
  with no think time sends its c requests at once and each sees c, as the seed assumes);
- a request that ends at that instant is no longer held (completions come first).

So a closed loop of c users with no think time is a train of rounds: all c requests take
``latency(c)`` and end together, and c/latency(c) requests end per second, the seed's
figure. The whole answer arrives at the end of the request (one chunk, like the service
model); its response headers leave at admission. The failed share is spread evenly (a
running tally, not a coin): a steady level fails exactly ``error_rate(c)`` of its requests,
each at the end of its time, with HTTP 503.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from surgelab.metrics.record import State
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.fleet import LatencyCurve
from surgelab.sim.replica import Replica, deliver_whole
from surgelab.sim.request import SECOND, SimRequest

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["CurveBackend"]


class CurveBackend:
    """Requests held at once set each new request's latency and its chance of failing."""

    waiting = 0

    def __init__(self, curve: LatencyCurve) -> None:
        self.curve = curve
        self.held = 0  # requests whose latency is set and that have not ended
        self.arriving: list[SimRequest] = []  # sent here at this instant, admitted at its end
        self.busy: set[Event] = set()
        self.tally = 0.0  # failures owed: the error share accumulates, a whole one fails a request
        self._mark = 0

    def submit(self, rep: Replica, req: SimRequest, now: int) -> Iterable[Event]:
        self.settle(rep, now)
        self.arriving.append(req)
        if len(self.arriving) > 1:
            return ()
        # after every arrival already due at this instant (same time and rank, created earlier)
        return (Call(now, Rank.ARRIVAL, _admit, rep, self),)

    def abort(self, req: SimRequest) -> None:
        pass  # the service does not notice a client leaving: the request holds its place to the end

    def settle(self, rep: Replica, now: int) -> None:
        """Count busy time (at least one request held) up to ``now``."""
        if self.held or self.arriving:
            rep.busy_ns += now - self._mark
        self._mark = now

    def reset(self, rep: Replica, now: int) -> None:
        self.settle(rep, now)
        for event in self.busy:
            event.cancelled = True
        self.busy.clear()
        self.held, self.arriving = 0, []


def _admit(sim: Simulator, rep: Replica, backend: CurveBackend) -> Iterable[Event]:
    now, curve = sim.now, backend.curve
    batch = [r for r in backend.arriving if r.replica is rep and not r.done]
    backend.settle(rep, now)
    backend.arriving = []
    if not batch:  # admitted already at this instant, or lost with a crash
        return ()
    backend.held += len(batch)
    held = backend.held
    span = max(1, round(curve.latency(held) * SECOND))
    share = curve.error_rate(held)
    events: list[Event] = []
    for req in batch:
        fails = False
        if share > 0:
            backend.tally += share
            if backend.tally >= 1 - 1e-9:
                backend.tally -= 1
                fails = True
        event = Call(now + span, Rank.STEP_END, _ended, rep, backend, req, held if fails else 0)
        backend.busy.add(event)
        events.append(event)
    return events


def _ended(sim: Simulator, rep: Replica, backend: CurveBackend, req: SimRequest, failed_at: int) -> Iterable[Event]:
    backend.busy.discard(sim.current)
    backend.settle(rep, sim.now)
    backend.held -= 1
    if req.replica is not rep:
        return ()
    if failed_at:
        req.outcome.http_status = 503
        req.outcome.fail(State.HTTP_ERROR, f"overloaded: {failed_at} requests held (capacity {backend.curve.slots})",
                         sim.now)  # fmt: skip
        return sim.finish(req, sim.now)
    return deliver_whole(sim, req)
