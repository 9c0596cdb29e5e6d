"""An iteration-level inference engine model, scheduled the way vLLM's V1 scheduler does it.

Each ``step()`` is one forward pass over a batch: running sequences first (each decodes
one token or continues a prefill chunk), then waiting requests admitted first-come
first-served while there are free sequence slots, step-token budget and KV blocks for the
whole prompt. When a running sequence cannot grow its KV cache, the most recently admitted
sequence is preempted (its blocks freed, to be recomputed later) until it can.

The engine never reads a clock or sleeps: ``step()`` returns how long the step takes and
the caller lets that much time pass, in wall time (the server) or virtual time (the
simulator and the tests).

``run()`` and ``advance()`` are the same schedule taken many steps at a time, for callers
that only need to hear about changes (the simulator): ``run()`` takes the next step and
plans the steps after it for as long as every running sequence just decodes and nothing
but the caller can change the batch; ``advance()`` takes as many of them as the caller let
happen. Decoding sequences are kept in aggregate meanwhile (``decoding.py``), so a run
costs work per change in the batch, not per sequence per step. Every step's time is
``EngineProfile.step_time`` of the step's work, and the steps taken are exactly those
``step()`` would take (``tests/engine/test_runs.py``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from surgelab.engine.decoding import DecodeSet
from surgelab.engine.kv import Allocation, KVCache
from surgelab.engine.profile import EngineProfile
from surgelab.engine.request import EngineRequest, Run, StepResult

__all__ = ["Engine", "RequestRejected"]


class RequestRejected(ValueError):
    """A request this engine can never serve (too long for the context or the KV cache)."""


@dataclass(slots=True)
class _Sequence:
    request: EngineRequest
    alloc: Allocation = field(default_factory=Allocation)
    computed: int = 0
    """Tokens whose KV is in the cache (or will be, after the step that computes them)."""
    generated: int = 0
    published: bool = False
    place: int = -1
    """When it joined the running batch (increasing): the batch is scheduled in this order."""
    last: int = -1
    """The step of its latest token."""
    synced: int = -1
    """In the decode set: the step it joined at (its counts are as of then); -1 otherwise."""
    entry: list | None = None

    @property
    def total(self) -> int:
        return self.request.prompt_tokens + self.generated


class Engine:
    """Continuous batching over a KV-cache budget; step it, and let the returned time pass."""

    def __init__(self, profile: EngineProfile, *, prefix_caching: bool = True) -> None:
        errors = profile.validate()
        if errors:
            raise ValueError(f"invalid profile {profile.name!r}: " + "; ".join(errors))
        self.profile = profile
        self.kv = KVCache(profile.kv_blocks, profile.block_size, prefix_caching)
        self._waiting: deque[_Sequence] = deque()
        self._running: dict[str, _Sequence] = {}  # in batch order
        self._known: dict[str, _Sequence] = {}
        self._steps = 0
        self._places = 0
        self._decoding = DecodeSet(profile.block_size)
        self._plan: tuple[int, list[_Sequence]] | None = None  # (planned steps, who finishes at the last)
        self.num_preemptions = 0

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def has_work(self) -> bool:
        return bool(self._running or self._waiting)

    @property
    def steps(self) -> int:
        """Steps taken so far; the next step has this index."""
        return self._steps

    def check(self, request: EngineRequest) -> None:
        """Raise RequestRejected if ``request`` could never complete on this engine."""
        errors = request.validate()
        if errors:
            raise RequestRejected("; ".join(errors))
        total = request.prompt_tokens + request.output_tokens
        if total > self.profile.max_model_len:
            raise RequestRejected(
                f"prompt ({request.prompt_tokens}) + output ({request.output_tokens}) tokens "
                f"exceed the model's context length of {self.profile.max_model_len}"
            )
        if self.kv.blocks_for(total) > self.kv.num_blocks:
            raise RequestRejected(
                f"{total} tokens exceed the KV cache of {self.kv.num_blocks * self.kv.block_size} tokens"
            )

    def add(self, request: EngineRequest) -> None:
        """Queue a request; it is admitted by a later ``step()``."""
        self._no_plan()
        self.check(request)
        if request.request_id in self._known:
            raise RequestRejected(f"duplicate request id {request.request_id!r}")
        seq = _Sequence(request)
        self._known[request.request_id] = seq
        self._waiting.append(seq)

    def abort(self, request_id: str) -> bool:
        """Drop a request wherever it is (e.g. the client went away); True if it was known."""
        self._no_plan()
        seq = self._known.get(request_id)
        if seq is None:
            return False
        if self._running.pop(request_id, None) is not None:
            if seq.synced >= 0:
                self._decoding.leave(seq, self._steps, self.kv)
        else:
            self._waiting.remove(seq)
        self._retire(seq)
        return True

    def step(self) -> StepResult:
        """Run one iteration: schedule, time it, and advance every scheduled sequence."""
        self._no_plan()
        return self._step()[0]

    # -- many steps at a time ---------------------------------------------------------------

    def run(self, max_steps: int = 1) -> Run:
        """Take the next step, as ``step()`` would, and plan up to ``max_steps - 1`` after it.

        Steps are planned while every running sequence decodes and will go on decoding: no
        prefill under way, no waiting request that could be admitted, no sequence finishing
        before the last planned step, and KV blocks for every planned step's growth (so none
        preempts). Nothing changes until ``advance()`` says how many planned steps were
        taken; until then the engine accepts no other call. See ``Run`` for what it reports.
        """
        self._no_plan()
        start = self._steps
        taken = self._decode_step() if self._join_running() else None
        if taken is not None:
            duration, started, finished = taken
            stopped: tuple[str, ...] = ()
        else:
            duration, started, stopped, finished = self._general_step()
        planned: list[float] = []
        if not finished and max_steps > 1:
            planned = self._plan_decode(max_steps - 1)
        if planned:
            assert self._plan is not None
            finished = [seq.request.request_id for seq in self._plan[1]]
        return Run(start, (duration, *planned), started, stopped, tuple(finished))

    def advance(self, steps: int) -> None:
        """Take ``steps`` of the last run's planned steps; the rest never happen.

        Taking every planned step finishes the run's ``finished`` requests.
        """
        plan = self._plan
        if plan is None:
            if steps:
                raise ValueError("no planned steps to take")
            return
        planned, finishing = plan
        if not 0 <= steps <= planned:
            raise ValueError(f"the run planned {planned} steps, not {steps}")
        self._plan = None
        dec, start = self._decoding, self._steps
        growth = dec.growth_over(start, steps)
        if growth and not self.kv.allocate(dec.growth, growth):  # pragma: no cover - planned to fit
            raise AssertionError("a planned step ran out of KV blocks")
        self._steps = start + steps
        if steps < planned:
            dec.restore(finishing)
            return
        for seq in finishing:
            del self._running[seq.request.request_id]
            dec.leave(seq, self._steps, self.kv)
            self._retire(seq)

    def _no_plan(self) -> None:
        if self._plan is not None:
            raise RuntimeError("take or drop the planned steps with advance() first")

    def _join_running(self) -> bool:
        """Whether every running sequence is in the decode set; joins them if each just produced a token."""
        dec = self._decoding
        if dec.members == len(self._running):
            return True
        if dec.members:
            return False  # one is still prefilling
        last = self._steps - 1
        if any(seq.last != last for seq in self._running.values()):
            return False
        for seq in self._running.values():
            dec.join(seq, self._steps)
        return True

    def _decode_step(self) -> tuple[float, dict[str, int], list[str]] | None:
        """``step()`` for a batch of decoders plus admissions, without visiting the decoders.

        None (nothing done) when the step needs more than that: a decoder the token budget
        leaves out, or KV growth that would preempt.
        """
        dec, kv, step = self._decoding, self.kv, self._steps
        budget = self.profile.max_batched_tokens - dec.members
        growth = dec.crossings(step)
        if budget < 0 or growth > kv.free_blocks:
            return None
        if growth and not kv.allocate(dec.growth, growth):  # pragma: no cover - checked just above
            raise AssertionError("KV growth that fits did not allocate")
        scheduled: list[tuple[_Sequence, int]] = []
        self._admit_waiting(budget, scheduled, {})
        prefill, decode, kv_read = 0, dec.members, dec.kv_read(step)
        for seq, n in scheduled:
            kv_read += seq.computed + n
            if seq.generated > 0 and n == 1 and seq.computed == seq.total - 1:
                decode += 1
            else:
                prefill += n
        duration = self.profile.step_time(prefill, decode, kv_read)
        self._steps = step + 1
        finished = []
        for seq in dec.pop_ends(step):
            finished.append(seq.request.request_id)
            del self._running[seq.request.request_id]
            dec.leave(seq, self._steps, kv)
            self._retire(seq)
        started: dict[str, int] = {}
        for seq, n in scheduled:
            seq.computed += n
            if not seq.published and seq.computed >= seq.request.prompt_tokens:
                kv.promote(seq.alloc, seq.request.block_hashes)
                seq.published = True
            if seq.computed == seq.total:
                seq.generated += 1
                seq.last = step
                started[seq.request.request_id] = seq.place
                if seq.generated == seq.request.output_tokens:
                    finished.append(seq.request.request_id)
                    del self._running[seq.request.request_id]
                    self._retire(seq)
                else:
                    dec.join(seq, self._steps)
        return duration, started, finished

    def _general_step(self) -> tuple[float, dict[str, int], tuple[str, ...], tuple[str, ...]]:
        """``step()``, reported as a run's first step: who started and stopped producing tokens."""
        self._settle()
        last = self._steps - 1
        before = {rid for rid, seq in self._running.items() if seq.last == last}
        result, scheduled = self._step()
        emitted = result.emitted
        started = {s.request.request_id: s.place for s, _ in scheduled if s.request.request_id in emitted}
        for rid in before.intersection(started):
            del started[rid]
        stopped = tuple(rid for rid in before if rid not in emitted)
        return result.duration, started, stopped, result.finished

    def _plan_decode(self, max_steps: int) -> list[float]:
        """Durations of up to ``max_steps`` pure-decode steps from now (see ``run()``); records the plan."""
        if not self._running or not self._join_running():
            return []
        dec, kv, profile, step = self._decoding, self.kv, self.profile, self._steps
        n = dec.members
        if n > profile.max_batched_tokens:
            return []
        if self._waiting and n < profile.max_num_seqs and n < profile.max_batched_tokens:
            head = self._waiting[0]
            if kv.admissible(head.request.block_hashes, head.total):
                return []  # admitted at the next step: the batch changes
            # not admissible now, not before a sequence finishes: decode steps only shrink the free blocks
        end = dec.next_end()
        assert end is not None and end >= step
        steps = min(max_steps, end - step + 1)
        free = kv.free_blocks
        if free < n * (steps // dec.block + 1):  # some step may run out of blocks: find the first
            need = 0
            for j in range(steps):
                need += dec.crossings(step + j)
                if need > free:
                    steps = j
                    break
        if steps == 0:
            return []
        time = profile.step_time
        durations = [time(0, n, dec.kv_read(step + j)) for j in range(steps)]
        self._plan = (steps, dec.pop_ends(end) if end == step + steps - 1 else [])
        return durations

    # -- one step ---------------------------------------------------------------------------

    def _settle(self) -> None:
        """Take every sequence out of the decode set, its progress written back into it."""
        dec = self._decoding
        if dec.members:
            for seq in self._running.values():
                if seq.synced >= 0:
                    dec.leave(seq, self._steps, self.kv)
            assert dec.members == 0 and dec.growth.private == 0

    def _step(self) -> tuple[StepResult, list[tuple[_Sequence, int]]]:
        self._settle()
        budget = self.profile.max_batched_tokens
        scheduled: list[tuple[_Sequence, int]] = []
        preempted: list[str] = []
        budget = self._schedule_running(budget, scheduled, preempted)
        cached: dict[str, int] = {}
        if not preempted:
            self._admit_waiting(budget, scheduled, cached)

        prefill = decode = kv_read = 0
        for seq, n in scheduled:
            kv_read += seq.computed + n
            if seq.generated > 0 and n == 1 and seq.computed == seq.total - 1:
                decode += 1
            else:
                prefill += n
        duration = self.profile.step_time(prefill, decode, kv_read)

        step = self._steps
        self._steps = step + 1
        emitted: dict[str, int] = {}
        finished: list[str] = []
        for seq, n in scheduled:
            seq.computed += n
            if not seq.published and seq.computed >= seq.request.prompt_tokens:
                self.kv.promote(seq.alloc, seq.request.block_hashes)
                seq.published = True
            if seq.computed == seq.total:
                seq.generated += 1
                seq.last = step
                emitted[seq.request.request_id] = 1
                if seq.generated == seq.request.output_tokens:
                    finished.append(seq.request.request_id)
                    del self._running[seq.request.request_id]
                    self._retire(seq)
        result = StepResult(
            duration=duration,
            emitted=emitted,
            finished=tuple(finished),
            preempted=tuple(preempted),
            prefill_tokens=prefill,
            decode_seqs=decode,
            kv_tokens_read=kv_read,
            cached_tokens=cached,
            num_running=len(self._running),
            num_waiting=len(self._waiting),
            kv_usage=self.kv.usage,
        )
        return result, scheduled

    def _schedule_running(self, budget: int, scheduled: list, preempted: list[str]) -> int:
        running = list(self._running.values())
        index, end = 0, len(running)
        while index < end and budget > 0:
            seq = running[index]
            n = min(seq.total - seq.computed, budget)
            while not self.kv.grow(seq.alloc, seq.computed + n):
                end -= 1
                victim = running[end]
                del self._running[victim.request.request_id]
                self._preempt(victim)
                preempted.append(victim.request.request_id)
                if victim is seq:
                    return budget
            scheduled.append((seq, n))
            budget -= n
            index += 1
        return budget

    def _admit_waiting(self, budget: int, scheduled: list, cached: dict[str, int]) -> None:
        while self._waiting and budget > 0 and len(self._running) < self.profile.max_num_seqs:
            seq = self._waiting[0]
            hits = self.kv.admit(seq.alloc, seq.request.block_hashes, seq.total)
            if hits < 0:
                return  # head-of-line blocking, as FCFS demands
            self._waiting.popleft()
            seq.computed = min(hits * self.kv.block_size, seq.total - 1)
            if seq.computed:
                cached[seq.request.request_id] = seq.computed
            seq.place = self._places
            self._places += 1
            self._running[seq.request.request_id] = seq
            n = min(seq.total - seq.computed, budget)
            scheduled.append((seq, n))
            budget -= n

    def _preempt(self, seq: _Sequence) -> None:
        self.kv.release(seq.alloc)
        seq.computed = 0
        seq.published = False
        self._waiting.appendleft(seq)
        self.num_preemptions += 1

    def _retire(self, seq: _Sequence) -> None:
        self.kv.release(seq.alloc)
        del self._known[seq.request.request_id]
