"""``Engine.run``/``advance`` take exactly the steps ``Engine.step`` takes, many at a time.

Two drivers feed the same arrivals (and client aborts) to an engine in virtual nanoseconds,
as the simulator does: one steps it one ``step()`` at a time, the other a ``run()`` at a
time, cutting a run short when a request arrives or is aborted during it. Every step's
duration, every request's token steps and the engine's final state must be identical.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from dataclasses import replace

import pytest

from surgelab.engine import Engine, EngineRequest, load_profile, prefix_block_hashes

NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return round(seconds * NS)


def _workload(seed: int, n: int, *, prompt: tuple[int, int], output: tuple[int, int], gap_ms: float,
              shared: int = 0, aborts: float = 0.0, block: int = 16):  # fmt: skip
    """Arrivals ``(time_ns, request)`` and aborts ``(time_ns, id)``, in time order."""
    rng = random.Random(seed)
    system = list(range(10_000, 10_000 + shared))
    arrivals, aborts_at, t = [], [], 0
    for i in range(n):
        t += _ns(rng.expovariate(1000 / gap_ms))
        p, o = rng.randint(*prompt), rng.randint(*output)
        tokens = (system if shared and rng.random() < 0.7 else []) + [i * 100_000 + k for k in range(p)]
        hashes = prefix_block_hashes(tokens, block)
        arrivals.append((t, EngineRequest(f"r{i}", len(tokens), o, hashes)))
        if rng.random() < aborts:
            aborts_at.append((t + _ns(rng.uniform(0.01, 0.5)), f"r{i}"))
    return arrivals, sorted(aborts_at)


class _Log:
    def __init__(self) -> None:
        self.durations: list[float] = []
        self.tokens: dict[str, list[int]] = {}  # request -> steps of its tokens
        self.finished: dict[str, int] = {}
        self.aborted: dict[str, int] = {}


def _arrive_and_abort(engine: Engine, log: _Log, now: int, arrivals, aborts, a: int, b: int, open_=None):
    """At a step start: requests that have arrived join; aborts made before now take effect."""
    while a < len(arrivals) and arrivals[a][0] <= now:
        engine.add(arrivals[a][1])
        a += 1
    while b < len(aborts) and aborts[b][0] < now:
        rid = aborts[b][1]
        if engine.abort(rid):
            log.aborted[rid] = engine.steps
            if open_ is not None and rid in open_:
                log.tokens.setdefault(rid, []).extend(range(open_.pop(rid), engine.steps))
        b += 1
    return a, b


def _step_by_step(engine: Engine, arrivals, aborts) -> _Log:
    log, now, a, b = _Log(), 0, 0, 0
    while a < len(arrivals) or engine.has_work:
        if not engine.has_work:
            now = max(now, arrivals[a][0])
        a, b = _arrive_and_abort(engine, log, now, arrivals, aborts, a, b)
        if not engine.has_work:
            continue
        step = engine.steps
        result = engine.step()
        log.durations.append(result.duration)
        for rid in result.emitted:
            log.tokens.setdefault(rid, []).append(step)
        for rid in result.finished:
            log.finished[rid] = step
        now += _ns(result.duration)
    return log


def _runs(engine: Engine, arrivals, aborts, max_steps: int) -> _Log:
    log, now, a, b = _Log(), 0, 0, 0
    open_: dict[str, int] = {}  # token stretches under way: request -> first step
    while a < len(arrivals) or engine.has_work:
        if not engine.has_work:
            now = max(now, arrivals[a][0])
        a, b = _arrive_and_abort(engine, log, now, arrivals, aborts, a, b, open_)
        if not engine.has_work:
            continue
        run = engine.plan(max_steps) or engine.run(max_steps)  # as the simulator asks
        for rid in run.stopped:
            log.tokens.setdefault(rid, []).extend(range(open_.pop(rid), run.start))
        for rid in run.started:
            open_[rid] = run.start
        ends, t = [], now
        for d in run.durations:
            t += _ns(d)
            ends.append(t)
        taken = len(ends)  # cut before the first step that starts at or after an arrival, or after an abort
        if a < len(arrivals):
            taken = min(taken, 1 + bisect_left(ends, arrivals[a][0]))
        if b < len(aborts):
            taken = min(taken, 1 + bisect_right(ends, aborts[b][0]))
        engine.advance(taken - run.taken)
        log.durations.extend(run.durations[:taken])
        for offset, ids in run.finished:
            if offset < taken:
                for rid in ids:
                    log.tokens.setdefault(rid, []).extend(range(open_.pop(rid), run.start + offset + 1))
                    log.finished[rid] = run.start + offset
        now = ends[taken - 1]
    assert not open_
    return log


PROFILE = load_profile("llama3-8b-h100")
CASES = {
    "decode runs, arrivals mid-run": (PROFILE, dict(prompt=(50, 800), output=(1, 300), gap_ms=15)),
    "slots full: requests wait for a finish": (
        replace(PROFILE, max_num_seqs=8), dict(prompt=(50, 400), output=(20, 200), gap_ms=5)),
    "chunked prefill: long prompts over the step budget": (
        replace(PROFILE, max_batched_tokens=512), dict(prompt=(100, 2000), output=(5, 100), gap_ms=30)),
    "KV cache full: preemption and recompute": (
        replace(PROFILE, kv_capacity_tokens=6000), dict(prompt=(100, 900), output=(50, 400), gap_ms=20)),
    "prefix cache: shared system prompt, eviction": (
        replace(PROFILE, kv_capacity_tokens=20_000), dict(prompt=(20, 600), output=(1, 200), gap_ms=10, shared=700)),
    "client aborts": (replace(PROFILE, kv_capacity_tokens=8000),
                      dict(prompt=(50, 800), output=(10, 300), gap_ms=20, aborts=0.3)),
    "CPU tier: evicted prefixes loaded back": (
        replace(PROFILE, kv_capacity_tokens=12_000, kv_cpu_blocks=400, kv_load_s_per_block=3e-5),
        dict(prompt=(20, 600), output=(1, 200), gap_ms=10, shared=900)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("max_steps", [2, 64])
def test_runs_take_exactly_the_steps_of_step(case, max_steps):
    profile, shape = CASES[case]
    arrivals, aborts = _workload(7, 400, **shape)
    reference, fast = Engine(profile), Engine(profile)
    want = _step_by_step(reference, arrivals, aborts)
    got = _runs(fast, arrivals, aborts, max_steps)
    assert got.durations == want.durations  # every step, bit for bit
    assert got.tokens == want.tokens
    assert got.finished == want.finished and got.aborted == want.aborted
    assert len(want.finished) + len(want.aborted) == len(arrivals)
    assert fast.num_preemptions == reference.num_preemptions
    assert fast.kv.free_blocks == reference.kv.free_blocks == profile.kv_blocks
    assert fast.steps == reference.steps == len(want.durations)


def test_runs_plan_steps_while_the_batch_only_decodes():
    engine = Engine(PROFILE)
    for i in range(4):
        engine.add(EngineRequest(f"r{i}", 100, 50 + i))
    first = engine.run(100)
    assert dict(first.started) == {"r0": 0, "r1": 1, "r2": 2, "r3": 3} and first.taken == 1
    assert first.planned == 52  # nobody waits: a finish only shrinks the batch, the plan goes on
    assert list(first.finished) == [(49, ("r0",)), (50, ("r1",)), (51, ("r2",)), (52, ("r3",))]
    reads = [PROFILE.step_time(0, 4, 4 * 101 + 4 * j) for j in range(49)]
    reads += [PROFILE.step_time(0, 3 - k, (3 - k) * (150 + k)) for k in range(3)]  # one fewer after each finish
    assert first.durations[1:] == reads  # the profile's own formula, step by step
    engine.advance(49)
    assert engine.num_running == 3 and engine.steps == 50
    after = engine.plan(100)  # the next steps only decode: planned, none taken
    assert after is not None and after.taken == 0 and after.start == 50 and after.planned == 3
    assert after.durations == reads[-3:] and list(after.finished) == [(0, ("r1",)), (1, ("r2",)), (2, ("r3",))]
    engine.advance(1)
    engine.add(EngineRequest("new", 10, 5))
    assert engine.plan(100) is None  # the next step admits it: run() takes it


def test_a_planned_run_cut_short_takes_only_its_first_steps():
    engine = Engine(PROFILE)
    engine.add(EngineRequest("a", 100, 20))
    engine.add(EngineRequest("w", 100, 40))
    run = engine.run(100)
    assert run.planned == 39 and list(run.finished) == [(19, ("a",)), (39, ("w",))]
    with pytest.raises(RuntimeError):
        engine.add(EngineRequest("b", 100, 20))
    engine.advance(3)
    engine.add(EngineRequest("b", 100, 20))
    after = engine.run(100)
    assert after.start == 4 and list(after.started) == ["b"]
    assert list(after.finished) == [(15, ("a",)), (19, ("b",)), (35, ("w",))]  # a's last token: step 19
    with pytest.raises(ValueError):
        engine.advance(after.planned + 1)


def test_with_requests_waiting_a_plan_ends_at_the_first_finish():
    engine = Engine(replace(PROFILE, max_num_seqs=2))
    for rid, out in (("a", 10), ("b", 30), ("c", 5)):
        engine.add(EngineRequest(rid, 50, out))
    run = engine.run(100)  # a and b run, c waits for a slot
    assert list(run.started) == ["a", "b"] and run.planned == 9 and list(run.finished) == [(9, ("a",))]
    engine.advance(9)
    assert engine.plan(100) is None  # c takes a's slot at the next step
    assert list(engine.run(100).started) == ["c"]
