"""An iteration-level inference engine model, scheduled the way vLLM's V1 scheduler does it.

Each ``step()`` is one forward pass over a batch: running sequences first (each decodes
one token or continues a prefill chunk), then waiting requests admitted first-come
first-served while there are free sequence slots, step-token budget and KV blocks for the
whole prompt. When a running sequence cannot grow its KV cache, the most recently admitted
sequence is preempted (its blocks freed, to be recomputed later) until it can.

The engine never reads a clock or sleeps: ``step()`` returns how long the step takes and
the caller lets that much time pass, in wall time (the server) or virtual time (the
simulator and the tests).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from surgelab.engine.kv import Allocation, KVCache
from surgelab.engine.profile import EngineProfile
from surgelab.engine.request import EngineRequest, StepResult

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
        self._running: list[_Sequence] = []
        self._ids: set[str] = set()
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
        self.check(request)
        if request.request_id in self._ids:
            raise RequestRejected(f"duplicate request id {request.request_id!r}")
        self._ids.add(request.request_id)
        self._waiting.append(_Sequence(request))

    def abort(self, request_id: str) -> bool:
        """Drop a request wherever it is (e.g. the client went away); True if it was known."""
        if request_id not in self._ids:
            return False
        for queue in (self._running, self._waiting):
            for seq in queue:
                if seq.request.request_id == request_id:
                    queue.remove(seq)
                    self._retire(seq)
                    return True
        return False  # pragma: no cover - ids and queues are kept in step

    def step(self) -> StepResult:
        """Run one iteration: schedule, time it, and advance every scheduled sequence."""
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

        emitted: dict[str, int] = {}
        finished: list[str] = []
        for seq, n in scheduled:
            seq.computed += n
            if not seq.published and seq.computed >= seq.request.prompt_tokens:
                self.kv.promote(seq.alloc, seq.request.block_hashes)
                seq.published = True
            if seq.computed == seq.total:
                seq.generated += 1
                emitted[seq.request.request_id] = 1
                if seq.generated == seq.request.output_tokens:
                    finished.append(seq.request.request_id)
                    self._retire(seq)
        if finished:
            self._running = [s for s in self._running if s.generated < s.request.output_tokens]
        return StepResult(
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

    def _schedule_running(self, budget: int, scheduled: list, preempted: list[str]) -> int:
        index = 0
        while index < len(self._running) and budget > 0:
            seq = self._running[index]
            n = min(seq.total - seq.computed, budget)
            while not self.kv.grow(seq.alloc, seq.computed + n):
                victim = self._running.pop()
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
            self._running.append(seq)
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
        self._ids.discard(seq.request.request_id)
