"""The discrete-event simulator: one heap, one clock, events that return their follow-ups.

The heap key is ``(time_ns, rank, seq)`` (see ``surgelab.sim.events``). Request flow, in
the order a request meets it: the response cache → the router → a replica, or the
admission queue when no replica can take it (bounded, timed out, by tier priority) → the
replica's engine → ``finish``, which records the outcome, frees capacity, lets the traffic
source carry on, and serves the queue.
"""

from __future__ import annotations

import gc
import heapq
import itertools
from array import array
from collections.abc import Iterable

from surgelab.engine import RequestRejected
from surgelab.metrics.record import State
from surgelab.scenario.model import Scenario
from surgelab.sim.admission import AdmissionQueue
from surgelab.sim.affinity import SessionAffinity
from surgelab.sim.cache import ResponseCache, prompt_key
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.fleet import Fleet
from surgelab.sim.pool import PoolRuntime, crash
from surgelab.sim.prefix import PrefixHasher
from surgelab.sim.regions import RegionRuntime, outage_events
from surgelab.sim.replica import DOWN, DRAINING, READY, Replica
from surgelab.sim.request import SECOND, SimRequest
from surgelab.sim.router import RouterRuntime, health_check, request_ended
from surgelab.sim.stopping import RunOver, SimStops
from surgelab.sim.timeline import Timeline
from surgelab.sim.traffic import Traffic

__all__ = ["Simulator"]

_GC_YOUNG = 50_000  # allocations between young-generation collections while the loop runs (Python: 700)


class StopSimulation(Exception):
    """Raised by whatever records outcomes to end the simulation where it is; the message says why."""


class Simulator:
    def __init__(
        self, scenario: Scenario, fleet: Fleet, record, fast: bool = True, fast_prefix: bool | None = None
    ) -> None:
        self.scenario, self.fleet = scenario, fleet
        self.stopped = ""
        """Why a watcher stopped the simulation early (``StopSimulation``); empty when it ran to the end."""
        self.open: dict[SimRequest, None] = {}
        """Requests sent and not yet ended, in the order they were sent."""
        self.now = 0
        self.current: Event | None = None
        self._heap: list = []
        self._seq = itertools.count()
        self.pools = [PoolRuntime(p, i, fleet.seed, fast) for i, p in enumerate(fleet.pools)]
        self.regions = {r.name: RegionRuntime(r, fleet.seed) for r in fleet.regions}
        for pool in self.pools:
            if pool.cfg.region is not None:
                pool.region = self.regions[pool.cfg.region]
                pool.region.pools.append(pool)
        self.router = RouterRuntime(fleet.router, self.pools)
        self.affinity = SessionAffinity(self.router.pick) if fleet.router.affinity == "session" else None
        self.queue = AdmissionQueue(fleet.admission)
        self.cache = ResponseCache(fleet.cache)
        prefix = fleet.cache.prefix
        fast_prefix = fast if fast_prefix is None else fast_prefix
        # prompt texts are built for the response cache, and for prefix hashes the slow way; else only lengths count
        texts = fleet.cache.exact or (prefix and not fast_prefix)
        self.traffic = Traffic(scenario, texts=texts, synthetic=prefix and fast_prefix)
        self.stops = SimStops(self, self.traffic.plans)
        """The run's stop rules; ``stops.reason`` says why one stopped it (empty: none did)."""
        self.record = self.stops.watching(record)
        self.timeline = Timeline(fleet.timeline_interval)
        self.failures: list[dict] = []
        self.shed = self.lost = self.events_processed = 0
        engines = [p.profile for p in self.pools if p.profile is not None]
        self._hasher = PrefixHasher(engines[0].block_size, reference=not fast_prefix) if prefix and engines else None

    # -- the loop ---------------------------------------------------------------------------

    def push(self, event: Event) -> None:
        heapq.heappush(self._heap, (event.time, event.rank, next(self._seq), event))

    def push_all(self, events: Iterable[Event]) -> None:
        for event in events:
            self.push(event)

    def run(self) -> int:
        """Simulate until nothing is left to happen; return the end time (ns)."""
        self.push_all(self._initial_events())
        heap, pop, push, seq = self._heap, heapq.heappop, heapq.heappush, self._seq
        thresholds = gc.get_threshold()  # the loop makes many short-lived objects and keeps few: collect less often
        gc.set_threshold(max(thresholds[0], _GC_YOUNG), *thresholds[1:])
        try:
            self._loop(heap, pop, push, seq)
        except StopSimulation as stop:  # a watcher has seen enough (``simulate(stop=...)``)
            self.stopped = str(stop)
        except RunOver:  # a stop rule held and what was under way has ended
            pass
        finally:
            gc.set_threshold(*thresholds)
        return self.now if self.stops.reason else max(self.now, self.traffic.end_ns)

    def _loop(self, heap: list, pop, push, seq) -> None:
        """The events, in order, until none is left or a stop ends the run (counted either way)."""
        processed = 0
        try:
            while heap:
                time, _, _, event = pop(heap)
                if event.cancelled:
                    continue
                self.now, self.current = time, event
                processed += 1
                # ``Call.handle``, inlined (one Python call less per event)
                follows = event.fn(self, *event.args) if type(event) is Call else event.handle(self)
                if follows:
                    for follow in follows:
                        push(heap, (follow.time, follow.rank, next(seq), follow))
        finally:
            self.events_processed += processed

    def active(self) -> bool:
        """Whether anything may still arrive or wait: self-repeating events stop re-arming after."""
        if self.stops.reason:
            return False
        return self.now < self.traffic.end_ns or self.traffic.active or len(self.queue) > 0

    def _initial_events(self) -> list[Event]:
        events = self.traffic.start(self)
        events.extend(self.stops.events())
        for pool in self.pools:
            for _ in range(pool.cfg.replicas):
                events.extend(pool.spawn(self, ready=True))
            for c in pool.cfg.failures.crashes:
                if c.replica < len(pool.replicas):
                    events.append(Call(round(c.at * SECOND), Rank.LIFECYCLE, crash, pool.replicas[c.replica]))
            auto = pool.cfg.autoscale
            if auto is not None:
                events.append(Call(round(auto.sync_period * SECOND), Rank.CONTROL, _sync, pool))
                events.extend(Call(round(s.at * SECOND), Rank.CONTROL, _scheduled, pool, s.min) for s in auto.schedule)
        for region in self.regions.values():
            events.extend(outage_events(region))
        if self.fleet.router.health_check is not None:
            events.append(Call(round(self.fleet.router.health_check.interval * SECOND), Rank.CONTROL, health_check))
        events.append(Call(0, Rank.SAMPLE, self.timeline.sample))
        return events

    # -- request flow -----------------------------------------------------------------------

    def send(self, req: SimRequest) -> Iterable[Event]:
        """A request leaves the client now: cache, router, then a replica or the queue."""
        now = self.now
        self.open[req] = None
        for pool in self.pools:
            pool.last_activity = now
        self.timeline.arrivals += 1
        if self.fleet.cache.exact:
            req.cache_key = prompt_key(req.spec)
            if self.cache.lookup(req.cache_key, now):
                self.timeline.cache_hits += 1
                at = now + self.cache.hit_ns
                req.outcome.first_byte_ns = now
                req.token(at, 1)
                req.tokens = req.output_tokens
                return self.finish(req, at)
        if self._hasher is not None:
            req.hashes = self._hasher.hashes(req.spec, req.made)
        req.priority = self.queue.priority_of(req.meta.tier)
        rep = self._route(req) if not self.queue.depth else None
        if rep is not None:
            return self._deliver(req, rep)
        events: list[Event] = [e for pool in self.pools for e in pool.wake(self)]
        shed = self.queue.push(req)
        if shed is not None:
            events.extend(self._shed(shed, f"admission queue full ({self.fleet.admission.max_depth})"))
        if shed is not req and self.queue.timeout_ns is not None:
            events.append(Call(now + self.queue.timeout_ns, Rank.TIMEOUT, _queue_timeout, req))
        if shed is not req:
            events.extend(self.dispatch())
        return events

    def _route(self, req: SimRequest | None) -> Replica | None:
        """The replica the router sends ``req`` to: the policy's, or its session's (``router.affinity``)."""
        if self.affinity is None or req is None:
            return self.router.pick()
        return self.affinity.pick(req)

    def _deliver(self, req: SimRequest, rep: Replica) -> Iterable[Event]:
        region = rep.pool.region  # type: ignore[attr-defined]
        if region is not None and region.delayed:
            return self._send_over(req, rep, region)
        if rep.state == DOWN:
            return self.refused(req, rep)
        try:
            return rep.submit(req, self.now)
        except RequestRejected as exc:
            return self.rejected(req, rep, exc)

    def refused(self, req: SimRequest, rep: Replica) -> Iterable[Event]:
        """A request that meets its replica down: lost, and counted against the crash that took it."""
        if rep.crash is not None:
            rep.crash["lost_routed"] += 1
        req.outcome.fail(State.CONNECTION_ERROR, f"connection refused: replica {rep.name} is down", self.now)
        self.lost += 1
        if rep.health is not None and req.replica is None:  # not held there: finish does not see it
            request_ended(self, rep, False, req.outcome.sent_ns)
        return self.finish(req, self.now)

    def rejected(self, req: SimRequest, rep: Replica, exc: RequestRejected) -> Iterable[Event]:
        """A request its engine can never serve: a 400, as a server says context_length_exceeded."""
        rep.release(req)
        req.outcome.http_status = 400
        req.outcome.fail(State.HTTP_ERROR, f"context_length_exceeded: {exc}", self.now)
        return self.finish(req, self.now)

    def _send_over(self, req: SimRequest, rep: Replica, region: RegionRuntime) -> Iterable[Event]:
        """To a replica across the network: it gets there after the way out; its answer comes back later."""
        there, back = region.delays(req.rid)
        req.back = back
        # the client's deadlines, on the replica's clock: what comes back later than this is too late
        req.first_token_deadline -= back
        req.total_deadline -= back
        if rep.state != DOWN:
            rep.reserve(req)
        return (Call(self.now + there, Rank.ARRIVAL, _arrive, rep, req),)

    def dispatch(self) -> Iterable[Event]:
        """Serve the admission queue while the router finds replicas with room."""
        events: list[Event] = []
        while len(self.queue):
            rep = self._route(self.queue.peek()) if self.affinity is not None else self.router.pick()
            if rep is None:
                break
            req = self.queue.pop()
            out = req.outcome
            sent = out.sent_ns
            assert sent is not None  # a queued request was sent
            if self.now - sent > req.first_token_deadline:  # its client has given up meanwhile
                gave_up = sent + req.first_token_deadline
                out.fail(State.TIMEOUT, "timed out waiting for the first token", gave_up)
                events.extend(self.finish(req, gave_up))
                continue
            events.extend(self._deliver(req, rep))
        return events

    def finish(self, req: SimRequest, end: int) -> Iterable[Event]:
        if req.done:
            return ()
        req.done = True
        self.open.pop(req, None)
        rep = req.replica
        out = req.outcome
        if req.back:  # everything the replica did reaches the client the way back later
            end = _shift(out, req.back, end)
        if out.state is State.OK:
            req.succeed(end)
            if req.cache_key is not None:
                self.cache.store(req.cache_key, end, req.spec.prompt_tokens + req.tokens)
        self.record(req.meta, out)
        events = list(self.traffic.done(self, req))
        self.stops.over_if_idle()
        if rep is not None:
            if rep.health is not None:
                request_ended(self, rep, out.state is State.OK, out.sent_ns)
            rep.release(req)
            pool: PoolRuntime = rep.pool  # type: ignore[assignment]
            pool.last_activity = max(pool.last_activity, self.now)
            if out.state is State.OK:
                pool.latencies.append((end - req.intended) / SECOND)
            if rep.state == DRAINING and not rep.outstanding:
                pool.stop(self, rep)
            if self.queue.depth:
                events.extend(self.dispatch())
        return events

    def lose(self, req: SimRequest, why: str) -> Iterable[Event]:
        req.outcome.fail(State.CONNECTION_ERROR, why, self.now)
        self.lost += 1
        return self.finish(req, self.now)

    def _shed(self, req: SimRequest, why: str) -> Iterable[Event]:
        self.shed += 1
        self.timeline.shed += 1
        req.outcome.http_status = self.fleet.admission.shed_status
        req.outcome.first_byte_ns = self.now
        req.outcome.fail(State.HTTP_ERROR, f"shed: {why}", self.now)
        return self.finish(req, self.now)


def _shift(out, back: int, end: int) -> int:
    if out.first_byte_ns is not None:
        out.first_byte_ns += back
    if out.first_token_ns is not None:
        out.first_token_ns += back
    if len(out.token_ns):
        out.token_ns = array("q", [t + back for t in out.token_ns])
    if out.end_ns is not None and out.state is not State.OK:
        out.end_ns += back
    return end + back


def _arrive(sim: Simulator, rep: Replica, req: SimRequest) -> Iterable[Event]:
    """A request reaches its replica across the network."""
    if req.done:  # lost on the way (its replica crashed meanwhile)
        return ()
    if req.replica is not rep or rep.state not in (READY, DRAINING):
        if req.replica is rep:
            rep.release(req)
        return sim.refused(req, rep)
    try:
        return rep.arrive(req, sim.now)
    except RequestRejected as exc:
        return sim.rejected(req, rep, exc)


def _queue_timeout(sim: Simulator, req: SimRequest) -> Iterable[Event]:
    if sim.queue.remove(req):
        return sim._shed(req, f"waited longer than the queue timeout ({sim.fleet.admission.timeout:g}s)")
    return ()


def _sync(sim: Simulator, pool: PoolRuntime) -> Iterable[Event]:
    auto = pool.cfg.autoscale
    assert auto is not None
    events = pool.sync(sim, auto.sync_period)
    if sim.active():
        events.append(Call(sim.now + round(auto.sync_period * SECOND), Rank.CONTROL, _sync, pool))
    return events


def _scheduled(sim: Simulator, pool: PoolRuntime, minimum: int) -> Iterable[Event]:
    pool.scheduled_min = minimum
    floor = pool.min_replicas(sim)
    return pool.scale_to(sim, floor) if pool.current < floor else ()
