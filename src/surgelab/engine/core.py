"""An iteration-level inference engine model, scheduled the way vLLM's V1 scheduler does it.

Each ``step()`` is one forward pass over a batch: running sequences first (each decodes
one token or continues a prefill chunk), then waiting requests admitted in the scheduler's
order while there are free sequence slots, step-token budget and KV blocks for the whole
prompt. When a running sequence cannot grow its KV cache, the sequence the scheduler names is
preempted (its blocks freed, to be recomputed later) until it can. The default scheduler is
vLLM's: first come, first served, the most recently admitted preempted (``schedulers/``).

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

from typing import Any

from surgelab.engine.decoding import DecodeSet
from surgelab.engine.kv import Allocation, KVCache
from surgelab.engine.profile import EngineProfile
from surgelab.engine.request import EngineRequest, Run, StepResult
from surgelab.engine.schedulers import Scheduler, make_scheduler

__all__ = ["Engine", "RequestRejected"]


class RequestRejected(ValueError):
    """A request this engine can never serve (too long for the context or the KV cache)."""


class _Sequence:
    """One request inside the engine (a plain class: cheaper to make than a dataclass)."""

    __slots__ = ("request", "alloc", "computed", "generated", "published", "place", "last", "synced", "entry")

    def __init__(self, request: EngineRequest) -> None:
        self.request = request
        self.alloc = Allocation()
        self.computed = 0
        """Tokens whose KV is in the cache (or will be, after the step that computes them)."""
        self.generated = 0
        self.published = False
        self.place = -1
        """When it joined the running batch (increasing): the batch is scheduled in this order."""
        self.last = -1
        """The step of its latest token."""
        self.synced = -1
        """In the decode set: the step it joined at (its counts are as of then); -1 otherwise."""
        self.entry: list | None = None

    @property
    def total(self) -> int:
        return self.request.prompt_tokens + self.generated


class Engine:
    """Continuous batching over a KV-cache budget; step it, and let the returned time pass."""

    def __init__(
        self, profile: EngineProfile, *, prefix_caching: bool = True, scheduler: Scheduler[Any] | str = "fcfs"
    ) -> None:
        errors = profile.validate()
        if errors:
            raise ValueError(f"invalid profile {profile.name!r}: " + "; ".join(errors))
        self.profile = profile
        self.kv = KVCache(profile.kv_blocks, profile.block_size, prefix_caching, profile.kv_cpu_blocks)
        self.scheduler: Scheduler[_Sequence] = make_scheduler(scheduler)
        """The waiting requests, in the order it admits them, and whom it preempts."""
        self._running: list[_Sequence] = []  # in batch order
        self._known: dict[str, _Sequence] = {}
        self._steps = 0
        self._places = 0
        self._decoding = DecodeSet(profile.block_size)
        self._plan: tuple[int, list] | None = None  # (planned steps, [(step, sequences finishing there)])
        self._max_batched = profile.max_batched_tokens
        # prompt + output tokens a request may have: the context length and what the KV cache can ever hold
        self._max_total = min(profile.max_model_len, self.kv.num_blocks * self.kv.block_size)
        self.num_preemptions = 0

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self.scheduler)

    @property
    def has_work(self) -> bool:
        return bool(self._running or self.scheduler)

    @property
    def steps(self) -> int:
        """Steps taken so far; the next step has this index."""
        return self._steps

    def check(self, request: EngineRequest) -> None:
        """Raise RequestRejected if ``request`` could never complete on this engine."""
        prompt, output = request.prompt_tokens, request.output_tokens
        if prompt >= 1 and output >= 1 and prompt + output <= self._max_total:
            return
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
        self.scheduler.add(seq)

    def abort(self, request_id: str) -> bool:
        """Drop a request wherever it is (e.g. the client went away); True if it was known."""
        self._no_plan()
        seq = self._known.get(request_id)
        if seq is None:
            return False
        if seq.synced >= 0 or seq in self._running:
            if seq.synced >= 0:
                self._decoding.leave(seq, self._steps, self.kv)
            self._running.remove(seq)
        else:
            self.scheduler.remove(seq)
        self._retire(seq)
        return True

    def step(self) -> StepResult:
        """Run one iteration: schedule, time it, and advance every scheduled sequence."""
        self._no_plan()
        return self._step()[0]

    # -- many steps at a time ---------------------------------------------------------------

    def run(self, max_steps: int = 1) -> Run:
        """Take the next step, as ``step()`` would, and plan up to ``max_steps - 1`` after it.

        The plan goes on while every running sequence just decodes (see ``plan()``). Nothing
        changes until ``advance()`` says how many planned steps were taken; until then the
        engine accepts no other call. See ``Run`` for what it reports.

        The step is taken without visiting the decoding sequences when that is all the batch
        holds besides new admissions (``decoding.py``); otherwise ``step()`` takes it.
        """
        if self._plan is not None:
            self._no_plan()
        dec, running, kv = self._decoding, self._running, self.kv
        start = step = self._steps
        if dec.members != len(running) and not self._join_running():
            return self._general_run(max_steps)
        members = dec.members
        budget = self._max_batched - members
        if budget < 0:
            return self._general_run(max_steps)
        growth = dec.due[step % dec.block]
        if growth and not kv.allocate(dec.growth, growth):  # allocates nothing when it does not fit
            return self._general_run(max_steps)  # a decoder is preempted
        tokens, reads = [members], [dec.context + members * step]
        scheduled: list[tuple[_Sequence, int]] = []
        first = None
        load = 0.0
        if self.scheduler and budget:
            self._admit_waiting(budget, scheduled, {})
            load = kv.take_loaded() * self.profile.kv_load_s_per_block
            pairs = 0
            for seq, n in scheduled:
                tokens[0] += n
                reads[0] += seq.computed + n
                pairs += _pairs(seq, n)
            first = (members + len(scheduled), pairs)
        if not tokens[0]:
            return self._general_run(max_steps)  # nothing to do: an idle step
        self._steps = after = step + 1
        finished: list[str] = []
        if members and dec.next_end() == step:
            for seq in dec.pop_ends(step):
                finished.append(seq.request.request_id)
                running.remove(seq)
                dec.leave(seq, after, kv)
                self._retire(seq)
        started: dict[str, int] = {}
        for seq, n in scheduled:
            request = seq.request
            seq.computed += n
            if not seq.published and seq.computed >= request.prompt_tokens:
                kv.promote(seq.alloc, request.block_hashes)
                seq.published = True
            if seq.computed == request.prompt_tokens + seq.generated:
                seq.generated += 1
                seq.last = step
                started[request.request_id] = seq.place
                if seq.generated == request.output_tokens:
                    finished.append(request.request_id)
                    running.remove(seq)
                    self._retire(seq)
                else:
                    dec.join(seq, after)
        return self._run(start, 1, tokens, reads, started, (), finished, max_steps - 1, first, load)

    def plan(self, max_steps: int) -> Run | None:
        """Plan up to ``max_steps`` steps from now, taking none; None when the next one is no pure decode step.

        Steps are planned while every running sequence decodes and will go on decoding: no
        prefill under way, no waiting request that could be admitted, KV blocks for every
        planned step's growth (so none is preempted). A request finishing only shrinks the
        batch when none waits; with one waiting, the plan ends at the first finish.
        ``advance()`` takes its steps, as it does a run's.
        """
        if self._plan is not None:
            self._no_plan()
        if max_steps < 1 or not self._running:
            return None
        tokens: list[int] = []
        reads: list[int] = []
        start = self._steps
        points = self._plan_decode(max_steps, tokens, reads)
        if not tokens:
            return None
        ends = [(last - start, tuple([seq.request.request_id for seq in seqs])) for last, seqs in points]
        return Run(start, self.profile.step_times(tokens, reads), {}, (), ends, 0)

    def _run(self, start: int, taken: int, tokens: list[int], reads: list[int], started: dict[str, int],
             stopped: tuple[str, ...], finished: list[str] | tuple[str, ...], more: int,
             first: tuple[int, int] | None = None, load: float = 0.0) -> Run:  # fmt: skip
        """The run of ``taken`` steps (their work already on ``tokens``/``reads``; the first's
        sequences and attention pairs ``first`` when it prefills, and ``load`` seconds of KV
        loaded from the CPU tier) and up to ``more`` planned."""
        ends = [(0, tuple(finished))] if finished else []
        if more > 0 and self._running and not (finished and self.scheduler):
            for last, seqs in self._plan_decode(more, tokens, reads):
                ends.append((last - start, tuple([seq.request.request_id for seq in seqs])))
        durations = self.profile.step_times(tokens, reads, first)
        if load:
            durations[0] += load
        return Run(start, durations, started, stopped, ends, taken)

    def _general_run(self, max_steps: int) -> Run:
        """``run()`` whose first step is ``step()``'s."""
        start = self._steps
        duration, started, stopped, finished = self._general_step()
        run = self._run(start, 1, [], [], started, stopped, finished, max_steps - 1)
        run.durations.insert(0, duration)
        return run

    def advance(self, steps: int) -> None:
        """Take ``steps`` of the planned steps (of the last run, or plan); the rest never happen.

        Requests finishing at a step taken finish.
        """
        plan = self._plan
        if plan is None:
            if steps:
                raise ValueError("no planned steps to take")
            return
        planned, points = plan
        if not 0 <= steps <= planned:
            raise ValueError(f"{planned} steps were planned, not {steps}")
        self._plan = None
        dec, kv, running, step = self._decoding, self.kv, self._running, self._steps
        self._steps = end = step + steps
        for i, (last, seqs) in enumerate(points):
            if last >= end:
                for _, rest in points[i:]:
                    dec.restore(rest)
                break
            self._grow(step, last + 1 - step)
            step = last + 1
            for seq in seqs:
                running.remove(seq)
                dec.leave(seq, step, kv)
                self._retire(seq)
        if end > step:
            self._grow(step, end - step)

    def _grow(self, step: int, steps: int) -> None:
        """The KV blocks the decode set grows into over ``steps`` steps from ``step``."""
        dec = self._decoding
        growth = dec.growth_over(step, steps)
        if growth and not self.kv.allocate(dec.growth, growth):  # pragma: no cover - planned to fit
            raise AssertionError("a planned step ran out of KV blocks")

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
        if any(seq.last != last for seq in self._running):
            return False
        for seq in self._running:
            dec.join(seq, self._steps)
        return True

    def _general_step(self) -> tuple[float, dict[str, int], tuple[str, ...], tuple[str, ...]]:
        """``step()``, reported as a run's first step: who started and stopped producing tokens."""
        self._settle()
        last = self._steps - 1
        before = {seq.request.request_id for seq in self._running if seq.last == last}
        result, scheduled = self._step()
        emitted = result.emitted
        started = {s.request.request_id: s.place for s, _ in scheduled if s.request.request_id in emitted}
        for rid in before.intersection(started):
            del started[rid]
        stopped = tuple(rid for rid in before if rid not in emitted)
        return result.duration, started, stopped, result.finished

    def _plan_decode(self, max_steps: int, tokens: list[int], reads: list[int]) -> list[tuple[int, list[_Sequence]]]:
        """Plan up to ``max_steps`` pure-decode steps from now; records the plan for ``advance()``.

        Each step's work goes on ``tokens`` and ``reads``; returns where members finish,
        ``(step, members)`` in step order. A finish only shrinks the batch when nobody waits:
        the plan goes on after it; with requests waiting, it ends there (one may fit now).
        KV growth is checked against the blocks free now, as if finishing members kept theirs:
        a plan may stop short, never run out.
        """
        dec, kv, step = self._decoding, self.kv, self._steps
        if dec.members != len(self._running) and not self._join_running():
            return []
        n = dec.members
        if n > self._max_batched:
            return []
        waiting = self.scheduler
        if waiting and n < self.profile.max_num_seqs and n < self._max_batched:
            head = waiting.peek()
            if kv.admissible(head.request.block_hashes, head.request.prompt_tokens + head.generated):
                return []  # admitted at the next step: the batch changes
            # not admissible now, nor before a member finishes: decode steps only take blocks
        block, due, context = dec.block, dec.due, dec.context
        free, left, planned = kv.free_blocks, max_steps, 0
        # at most one new block per member per ``block`` steps: check step by step only when that may not fit
        need = -1 if free >= n * (max_steps // block + 1) else 0
        points: list[tuple[int, list[_Sequence]]] = []
        while True:
            end = dec.next_end()
            steps = min(left, end - step + 1)  # type: ignore[operator]
            if need >= 0:  # a step may run out of blocks: plan up to it
                for j in range(steps):
                    need += due[(step + j) % block]
                    if need > free:
                        steps = left = j
                        break
            if steps:
                tokens += [n] * steps
                reads += range(context + n * step, context + n * (step + steps), n)
                planned += steps
                step += steps
                left -= steps
            if step <= end:  # type: ignore[operator]
                break  # stopped short of the finish
            seqs = dec.pop_ends(end)  # type: ignore[arg-type]
            points.append((end, seqs))  # type: ignore[arg-type]
            n -= len(seqs)
            for seq in seqs:
                context -= seq.computed + 1 - seq.synced
            if not (n and left) or waiting:
                break
        if planned:
            self._plan = (planned, points)
        return points

    # -- one step ---------------------------------------------------------------------------

    def _settle(self) -> None:
        """Take every sequence out of the decode set, its progress written back into it."""
        dec = self._decoding
        if dec.members:
            for seq in self._running:
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

        prefill = decode = kv_read = prefilling = pairs = 0
        for seq, n in scheduled:
            kv_read += seq.computed + n
            if seq.generated > 0 and n == 1 and seq.computed == seq.total - 1:
                decode += 1
            else:
                prefill += n
                prefilling += 1
                pairs += n * seq.computed + n * (n + 1) // 2
        duration = self.profile.step_time(prefill, decode, kv_read, prefilling, pairs)
        loaded = self.kv.take_loaded()
        if loaded:  # prefix blocks back from host memory, over the host link
            duration += loaded * self.profile.kv_load_s_per_block

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
                    self._retire(seq)
        if finished:
            self._running = [s for s in self._running if s.generated < s.request.output_tokens]
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
            num_waiting=len(self.scheduler),
            kv_usage=self.kv.usage,
        )
        return result, scheduled

    def _schedule_running(self, budget: int, scheduled: list, preempted: list[str]) -> int:
        running, victim_of = self._running, self.scheduler.victim
        index = 0
        while index < len(running) and budget > 0:
            seq = running[index]
            n = min(seq.total - seq.computed, budget)
            while not self.kv.grow(seq.alloc, seq.computed + n):
                victim = running.pop(victim_of(running, index))
                self._preempt(victim)
                preempted.append(victim.request.request_id)
                if victim is seq:
                    return budget
            scheduled.append((seq, n))
            budget -= n
            index += 1
        return budget

    def _admit_waiting(self, budget: int, scheduled: list, cached: dict[str, int]) -> None:
        waiting, running, kv = self.scheduler, self._running, self.kv
        most = self.profile.max_num_seqs
        while waiting and budget > 0 and len(running) < most:
            seq = waiting.peek()
            request = seq.request
            total = request.prompt_tokens + seq.generated
            hits = kv.admit(seq.alloc, request.block_hashes, total)
            if hits < 0:
                return  # head-of-line blocking, as vLLM does under every policy
            waiting.pop()
            if hits:
                seq.computed = min(hits * kv.block_size, total - 1)
                if seq.computed:
                    cached[request.request_id] = seq.computed
            seq.place = self._places
            self._places += 1
            running.append(seq)
            n = min(total - seq.computed, budget)
            scheduled.append((seq, n))
            budget -= n

    def _preempt(self, seq: _Sequence) -> None:
        self.kv.release(seq.alloc)
        seq.computed = 0
        seq.published = False
        self.scheduler.requeue(seq)
        self.num_preemptions += 1

    def _retire(self, seq: _Sequence) -> None:
        self.kv.release(seq.alloc)
        del self._known[seq.request.request_id]


def _pairs(seq: _Sequence, n: int) -> int:
    """The prefill attention pairs of ``n`` tokens scheduled for ``seq`` (none for a decode), as ``_step`` counts them."""
    if seq.generated > 0 and n == 1 and seq.computed == seq.total - 1:
        return 0
    return n * seq.computed + n * (n + 1) // 2
