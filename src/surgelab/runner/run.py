"""Run one scenario against its target: schedule, send, record, stop cleanly, summarise.

Open loop: the whole arrival schedule is computed up front; the scheduler sleeps until the
next intended time and fires every request that is due in one go, so a late wake-up never
shifts later requests (no coordinated omission). A request that would exceed
``max_in_flight`` is recorded as dropped, not delayed. Closed loop: each virtual user sends,
waits for the response, thinks, and repeats; its intended time is when it became ready.

Every scheduled request is recorded exactly once, in one final state.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from surgelab import __version__
from surgelab.analysis.summary import RunInfo, summarize
from surgelab.client.openai import OpenAIClient
from surgelab.load.arrivals import arrival_offsets
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta, RecordStore, read_records
from surgelab.runner.live import LiveSnapshot, LiveStats
from surgelab.runner.rundir import prepare_run_dir, write_json
from surgelab.scenario.model import Scenario
from surgelab.workload.prompts import PromptFactory

__all__ = ["RunResult", "run_scenario", "open_loop_offsets"]

_SECOND = 1_000_000_000
_MAX_NAP_S = 0.1  # longest uninterrupted sleep, so a stop is noticed promptly


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    stop_reason: str

    @property
    def thresholds_passed(self) -> bool:
        return bool(self.summary.get("thresholds_passed", True))


def open_loop_offsets(scenario: Scenario) -> np.ndarray:
    """The open-loop schedule in integer nanoseconds, reproducible from the seed."""
    load = scenario.load
    rng = np.random.default_rng([scenario.seed, 10])
    offsets = arrival_offsets(load.rate or 0.0, load.duration, load.arrival, rng, cv=load.cv)
    return np.round(offsets * _SECOND).astype(np.int64)


@dataclass
class _Stop:
    requested: bool = False
    reason: str = "completed"
    at_ns: int | None = None
    hurry: bool = False  # a second interrupt: no grace


class _Run:
    def __init__(self, scenario: Scenario, run_dir: Path, api_key: str | None,
                 on_tick: Callable[[LiveSnapshot], None] | None) -> None:  # fmt: skip
        self.scenario = scenario
        self.load = scenario.load
        self.run_dir = run_dir
        self.on_tick = on_tick
        self.prompts = PromptFactory(scenario.workload, scenario.seed)
        self.buffer = RecordBuffer()
        self.store = RecordStore(run_dir)
        target = f"{self.load.rate:g} req/s" if self.load.mode == "open" else f"{self.load.concurrency} users"
        self.live = LiveStats(self.load.duration, target)
        self.stop = _Stop()
        self.tasks: set[asyncio.Task] = set()
        self._writing: asyncio.Future | None = None
        self.t0 = time.perf_counter_ns()
        self.end_ns = int(self.load.duration * _SECOND)
        self.warmup_ns = int(self.load.warmup * _SECOND)
        pool = self.load.max_in_flight if self.load.mode == "open" else (self.load.concurrency or 0)
        self.client = OpenAIClient(scenario.target, self.clock, self.prompts.tokenizer, api_key, pool_size=pool)

    def clock(self) -> int:
        return time.perf_counter_ns() - self.t0

    def request_stop(self, reason: str) -> None:
        if self.stop.requested:
            self.stop.hurry = True
            return
        self.stop.requested, self.stop.reason, self.stop.at_ns = True, reason, self.clock()

    # -- recording ---------------------------------------------------------------------------

    def _record(self, meta: RecordMeta, out: Outcome) -> None:
        self.buffer.add(meta, out)
        self.live.on_done(meta, out, self.clock())

    async def _execute(self, meta: RecordMeta, spec) -> None:
        out = Outcome()
        try:
            await self.client.send(spec, out)
        except asyncio.CancelledError:
            out.state, out.error, out.end_ns = State.CANCELLED, "run stopped before the response ended", self.clock()
            raise
        finally:
            self._record(meta, out)

    # -- open loop ---------------------------------------------------------------------------

    def _fire(self, index: int, intended: int) -> None:
        meta = RecordMeta(id=index, intended_ns=int(intended), warmup=intended < self.warmup_ns)
        self.live.scheduled += 1
        if self.live.in_flight >= self.load.max_in_flight:
            out = Outcome(state=State.DROPPED, error=f"max_in_flight ({self.load.max_in_flight}) reached")
            self._record(meta, out)
            return
        self.live.on_send(self.clock())
        task = asyncio.create_task(self._execute(meta, self.prompts.spec(index)))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _open_loop(self) -> None:
        offsets = open_loop_offsets(self.scenario)
        i, n = 0, len(offsets)
        while i < n and not self.stop.requested:
            now = self.clock()
            due = offsets[i]
            if due > now:
                await asyncio.sleep(min((due - now) / _SECOND, _MAX_NAP_S))
                continue
            while i < n and offsets[i] <= now:  # everything that is due, at once
                self._fire(i, offsets[i])
                i += 1
            await asyncio.sleep(0)

    # -- closed loop -------------------------------------------------------------------------

    async def _user(self, user: int, ids: itertools.count) -> None:
        load = self.load
        rng = np.random.default_rng([self.scenario.seed, 20, user])
        users = load.concurrency or 1
        ready = int(load.ramp_up * _SECOND * user / users)
        while not self.stop.requested and ready < self.end_ns:
            now = self.clock()
            if ready > now:
                await asyncio.sleep(min((ready - now) / _SECOND, _MAX_NAP_S))
                continue
            index = next(ids)
            meta = RecordMeta(id=index, intended_ns=ready, warmup=ready < self.warmup_ns, user=user)
            self.live.scheduled += 1
            self.live.on_send(now)
            await self._execute(meta, self.prompts.spec(index))
            think = float(load.think_time.sample(rng, 1)[0])
            ready = self.clock() + int(think * _SECOND)

    async def _closed_loop(self) -> None:
        ids = itertools.count()
        for user in range(self.load.concurrency or 0):
            task = asyncio.create_task(self._user(user, ids))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        await self._drain()

    # -- ending ------------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let in-flight work finish; after a stop, only for the grace period."""
        while self.tasks and not self.stop.requested:
            await asyncio.wait(set(self.tasks), timeout=_MAX_NAP_S)
        if self.tasks:
            deadline = time.monotonic() + (0 if self.stop.hurry else self.load.grace)
            while self.tasks and not self.stop.hurry and time.monotonic() < deadline:
                await asyncio.wait(set(self.tasks), timeout=min(_MAX_NAP_S, max(deadline - time.monotonic(), 0)))
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _flush_loop(self) -> None:
        """Write buffered records off the event loop; a write in progress is never abandoned."""
        interval = self.scenario.output.flush_interval
        while True:
            await asyncio.sleep(interval)
            self._writing = asyncio.ensure_future(asyncio.to_thread(self.store.write, self.buffer.take()))
            await asyncio.shield(self._writing)

    async def _tick_loop(self) -> None:
        abort = [t for t in self.scenario.thresholds if t.abort_on_fail]
        ticks = 0
        while True:
            await asyncio.sleep(0.5)
            ticks += 1
            now = self.clock()
            if self.on_tick is not None:
                self.on_tick(self.live.snapshot(now))
            if (
                abort
                and ticks % 2 == 0
                and now >= self.warmup_ns
                and self.live.measured_ok + self.live.measured_failed >= 10
            ):
                for threshold in abort:
                    value = self.live.value(threshold)
                    if value is not None and not threshold.passes(value):
                        self.request_stop(f"aborted: threshold {threshold.expr!r} failed")
                        break

    async def execute(self, stop_event: asyncio.Event | None, handle_signals: bool) -> str:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self.request_stop, f"interrupted ({signal.Signals(sig).name})")
        watcher = asyncio.create_task(self._watch(stop_event)) if stop_event is not None else None
        helpers = [asyncio.create_task(self._flush_loop()), asyncio.create_task(self._tick_loop())]
        try:
            async with self.client:
                if self.load.mode == "open":
                    await self._open_loop()
                    await self._drain()
                else:
                    await self._closed_loop()
        finally:
            for task in [*helpers, *([watcher] if watcher else [])]:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            if self._writing is not None:
                await self._writing  # let a flush under way land before the last one
            for sig in signals:
                loop.remove_signal_handler(sig)
            self.store.write(self.buffer.take())
            if self.on_tick is not None:
                self.on_tick(self.live.snapshot(self.clock()))
        return self.stop.reason

    async def _watch(self, stop_event: asyncio.Event) -> None:
        await stop_event.wait()
        self.request_stop("stopped")


async def run_scenario(
    scenario: Scenario,
    run_dir: Path,
    *,
    api_key: str | None = None,
    on_tick: Callable[[LiveSnapshot], None] | None = None,
    stop_event: asyncio.Event | None = None,
    handle_signals: bool = False,
) -> RunResult:
    """Run ``scenario`` and leave records, summary and resolved scenario in ``run_dir``."""
    run_dir = prepare_run_dir(run_dir, scenario)
    started = datetime.now(timezone.utc)
    info: dict[str, Any] = {
        "surgelab_version": __version__,
        "started_at": started.isoformat(),
        "pid": os.getpid(),
        "planned_duration_s": scenario.load.duration,
    }
    write_json(run_dir / "run.json", info)
    run = _Run(scenario, run_dir, api_key, on_tick)
    reason = await run.execute(stop_event, handle_signals)
    wall_s = run.clock() / _SECOND
    run.store.finalize()
    info.update(stop_reason=reason, stopped_at_s=(run.stop.at_ns or run.end_ns) / _SECOND, wall_s=wall_s)
    write_json(run_dir / "run.json", info)
    summary = summarize(read_records(run_dir), scenario, RunInfo.from_dict(info))
    write_json(run_dir / "summary.json", summary)
    return RunResult(run_dir=run_dir, summary=summary, stop_reason=reason)
