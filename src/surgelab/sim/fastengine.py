"""The engine in a replica a run of steps at a time, on the engine's ``run``/``advance`` API.

``EngineBackend`` (``replica.py``) asks the engine for one step per event, as the embedded
server's driver does. This backend asks for a *run* (``Engine.run``): the next step, plus
the steps after it during which every running request just decodes, each as long as
``EngineProfile.step_time`` says. One event is scheduled, at the end of the run's last step,
and the records come out identical (``tests/sim/test_fast_path.py``):

- A request arriving during the run joins the step after the one under way, as it would
  join the next ``step()``: the run is cut there (``Engine.advance`` takes the steps started
  so far) and its end event moves to the end of that step.
- A run is also cut at the first step end where a client gives up: a first token later than
  ``timeouts.first_token`` (or still waiting past it), a token later than ``timeouts.total``.
  The engine ends runs itself where a request finishes or the batch could change.
- Tokens come in stretches, one per step (``Run.started``/``stopped``/``finished``): the
  replica keeps the delivery time of every step (``log``), and a request's token times are
  slices of it, taken when its stretch ends.
- Busy time counts a step whole from its start, as ``EngineBackend`` does: ``settle`` brings
  it up to date whenever the autoscaler or the timeline looks.

Steps shorter than ``coalesce`` are delivered in batches by ``EngineBackend``; this backend
serves profiles whose every step is at least that long (``fast_eligible``).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from typing import TYPE_CHECKING

from surgelab.engine import Engine, EngineProfile, EngineRequest
from surgelab.engine.request import Run
from surgelab.metrics.record import State
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.request import SECOND, SimRequest

if TYPE_CHECKING:
    from surgelab.sim.replica import Replica
    from surgelab.sim.simulator import Simulator

__all__ = ["FastEngineBackend", "fast_eligible"]

_MIN_RUN, _MAX_RUN = 2, 512  # steps planned ahead, adapted to how often arrivals cut a run
_FIRST_TOKEN = "timed out waiting for the first token"
_TOTAL = "timed out before the response ended"


def fast_eligible(profile: EngineProfile, coalesce_s: float) -> bool:
    """Whether every step of ``profile`` lasts at least ``coalesce_s`` (so none is coalesced)."""
    return profile.step_overhead_s + profile.decode_base_s >= coalesce_s


class FastEngineBackend:
    def __init__(self, profile: EngineProfile, prefix_caching: bool, coalesce_s: float) -> None:
        self.profile, self.prefix_caching = profile, prefix_caching
        self.pending: Event | None = None
        self.chunk = 8
        self._clear()

    def _clear(self) -> None:
        self.engine = Engine(self.profile, prefix_caching=self.prefix_caching)
        self.log = array("q")  # delivery time of every step taken, by step index
        self.run: Run | None = None
        self.ends: list[int] = []  # end time of each step of the run
        self.take = 0  # steps of the run that happen (the rest are cut)
        self.planned = False  # the engine waits for advance()
        self.counted = 0  # steps of the run in the replica's busy time
        self.fresh: list[SimRequest] = []  # first tokens ever, at the run's first step
        self.first_deadlines: list[tuple[int, str]] = []  # requests waiting for their first token
        self.total_deadlines: list[tuple[int, str]] = []  # requests with a stretch of tokens under way

    @property
    def waiting(self) -> int:
        return self.engine.num_waiting

    def submit(self, rep: Replica, req: SimRequest, now: int) -> Iterable[Event]:
        request = EngineRequest(req.rid, req.spec.prompt_tokens, req.output_tokens, req.hashes)
        self.engine.check(request)  # RequestRejected before anything changes
        events: tuple[Event, ...] = ()
        if self.planned:  # the step under way is the run's last now
            j = bisect_right(self.ends, now, 0, self.take)
            if j < self.take - 1:
                self.take = j + 1
                self.chunk = max(self.chunk // 2, _MIN_RUN)  # arrivals come often: plan less ahead
                assert self.pending is not None
                self.pending.cancelled = True
                self.pending = Call(self.ends[j], Rank.STEP_END, _run_end, rep, self)
                events = (self.pending,)
            self.engine.advance(self.take - 1)
            self.planned = False
        self.engine.add(request)
        heapq.heappush(self.first_deadlines, (req.outcome.sent_ns + req.first_token_deadline, req.rid))
        return self._start(rep, now) if self.pending is None else events

    def abort(self, req: SimRequest) -> None:
        self.engine.abort(req.rid)

    def settle(self, rep: Replica, now: int) -> None:
        """Count the run's steps that have started by ``now`` in the replica's busy time."""
        if self.run is None:
            return
        started = 1 + bisect_right(self.ends, now, 0, self.take - 1)
        if started > self.counted:
            rep.busy_ns += self.ends[started - 1] - self.ends[self.counted - 1]
            self.counted = started

    def reset(self, rep: Replica, now: int) -> None:
        """A crash (or a stop): tokens of the steps ended by ``now`` were delivered, the rest are lost."""
        if self.run is not None:
            self.settle(rep, now)
            self.log.extend(self.ends[: bisect_right(self.ends, now, 0, self.take)])
            for req in rep.outstanding.values():
                if req.stretch >= 0:
                    self._close(req, len(self.log))
        if self.pending is not None:
            self.pending.cancelled = True
            self.pending = None
        self._clear()

    # -- runs -------------------------------------------------------------------------------

    def _start(self, rep: Replica, now: int) -> Iterable[Event]:
        engine = self.engine
        if not engine.has_work:
            self.run, self.pending = None, None
            return ()
        run = engine.run(self.chunk)
        held, start = rep.outstanding, run.start
        for rid in run.stopped:
            self._close(held[rid], start)
        fresh = []
        for rid, place in run.started.items():
            req = held[rid]
            req.stretch, req.place = start, place
            if req.outcome.first_token_ns is None:
                fresh.append(req)
            heapq.heappush(self.total_deadlines, (req.outcome.sent_ns + req.total_deadline, rid))
        ends, t = [], now
        for duration in run.durations:
            t += round(duration * SECOND)
            ends.append(t)
        self.run, self.ends, self.fresh, self.planned = run, ends, fresh, run.planned > 0
        self.take = self._cut(held, ends, fresh) if self.planned else 1
        rep.busy_ns += ends[0] - now
        self.counted = 1
        self.pending = Call(ends[self.take - 1], Rank.STEP_END, _run_end, rep, self)
        return (self.pending,)

    def _cut(self, held: dict[str, SimRequest], ends: list[int], fresh: list[SimRequest]) -> int:
        """Steps of the run to take: up to the first step end where a client gives up."""
        if any(ends[0] - r.outcome.sent_ns > r.first_token_deadline for r in fresh):
            return 1
        take = len(ends)
        heap = self.first_deadlines  # still no first token: dropped at the first step end past the deadline
        while heap and _has_first_token(held.get(heap[0][1])):
            heapq.heappop(heap)
        if heap:
            take = min(take, bisect_right(ends, heap[0][0]) + 1)
        heap = self.total_deadlines  # producing tokens: failed by the first token past the deadline
        while heap and not _streaming(held.get(heap[0][1])):
            heapq.heappop(heap)
        if heap:
            j = bisect_right(ends, heap[0][0])
            if j == 0 and held[heap[0][1]] in fresh:  # a first token is judged by first_token alone
                early = [held[rid] for d, rid in heap if d < ends[0] and _streaming(held.get(rid))]
                j = 0 if any(r not in fresh for r in early) else 1
            take = min(take, j + 1)
        return take

    def _close(self, req: SimRequest, end: int) -> None:
        """End the request's stretch of tokens before step ``end``: its tokens are the log's times."""
        begin, req.stretch = req.stretch, -1
        if end > begin:
            out = req.outcome
            tokens = self.log[begin:end]
            if len(out.token_ns):
                out.token_ns.extend(tokens)
            else:
                out.token_ns = tokens
                if out.first_token_ns is None:
                    out.first_token_ns = tokens[0]
            req.tokens += end - begin


def _has_first_token(req: SimRequest | None) -> bool:
    return req is None or req.outcome.first_token_ns is not None or req.stretch >= 0


def _streaming(req: SimRequest | None) -> bool:
    return req is not None and req.stretch >= 0


def _run_end(sim: Simulator, rep: Replica, be: FastEngineBackend) -> Iterable[Event]:
    """The run's last step ends: what ``EngineBackend``'s step end does for that step.

    In the same order: tokens past a client's deadline (in batch order), finished requests,
    requests that gave up waiting for a first token; then the next run.
    """
    now, held, run, take = sim.now, rep.outstanding, be.run, be.take
    assert run is not None
    if be.planned:
        be.engine.advance(take - 1)
        be.planned = False
    be.log.extend(be.ends[:take])
    be.settle(rep, now)
    last = run.start + take - 1
    late: list[tuple[int, SimRequest, str, int]] = []
    if take == 1:
        for req in be.fresh:
            if now - req.outcome.sent_ns > req.first_token_deadline:
                late.append((req.place, req, _FIRST_TOKEN, req.outcome.sent_ns + req.first_token_deadline))
    heap, kept = be.total_deadlines, []
    while heap and heap[0][0] < now:
        entry = heapq.heappop(heap)
        req = held.get(entry[1])
        if not _streaming(req):
            continue
        if req.outcome.first_token_ns is None and req.stretch == last:
            kept.append(entry)  # its first token, judged by first_token alone
            continue
        late.append((req.place, req, _TOTAL, entry[0]))
    for entry in kept:
        heapq.heappush(heap, entry)
    events: list[Event] = []
    for _, req, why, deadline in sorted(late, key=lambda x: x[0]):
        if req.done:
            continue
        be._close(req, last)
        req.outcome.fail(State.TIMEOUT, why, deadline)
        be.engine.abort(req.rid)
        events.extend(sim.finish(req, deadline))
    if be.run is not run:  # the replica stopped meanwhile (drained)
        return events
    first = be.log[run.start]
    for req in be.fresh:
        if not req.done and req.outcome.first_token_ns is None:
            req.outcome.first_token_ns = first
    if take == len(be.ends):
        if be.chunk == len(be.ends) and not run.finished:
            be.chunk = min(be.chunk * 2, _MAX_RUN)  # a run as long as allowed: allow longer
        for rid in run.finished:
            req = held.get(rid)
            if req is not None:
                be._close(req, last + 1)
                events.extend(sim.finish(req, now))
        if be.run is not run:
            return events
    heap = be.first_deadlines
    while heap and heap[0][0] < now:
        deadline, rid = heapq.heappop(heap)
        req = held.get(rid)
        if req is not None and req.outcome.first_token_ns is None:
            be.engine.abort(rid)
            req.outcome.fail(State.TIMEOUT, _FIRST_TOKEN, deadline)
            events.extend(sim.finish(req, deadline))
    if be.run is run:
        be.pending = None
        events.extend(be._start(rep, now))
    return events
