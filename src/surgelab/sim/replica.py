"""A replica and the two models that can serve inside it.

``EngineBackend`` steps the engine model exactly as the embedded server's driver does
(``surgelab/server/driver.py``), only in virtual time: a request is added to the engine the
moment it arrives; an idle engine starts a step at once; ``step()`` is called at the *start*
of a step (its batch is decided then) and its tokens are delivered at the end; steps shorter
than ``coalesce`` are run back to back and their tokens delivered together at the end of
the batch, by the server's own coalescing rule (``engine.step_batch``); then the next batch starts immediately. A
request still waiting for its first token when its client's ``first_token`` timeout passes
is aborted at the next step boundary, as the server aborts a request whose client left.

``ServiceBackend`` is a plain queueing server for validation: each request holds one of
``concurrency`` servers for a time drawn from ``service_time`` (times its output tokens with
``per_output_token``) and gets its whole answer at the end, in one chunk. Its response headers (``first_byte_ns``) leave when service starts.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from surgelab.engine import Engine, EngineProfile, EngineRequest, step_batch
from surgelab.load.health import HealthState
from surgelab.metrics.record import State
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.request import SECOND, SimRequest

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["Replica", "EngineBackend", "ServiceBackend", "Backend", "deliver_whole",
           "STARTING", "READY", "DOWN", "DRAINING", "STOPPED"]

STARTING, READY, DOWN, DRAINING, STOPPED = "starting", "ready", "down", "draining", "stopped"


class Backend(Protocol):
    """What serves inside a replica: an engine, the service model, or a latency curve (``curve.py``)."""

    @property
    def waiting(self) -> int: ...

    def submit(self, rep: Replica, req: SimRequest, now: int) -> Iterable[Event]: ...
    def abort(self, req: SimRequest) -> None: ...
    def settle(self, rep: Replica, now: int) -> None: ...
    def reset(self, rep: Replica, now: int) -> None: ...


class Replica:
    """One instance: its lifecycle state, what it holds, and the router's view of its health."""

    def __init__(
        self, name: str, pool: object, backend: Backend, limit: int | None, now: int, ready: bool
    ) -> None:
        self.name, self.pool, self.backend, self.limit = name, pool, backend, limit
        self.state = READY if ready else STARTING
        self.outstanding: dict[str, SimRequest] = {}
        self.router_up = ready
        self.health: HealthState | None = None  # the router's belief from checks and requests (router.health_check)
        self.busy_ns = self.busy_mark = 0
        self.dispatched = 0  # requests sent here since the autoscaler's last sync
        self.received = 0  # requests sent here, ever
        self.started_ns = now
        self.stopped_ns: int | None = None
        self.crash: dict | None = None  # the failure under way, for switch-over accounting
        self.coming_up: Event | None = None  # the end of its cold start, cancelled if it crashes meanwhile

    def has_capacity(self) -> bool:
        return self.limit is None or len(self.outstanding) < self.limit

    def routable(self) -> bool:
        """What the router may send to: up in its view, and ready with room (or dead unbeknownst)."""
        return self.router_up and (self.state == DOWN or (self.state == READY and self.has_capacity()))

    def submit(self, req: SimRequest, now: int) -> Iterable[Event]:
        self.reserve(req)
        return self.arrive(req, now)

    def reserve(self, req: SimRequest) -> None:
        """The router sends ``req`` here: it is held (counted against the limit) from now."""
        req.replica = self
        self.dispatched += 1
        self.received += 1
        self.outstanding[req.rid] = req

    def arrive(self, req: SimRequest, now: int) -> Iterable[Event]:
        """``req`` reaches the replica (at once, or after the network's way there).

        An engine whose profile has a front-end time (``request_overhead_s``) takes the request
        that much later (``_admit``): the front end's work delays its admission, not any step.
        A request the engine can never serve is refused at once, as without it.
        """
        req.outcome.first_byte_ns = now
        front = getattr(self.backend, "front_ns", 0)
        if front:
            self.backend.check(req)  # type: ignore[attr-defined]
            return (Call(now + front, Rank.ARRIVAL, _admit, self, req),)
        return self.backend.submit(self, req, now)

    def release(self, req: SimRequest) -> None:
        self.outstanding.pop(req.rid, None)
        req.replica = None

    def busy_at(self, now: int) -> int:
        """Nanoseconds spent stepping up to ``now``: a step counts whole from its start."""
        self.backend.settle(self, now)
        return self.busy_ns

    def reset(self, now: int) -> None:
        """Lose the engine's state (a crash or a stop): tokens delivered by ``now`` stay delivered."""
        self.backend.reset(self, now)

    def alive_ns(self, end: int) -> int:
        return (self.stopped_ns if self.stopped_ns is not None else end) - self.started_ns


class EngineBackend:
    def __init__(self, profile: EngineProfile, prefix_caching: bool, coalesce_s: float) -> None:
        self.profile, self.prefix_caching = profile, prefix_caching
        self.coalesce = coalesce_s
        self.engine = Engine(profile, prefix_caching=prefix_caching)
        self.pending: Event | None = None
        self.deadlines: list[tuple[int, str]] = []  # first-token deadlines of requests not yet answered
        self.front_ns = round(profile.request_overhead_s * SECOND)

    @property
    def waiting(self) -> int:
        return self.engine.num_waiting

    def check(self, req: SimRequest) -> None:
        """RequestRejected if the engine could never serve ``req``."""
        self.engine.check(EngineRequest(req.rid, req.spec.prompt_tokens, req.output_tokens, req.hashes))

    def submit(self, rep: Replica, req: SimRequest, now: int) -> Iterable[Event]:
        self.engine.add(EngineRequest(req.rid, req.spec.prompt_tokens, req.output_tokens, req.hashes))
        sent = req.outcome.sent_ns
        assert sent is not None  # a request the engine sees was sent
        heapq.heappush(self.deadlines, (sent + req.first_token_deadline, req.rid))
        return self._start(rep, now) if self.pending is None else ()

    def give_up(self, sim: Simulator, rep: Replica) -> list[Event]:
        """Drop requests whose client stopped waiting for a first token (the server aborts them)."""
        events: list[Event] = []
        heap = self.deadlines
        while heap and heap[0][0] < sim.now:
            deadline, rid = heapq.heappop(heap)
            req = rep.outstanding.get(rid)
            if req is not None and req.outcome.first_token_ns is None:
                self.engine.abort(rid)
                req.outcome.fail(State.TIMEOUT, "timed out waiting for the first token", deadline)
                events.extend(sim.finish(req, deadline))
        return events

    def abort(self, req: SimRequest) -> None:
        self.engine.abort(req.rid)

    def settle(self, rep: Replica, now: int) -> None:
        pass  # a step's time is counted when it starts

    def reset(self, rep: Replica, now: int) -> None:
        if self.pending is not None:
            self.pending.cancelled = True
            self.pending = None
        self.engine = Engine(self.profile, prefix_caching=self.prefix_caching)
        self.deadlines = []

    def _start(self, rep: Replica, now: int) -> Iterable[Event]:
        results, total = step_batch(self.engine, self.coalesce)
        if not results:
            self.pending = None
            return ()
        span = round(total * SECOND)
        rep.busy_ns += span
        self.pending = Call(now + span, Rank.STEP_END, _step_end, rep, self, results)
        return (self.pending,)


def _admit(sim: Simulator, rep: Replica, req: SimRequest) -> Iterable[Event]:
    """The front end is done with ``req``: it joins the engine, unless it is gone meanwhile (a crash)."""
    if req.done or req.replica is not rep:
        return ()
    return rep.backend.submit(rep, req, sim.now)


def _step_end(sim: Simulator, rep: Replica, backend: EngineBackend, results: list) -> Iterable[Event]:
    """Deliver the batch's tokens and finishes, drop timed-out requests, start the next batch.

    ``pending`` stays set until the next batch starts: a request the queue sends here while
    finishes are handed out joins that batch (it must not start a second one of its own).
    """
    now, held = sim.now, rep.outstanding
    events: list[Event] = []
    for result in results:
        for rid in result.emitted:
            req = held.get(rid)
            if req is not None and not req.token(now):
                backend.abort(req)
                end = req.outcome.end_ns
                assert end is not None  # token() failed it: it has ended
                events.extend(sim.finish(req, end))
        for rid in result.finished:
            req = held.get(rid)
            if req is not None:
                events.extend(sim.finish(req, now))
    events.extend(backend.give_up(sim, rep))
    if backend.pending is sim.current:  # not reset meanwhile (a drained replica stops)
        backend.pending = None
        events.extend(backend._start(rep, now))
    return events


class ServiceBackend:
    """``servers`` parallel servers, service times drawn from a distribution in blocks."""

    def __init__(self, dist, servers: int, rng: np.random.Generator, per_token: bool = False) -> None:
        self.dist, self.servers, self.rng, self.per_token = dist, servers, rng, per_token
        self._draws: list[float] = []
        self.busy: set[Event] = set()

    waiting = 0

    def submit(self, rep: Replica, req: SimRequest, now: int) -> Iterable[Event]:
        if not self._draws:
            self._draws = self.dist.sample(self.rng, 4096).tolist()[::-1]
        span = round(self._draws.pop() * (req.output_tokens if self.per_token else 1) * SECOND)
        rep.busy_ns += span // self.servers
        event = Call(now + span, Rank.STEP_END, _served, rep, req)
        self.busy.add(event)
        return (event,)

    def abort(self, req: SimRequest) -> None:
        pass

    def settle(self, rep: Replica, now: int) -> None:
        pass

    def reset(self, rep: Replica, now: int) -> None:
        for event in self.busy:
            event.cancelled = True
        self.busy.clear()


def _served(sim: Simulator, rep: Replica, req: SimRequest) -> Iterable[Event]:
    rep.backend.busy.discard(sim.current)  # type: ignore[attr-defined]  # a ServiceBackend's
    if req.replica is not rep:
        return ()
    return deliver_whole(sim, req)


def deliver_whole(sim: Simulator, req: SimRequest) -> Iterable[Event]:
    """The whole answer in one chunk, now (or the client's timeout, if it came first)."""
    if not req.token(sim.now, 1):
        end = req.outcome.end_ns
        assert end is not None  # token() failed it: it has ended
        return sim.finish(req, end)
    req.tokens = req.output_tokens  # one chunk holds the whole answer
    return sim.finish(req, sim.now)
