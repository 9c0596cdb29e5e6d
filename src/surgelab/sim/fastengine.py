"""The engine model, stepped many steps at a time while nothing can contend.

Stepping ``Engine.step()`` costs Python work per running sequence per step; a replica busy
for an hour takes half a million steps. While a replica is *uncontended* the engine's
schedule is known in closed form, and this backend computes whole runs of steps at once
(numpy over the steps, nothing per sequence per step):

- every running sequence decodes one token per step (no chunked prefill pending);
- new requests are all admitted at the next step start with their whole prompt: the
  running count stays within ``max_num_seqs``, decodes plus new prompts within
  ``max_batched_tokens``, and the KV blocks every sequence will ever need
  (``ceil((prompt + output) / block_size)`` each) fit the cache, so nothing is ever
  preempted or blocked;
- no prefix-cache hashes (``cache.prefix`` off), and every step is at least ``coalesce``
  long (so the server would not coalesce steps either).

Then step j of a run carries ``p`` prefill tokens (the prompts admitted at its start, j = 0
only), ``d`` decodes and reads ``r_j = R + n·j`` KV tokens (each sequence's context grows by
one per step), and lasts ``profile.step_time(p, d, r_j)`` — the engine's own formula, with
the same floating-point operations. Steps are computed ahead in chunks whose length adapts
to how often arrivals cut a run short. A run ends at the next step where a sequence finishes
or a client deadline passes; an arrival cuts it after the step under way, as the engine
admits a request at the next step start. Every sequence emits at every step from its
admission to its end, so its token times are a slice of the replica's log of step ends.

When a step start does not meet the conditions, the running sequences are handed to a real
``Engine`` (its internal sequence state rebuilt exactly) and the replica steps that until it
is idle again. ``tests/sim/test_fastengine.py`` checks both paths give identical records.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from typing import TYPE_CHECKING

from surgelab.engine import Engine, EngineProfile, EngineRequest
from surgelab.engine.core import _Sequence
from surgelab.metrics.record import State
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.replica import EngineBackend, Replica
from surgelab.sim.request import SimRequest

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["FastEngineBackend", "fast_eligible"]

_MIN_RUN, _MAX_RUN = 2, 512  # steps computed ahead, adapted to how often arrivals cut a run


def fast_eligible(profile: EngineProfile, coalesce_s: float) -> bool:
    return profile.step_overhead_s + profile.decode_base_s >= coalesce_s


class _Seq:
    __slots__ = ("req", "prompt", "output", "admit", "foot")

    def __init__(self, req: SimRequest, admit: int, foot: int) -> None:
        self.req, self.prompt, self.output, self.admit, self.foot = (
            req,
            req.spec.prompt_tokens,
            req.output_tokens,
            admit,
            foot,
        )


class _Run:
    __slots__ = ("t0", "ends", "k", "n", "new")

    def __init__(self, t0: int, ends: list[int], k: int, n: int, new: list[_Seq]) -> None:
        self.t0, self.ends, self.k, self.n, self.new = t0, ends, k, n, new


class FastEngineBackend:
    def __init__(self, profile: EngineProfile, coalesce_s: float) -> None:
        self.profile = profile
        self.slow = EngineBackend(profile, True, coalesce_s)
        self.checker = Engine(profile)
        self.block = profile.block_size
        self._max_seqs, self._max_tokens, self._kv_blocks = (
            profile.max_num_seqs,
            profile.max_batched_tokens,
            profile.kv_blocks,
        )
        self._max_len = profile.max_model_len
        self._s_kv, self._base = profile.s_per_kv_token, profile.decode_base_s
        self._prefill, self._overhead = profile.prefill_s_per_token, profile.step_overhead_s
        self.fast = True
        self.chunk = 8
        self.full = False
        self._clear()

    def _clear(self) -> None:
        self.running: dict[str, _Seq] = {}  # admission order
        self.new: list[SimRequest] = []
        self.footprint = self.r_total = 0
        self.finishes: list[tuple[int, int, str]] = []  # (finish step, admission order, rid)
        self._order = 0
        self.deadlines: list[tuple[int, str]] = []
        self.log = array("q")  # end time of every fast step, by step index
        self.pending: Event | None = None
        self.run: _Run | None = None

    @property
    def waiting(self) -> int:
        return len(self.new) if self.fast else self.slow.waiting

    def abort(self, req: SimRequest) -> None:
        self.slow.abort(req)

    def reset(self) -> None:
        if self.pending is not None:
            self.pending.cancelled = True
        self.slow.reset()
        self.fast = True
        self._clear()

    def submit(self, rep: Replica, req: SimRequest, now: int) -> Iterable[Event]:
        if not self.fast and not self.slow.engine.has_work and self.slow.pending is None:
            self.fast = True  # idle again: back to runs
        if not self.fast:
            return self.slow.submit(rep, req, now)
        total = req.spec.prompt_tokens + req.output_tokens
        if (
            total > self._max_len
            or -(-total // self.block) > self._kv_blocks
            or min(req.spec.prompt_tokens, req.output_tokens) < 1
        ):
            self.checker.check(
                EngineRequest(req.rid, req.spec.prompt_tokens, req.output_tokens)
            )  # raises RequestRejected
        self.new.append(req)
        run = self.run
        if run is None:
            return self._start(rep, now)
        j = bisect_right(run.ends, now, 0, run.k)  # the step under way
        if j >= run.k - 1:
            return ()
        run.k = j + 1
        self.chunk = max(self.chunk // 2, _MIN_RUN)  # arrivals come often here: compute less ahead
        assert self.pending is not None
        self.pending.cancelled = True
        self.pending = Call(run.ends[j], Rank.STEP_END, _fast_step_end, rep)
        return (self.pending,)

    # -- runs -------------------------------------------------------------------------------

    def _start(self, rep: Replica, now: int) -> Iterable[Event]:
        self.run = self.pending = None
        new, running = self.new, self.running
        if not running and not new:
            return ()
        step, d0, prompts = len(self.log), len(running), 0
        admitted: list[_Seq] = []
        if new:
            block, foot = self.block, 0
            for req in new:
                prompts += req.spec.prompt_tokens
                foot += -(-(req.spec.prompt_tokens + req.output_tokens) // block)
            if (
                d0 + len(new) > self._max_seqs
                or d0 + prompts > self._max_tokens
                or self.footprint + foot > self._kv_blocks
            ):
                self._to_engine()
                return self.slow._start(rep, now)
            for req in new:
                seq = _Seq(req, step, -(-(req.spec.prompt_tokens + req.output_tokens) // block))
                running[req.rid] = seq
                admitted.append(seq)
                self._order += 1
                heapq.heappush(self.finishes, (step + seq.output - 1, self._order, req.rid))
                heapq.heappush(self.deadlines, (req.outcome.sent_ns + req.total_deadline, req.rid))
            self.footprint += foot
            self.r_total += prompts
            self.new = []
        n = len(running)
        k = min(self._next_finish() - step + 1, self.chunk)
        self.full = k == self.chunk  # a run cut by the chunk, not by a finish: the next may be longer
        # step j reads R + n·j KV tokens: EngineProfile.step_time's own operations, in Python floats
        overhead, base, s_kv, r = self._overhead, self._base, self._s_kv, self.r_total
        compute = self._prefill * (prompts + d0)
        deadline = self._next_deadline() if self.deadlines else 1 << 62
        ends, t = [], now
        for j in range(k):
            memory = base + s_kv * r
            t += round((overhead + (memory if memory >= compute else compute)) * 1_000_000_000)  # max()
            ends.append(t)
            if j == 0:
                compute = self._prefill * n
                for seq in admitted:
                    if t - seq.req.outcome.sent_ns > seq.req.first_token_deadline:
                        deadline = 0  # someone gives up at its first token: the batch changes after this step
            if t > deadline:
                break
            r += n
        self.run = _Run(now, ends, len(ends), n, admitted)
        self.pending = Call(t, Rank.STEP_END, _fast_step_end, rep)
        return (self.pending,)

    def _next_finish(self) -> int:
        step = self._next_finish_or_none()
        assert step is not None
        return step

    def _next_finish_or_none(self) -> int | None:
        heap = self.finishes
        while heap and heap[0][2] not in self.running:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _next_deadline(self) -> int:
        heap = self.deadlines
        while heap and heap[0][1] not in self.running:
            heapq.heappop(heap)
        return heap[0][0] if heap else 1 << 62

    def _remove(self, seq: _Seq) -> None:
        del self.running[seq.req.rid]
        self.footprint -= seq.foot
        self.r_total -= seq.prompt + len(self.log) - seq.admit

    def _tokens(self, seq: _Seq, upto: int) -> None:
        """Give the request its token times: steps from its admission up to ``upto`` (exclusive)."""
        out = seq.req.outcome
        out.token_ns = self.log[seq.admit : upto]
        if len(out.token_ns):
            out.first_token_ns = out.token_ns[0]
        seq.req.tokens = len(out.token_ns)

    def _to_engine(self) -> None:
        """Hand the running sequences and the new requests to a real engine, state for state."""
        engine = Engine(self.profile)
        step = len(self.log)
        for seq in self.running.values():
            generated = step - seq.admit
            s = _Sequence(EngineRequest(seq.req.rid, seq.prompt, seq.output))
            s.computed, s.generated, s.published = seq.prompt + generated - 1, generated, True
            ok = engine.kv.grow(s.alloc, s.computed)
            assert ok, "an uncontended run cannot overflow the KV cache"
            engine._running.append(s)
            engine._ids.add(seq.req.rid)
            self._tokens(seq, step)
        for req in self.new:
            engine.add(EngineRequest(req.rid, req.spec.prompt_tokens, req.output_tokens))
            heapq.heappush(self.slow.deadlines, (req.outcome.sent_ns + req.first_token_deadline, req.rid))
        self.slow.engine, self.fast = engine, False
        self._clear()


def _fast_step_end(sim: Simulator, rep: Replica) -> Iterable[Event]:
    be: FastEngineBackend = rep.backend  # type: ignore[assignment]
    run = be.run
    assert run is not None
    now, k = sim.now, run.k
    be.log.extend(run.ends[:k] if k < len(run.ends) else run.ends)
    be.r_total += run.n * k
    rep.busy_ns += now - run.t0
    last = len(be.log) - 1
    events: list[Event] = []
    for seq in run.new:  # first-token deadline, judged at the end of the admission step
        out = seq.req.outcome
        if seq.req.rid in be.running and be.log[seq.admit] - out.sent_ns > seq.req.first_token_deadline:
            be._remove(seq)
            out.fail(State.TIMEOUT, "timed out waiting for the first token", out.sent_ns + seq.req.first_token_deadline)
            events.extend(sim.finish(seq.req, out.end_ns))
    while be.deadlines and be._next_deadline() < be.log[last]:
        _, rid = heapq.heappop(be.deadlines)
        seq = be.running[rid]
        out = seq.req.outcome
        limit = out.sent_ns + seq.req.total_deadline
        upto = seq.admit
        while upto <= last and be.log[upto] <= limit:
            upto += 1
        be._tokens(seq, upto)
        be._remove(seq)
        out.fail(State.TIMEOUT, "timed out before the response ended", limit)
        events.extend(sim.finish(seq.req, limit))
    while be.finishes and be._next_finish_or_none() == last:
        _, _, rid = heapq.heappop(be.finishes)
        seq = be.running[rid]
        be._tokens(seq, last + 1)
        be._remove(seq)
        events.extend(sim.finish(seq.req, now))
    if be.full and k == len(run.ends):
        be.chunk = min(be.chunk * 2, _MAX_RUN)
    events.extend(be._start(rep, now))
    return events
