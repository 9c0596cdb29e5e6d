"""The engine in a replica a run of steps at a time, on the engine's ``run``/``plan``/``advance`` API.

``EngineBackend`` (``replica.py``) asks the engine for one step per event, as the embedded
server's driver does. This backend asks for a *run*: ``Engine.plan`` when the next steps
are pure decode (a request finishing only shrinks the batch), else ``Engine.run`` (the
next step taken, admissions and all, then the decode steps after it), each step as long as
``EngineProfile.step_time`` says. A plan ends at the first step where a request finishes.
One event is scheduled, at the end of the run's last step (or of a first step where some
finish), and the records come out identical (``tests/sim/test_fast_path.py``):

- A request arriving during the run joins the step after the one under way, as it would
  join the next ``step()``: the run is cut there (``Engine.advance`` takes the steps started
  so far) and its end event moves to the end of that step.
- A run is also cut at the first step end where a client gives up: a first token later than
  ``timeouts.first_token`` (or still waiting past it), a token later than ``timeouts.total``.
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
from itertools import accumulate
from typing import TYPE_CHECKING, TypeGuard

from surgelab.engine import Engine, EngineProfile, EngineRequest
from surgelab.engine.request import Run
from surgelab.metrics.record import State
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.request import SECOND, SimRequest

if TYPE_CHECKING:
    from surgelab.sim.replica import Replica
    from surgelab.sim.simulator import Simulator

__all__ = ["FastEngineBackend", "fast_eligible"]

_MIN_RUN, _MAX_RUN = 2, 512  # steps planned ahead, adapted to how often requests arrive
_NS_PER_S = float(SECOND)  # d * 1e9 is d * SECOND, bit for bit
_FIRST_TOKEN = "timed out waiting for the first token"
_TOTAL = "timed out before the response ended"


def fast_eligible(profile: EngineProfile, coalesce_s: float) -> bool:
    """Whether every step of ``profile`` lasts at least ``coalesce_s`` (so none is coalesced)."""
    return profile.step_overhead_s + profile.decode_base_s >= coalesce_s


class FastEngineBackend:
    def __init__(self, profile: EngineProfile, prefix_caching: bool, coalesce_s: float) -> None:
        self.profile, self.prefix_caching = profile, prefix_caching
        self.pending: Event | None = None
        self.chunk = 8  # steps to plan ahead: arrivals cut a plan, so about as many as come between two
        self.front_ns = round(profile.request_overhead_s * SECOND)  # Replica.arrive delays submit by it
        self._clear()

    def _clear(self) -> None:
        self.engine = Engine(self.profile, prefix_caching=self.prefix_caching)
        self.arrivals = self.marked = 0  # arrivals since the engine's step ``marked``
        self.log = array("q")  # delivery time of every step taken, by step index
        self.run: Run | None = None
        self.ends: list[int] = []  # end time of each step of the run
        self.take = 0  # steps of the run that happen (the rest are cut)
        self.planned = False  # the engine waits for advance()
        self.logged = 0  # steps of the run in the log
        self.counted = 0  # steps of the run in the replica's busy time
        self.at = 0  # the step of the run whose end the pending event is
        self.inside = -1  # the step of the run whose end is being handled, or -1
        self.points: list[tuple[int, tuple[str, ...]]] = []  # finishes still to hand out: (step of the run, ids)
        self.fresh: list[SimRequest] = []  # first tokens ever, at the run's first step
        self.first_deadlines: list[tuple[int, str]] = []  # requests waiting for their first token
        self.total_deadlines: list[tuple[int, str]] = []  # requests with a stretch of tokens under way

    @property
    def waiting(self) -> int:
        return self.engine.num_waiting

    def check(self, req: SimRequest) -> None:
        """RequestRejected if the engine could never serve ``req``."""
        self.engine.check(EngineRequest(req.rid, req.spec.prompt_tokens, req.output_tokens, req.hashes))

    def submit(self, rep: Replica, req: SimRequest, now: int) -> Iterable[Event]:
        request = EngineRequest(req.rid, req.spec.prompt_tokens, req.output_tokens, req.hashes)
        engine = self.engine
        events: tuple[Event, ...] = ()
        if self.planned:  # the run ends with the step under way, or the one whose end is being handled
            engine.check(request)  # RequestRejected before anything changes
            take = self.take
            j = self.inside if self.inside >= 0 else bisect_right(self.ends, now, 0, take)
            if j < take - 1:
                self.take = take = j + 1
                if self.inside < 0 and self.at != j:
                    assert self.pending is not None
                    self.pending.cancelled = True
                    events = (self._arm(rep, j),)
            engine.advance(take - self.run.taken)  # type: ignore[union-attr]
            self.planned = False
        engine.add(request)
        sent = req.outcome.sent_ns
        assert sent is not None  # a request the engine sees was sent
        heapq.heappush(self.first_deadlines, (sent + req.first_token_deadline, req.rid))
        self.arrivals += 1
        if self.arrivals == 64:  # plan about half again as many steps as come between two arrivals
            self.chunk = min(max(3 * engine.steps - 3 * self.marked, 2 * 64 * _MIN_RUN) // (2 * 64), _MAX_RUN)
            self.arrivals, self.marked = 0, engine.steps
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
            self._log(bisect_right(self.ends, now, 0, self.take))
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
        run = (not engine.num_waiting and engine.plan(self.chunk)) or engine.run(self.chunk)
        held, start, fresh = rep.outstanding, run.start, []
        if run.started:
            for rid in run.stopped:
                self._close(held[rid], start)
            heap = self.total_deadlines
            for rid, place in run.started.items():
                req = held[rid]
                req.stretch, req.place = start, place
                out = req.outcome
                if out.first_token_ns is None:
                    fresh.append(req)
                sent = out.sent_ns
                assert sent is not None
                heapq.heappush(heap, (sent + req.total_deadline, rid))
        elif run.stopped:
            for rid in run.stopped:
                self._close(held[rid], start)
        ends = list(accumulate(map(round, map(_NS_PER_S.__mul__, run.durations)), initial=now))
        del ends[0]  # the end of each step on the run clock, rounded to the ns as EngineBackend does
        self.run, self.ends, self.fresh, self.logged, self.counted = run, ends, fresh, 0, 1
        self.planned = planned = run.planned > 0
        self.take = take = self._cut(held, ends, fresh) if planned else 1
        # in step order, a list; the run is this backend's alone
        points: list[tuple[int, tuple[str, ...]]] = run.finished  # type: ignore[assignment]
        if points and points[-1][0] >= take:
            points = [p for p in points if p[0] < take]
        self.points = points
        rep.busy_ns += ends[0] - now
        return (self._arm(rep, points[0][0] if points else take - 1),)

    def _arm(self, rep: Replica, at: int) -> Event:
        self.at = at
        self.pending = Call(self.ends[at], Rank.STEP_END, _step_end, rep, self)
        return self.pending

    def _cut(self, held: dict[str, SimRequest], ends: list[int], fresh: list[SimRequest]) -> int:
        """Steps of the run to take: up to the first step end where a client gives up."""
        take = len(ends)
        last = ends[-1]
        heap = self.first_deadlines  # still no first token: dropped at the first step end past the deadline
        if heap and heap[0][0] < last:
            while heap and _has_first_token(held.get(heap[0][1])):
                heapq.heappop(heap)
            if heap:
                take = min(take, bisect_right(ends, heap[0][0]) + 1)
        heap = self.total_deadlines  # producing tokens: failed by the first token past the deadline
        if heap and heap[0][0] < last:
            while heap and not _streaming(held.get(heap[0][1])):
                heapq.heappop(heap)
            if heap:
                j = bisect_right(ends, heap[0][0])
                if j == 0 and held[heap[0][1]] in fresh:  # a first token is judged by first_token alone
                    early = [held[rid] for d, rid in heap if d < ends[0] and _streaming(held.get(rid))]
                    j = 0 if any(r not in fresh for r in early) else 1
                take = min(take, j + 1)
        for req in fresh:
            sent = req.outcome.sent_ns
            assert sent is not None
            if ends[0] - sent > req.first_token_deadline:
                return 1
        return take

    def _log(self, steps: int) -> None:
        """The delivery times of the run's first ``steps`` steps are in the log."""
        if steps > self.logged:
            self.log.extend(self.ends[self.logged : steps])
            self.logged = steps

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

    def _finish(self, sim: Simulator, held: dict[str, SimRequest], ids: tuple[str, ...], step: int) -> list[Event]:
        events: list[Event] = []
        for rid in ids:
            req = held.get(rid)
            if req is not None:
                self._close(req, step + 1)
                events.extend(sim.finish(req, sim.now))
        return events


def _has_first_token(req: SimRequest | None) -> bool:
    return req is None or req.outcome.first_token_ns is not None or req.stretch >= 0


def _streaming(req: SimRequest | None) -> TypeGuard[SimRequest]:
    return req is not None and req.stretch >= 0


def _step_end(sim: Simulator, rep: Replica, be: FastEngineBackend) -> Iterable[Event]:
    """A step of the run ends where requests finish, or the run's last step ends."""
    at, run = be.at, be.run
    assert run is not None
    if at == be.take - 1:
        return _run_end(sim, rep, be, run)
    be._log(at + 1)  # requests finish inside the run: hand them out, carry on
    be.inside = at
    events = be._finish(sim, rep.outstanding, be.points.pop(0)[1], run.start + at)
    be.inside = -1
    if be.run is not run:  # the replica stopped meanwhile (drained)
        return events
    if be.take - 1 == at:  # a request sent here meanwhile joins the next step: the run ends here
        events.extend(_run_end(sim, rep, be, run))
    else:
        events.append(be._arm(rep, be.points[0][0] if be.points and be.points[0][0] < be.take - 1 else be.take - 1))
    return events


def _run_end(sim: Simulator, rep: Replica, be: FastEngineBackend, run: Run) -> list[Event]:
    """The run's last step ends: what ``EngineBackend``'s step end does for that step.

    In the same order: tokens past a client's deadline (in batch order), finished requests,
    requests that gave up waiting for a first token; then the next run.
    """
    now, held, take = sim.now, rep.outstanding, be.take
    if be.planned:
        be.engine.advance(take - run.taken)
        be.planned = False
    be._log(take)
    if take > be.counted:  # busy time: every step has started
        rep.busy_ns += be.ends[take - 1] - be.ends[be.counted - 1]
        be.counted = take
    last = run.start + take - 1
    events: list[Event] = []
    heap = be.total_deadlines
    if (heap and heap[0][0] < now) or (take == 1 and be.fresh):
        events = _late(sim, be, held, run, last, now)
        if be.run is not run:  # the replica stopped meanwhile (drained)
            return events
    if be.fresh:
        first = be.log[run.start]
        for req in be.fresh:
            if not req.done and req.outcome.first_token_ns is None:
                req.outcome.first_token_ns = first
    if be.points and be.points[0][0] == take - 1:
        events.extend(be._finish(sim, held, be.points.pop(0)[1], last))
        if be.run is not run:
            return events
    heap = be.first_deadlines
    while heap and heap[0][0] < now:
        deadline, rid = heapq.heappop(heap)
        waiter = held.get(rid)
        if waiter is not None and waiter.outcome.first_token_ns is None:
            be.engine.abort(rid)
            waiter.outcome.fail(State.TIMEOUT, _FIRST_TOKEN, deadline)
            events.extend(sim.finish(waiter, deadline))
    if be.run is run:
        be.pending = None
        events.extend(be._start(rep, now))
    return events


def _late(
    sim: Simulator, be: FastEngineBackend, held: dict[str, SimRequest], run: Run, last: int, now: int
) -> list[Event]:
    """Tokens of the last step past their client's deadline: those requests time out, in batch order."""
    late: list[tuple[int, SimRequest, str, int]] = []
    if last == run.start:
        for req in be.fresh:
            sent = req.outcome.sent_ns
            assert sent is not None
            if now - sent > req.first_token_deadline:
                late.append((req.place, req, _FIRST_TOKEN, sent + req.first_token_deadline))
    heap, kept = be.total_deadlines, []
    while heap and heap[0][0] < now:
        entry = heapq.heappop(heap)
        streaming = held.get(entry[1])
        if not _streaming(streaming):
            continue
        if streaming.outcome.first_token_ns is None and streaming.stretch == last:
            kept.append(entry)  # its first token, judged by first_token alone
            continue
        late.append((streaming.place, streaming, _TOTAL, entry[0]))
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
    return events
