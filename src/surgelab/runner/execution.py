"""What every loop of one run shares: the clock, the client, the records and the stop.

Loops (open, closed, one per phase) only decide *when* to send; this object sends, records
each outcome exactly once, and owns stopping: a stop request ends scheduling, in-flight
requests get the grace period, and whatever is left is cancelled and recorded as such.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from surgelab.client.openai import OpenAIClient
from surgelab.client.routing import Router
from surgelab.files import os_error_line
from surgelab.load.stops import StopRules, grace_error
from surgelab.metrics.live import LiveSnapshot, LiveStats
from surgelab.metrics.record import CUT_SHORT, Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta, RecordStore
from surgelab.runner.collector import collector_paused, collector_resumed
from surgelab.runner.protocols import Client, ClientFactory, Observer, RecordSink
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND
from surgelab.workload.request import RequestSpec
from surgelab.workload.tokenizers import load_tokenizer

__all__ = ["Execution", "Shard", "MAX_NAP_S", "LEAD_NS", "GRAIN_NS"]

MAX_NAP_S = 0.1  # longest uninterrupted sleep, so a stop is noticed promptly
LEAD_NS = 3_000_000  # a request is prepared this long before it is due, then sent on time
GRAIN_NS = 1_000_000  # the event loop timer's grain


@dataclass(frozen=True)
class Shard:
    """This process's share of the run: open-loop requests and closed-loop users ``i`` with
    ``i % count == index``. Every worker builds the same schedule from the same seed, so the
    union of the shards is exactly the single-process run."""

    index: int = 0
    count: int = 1

    def share(self, total: int) -> int:
        """This shard's part of a limit (max in flight, connection pool)."""
        return max(-(-total // self.count), 1) if total else 0


@dataclass
class _Stop:
    requested: bool = False
    reason: str = "completed"
    at_ns: int | None = None
    hurry: bool = False  # a second interrupt: no grace


class Execution:
    def __init__(
        self,
        scenario: Scenario,
        run_dir: Path,
        api_key: str | None,
        live: LiveStats,
        on_tick: Callable[[LiveSnapshot], None] | None = None,
        pool_size: int = 0,
        observers: Sequence[Observer] = (),
        shard: Shard = Shard(),
        t0: int | None = None,
        on_stop: Callable[[str], None] | None = None,
        keep_text: bool = False,
        connect: ClientFactory = OpenAIClient,
        store: RecordSink | None = None,
    ) -> None:
        self.scenario = scenario
        self.tokenizer = load_tokenizer(scenario.tokenizer, scenario.tokenizer_calibration)
        self.shard = shard
        self.keep_text = keep_text  # hand every answer's text to the observers (response comparison)
        self.on_stop = on_stop  # told of a stop this process decided (abort, breakpoint), for its peers
        self.buffer = RecordBuffer(worker=shard.index)
        # pyarrow's first list-to-array conversion costs ~20 ms once; pay it here, not in the first flush
        # on the event loop, where it showed as a schedule-lag spike (benchmarks/RESULTS.md)
        RecordBuffer(worker=shard.index).take()
        # where flushes go: the run directory's parts, or (a remote worker) tables its driver takes
        self.store: RecordSink = store or RecordStore(run_dir, worker=shard.index if shard.count > 1 else None)
        self.live = live
        self.on_tick = on_tick
        self.stops = StopRules(scenario, live, self._rule_stop, self.clock)
        self.observers = (*observers, self.stops)
        self.stop = _Stop()
        self.tasks: set[asyncio.Task] = set()
        self.crashes: list[str] = []  # what a request's task raised outside ``execute`` (a surgelab bug)
        self.client: Client = connect(scenario.target, self.clock, self.tokenizer, api_key, pool_size=shard.share(pool_size))
        self.clients: dict[str, Client] = {}  # route mode: one per named target
        self.router: Router | None = None
        if scenario.targets and scenario.routing.mode == "route":
            for target in scenario.targets:
                key = os.environ.get(target.api_key_env) if target.api_key_env else None
                self.clients[target.name] = connect(target, self.clock, self.tokenizer, key, shard.share(pool_size))
            routing = scenario.routing
            self.router = Router(scenario.targets, routing.health, routing.failover, self.clock)
        collector_paused()
        # One monotonic clock for every process of the run: perf_counter_ns is system-wide on Linux.
        self.t0 = time.perf_counter_ns() if t0 is None else t0
        self._writing: asyncio.Future | None = None
        self._in_writing: pa.Table | None = None  # the rows of the flush under way, kept until they are on disk
        self._unwritten: list[pa.Table] = []  # rows a failed flush could not write (a full disk), tried again at the end
        self.cancel_reason = CUT_SHORT  # the error of a request cancelled in flight (``drain`` says why)

    def clock(self) -> int:
        """Nanoseconds since the run started, on the monotonic performance counter."""
        return time.perf_counter_ns() - self.t0

    def _rule_stop(self, reason: str) -> None:
        if not self.stop.requested:  # never turn a stop under way into a hurried one
            self.request_stop(reason)

    def hurry(self, reason: str) -> None:
        """Stop now: what is in flight gets no grace (a second interrupt)."""
        self.request_stop(reason)
        self.stop.hurry = True

    def request_stop(self, reason: str) -> None:
        if self.stop.requested:
            self.stop.hurry = True
            return
        self.stop.requested, self.stop.reason, self.stop.at_ns = True, reason, self.clock()
        if self.on_stop is not None:
            self.on_stop(reason)

    async def sleep_until(self, at_ns: int, early_ns: int = 0) -> bool:
        """Sleep until ``at_ns`` unless a stop comes first; True when the time was reached.

        ``early_ns`` lets it return that much before ``at_ns``: the loop's timers are
        millisecond-grained (a shorter sleep returns at once), so a caller that can start its
        work early (``GRAIN_NS``) avoids a busy loop over the last fraction of a millisecond.
        """
        while not self.stop.requested:
            now = self.clock()
            if now >= at_ns - early_ns:
                return True
            await asyncio.sleep(min((at_ns - now) / SECOND, MAX_NAP_S))
        return False

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(self._crashed)
        return task

    def _crashed(self, task: asyncio.Task) -> None:
        """A task that raised (building a prompt, the next turn, a task's step) took its requests with it:
        kept for run.json, which makes the run invalid, and its traceback said once on stderr."""
        if task.cancelled() or (exc := task.exception()) is None:
            return
        if not self.crashes:
            print("surgelab: a request's task raised (a bug: please report it):", file=sys.stderr)
            traceback.print_exception(exc, file=sys.stderr)
        self.crashes.append(f"{type(exc).__name__}: {exc}")

    # -- one request ----------------------------------------------------------------------------

    def record(self, meta: RecordMeta, out: Outcome) -> None:
        self.buffer.add(meta, out)
        self.live.on_done(meta, out, self.clock())
        for observer in self.observers:
            observer.observe(meta, out)

    def drop(self, meta: RecordMeta, why: str) -> None:
        self.live.scheduled += 1
        self.record(meta, Outcome(state=State.DROPPED, error=why, attempts=0))

    async def execute(self, meta: RecordMeta, spec: RequestSpec, out: Outcome | None = None) -> Outcome:
        """Send one request at its intended time (or at once, if that has passed) and record it, whatever happens.

        Callers start it up to ``LEAD_NS`` early, so the prompt and the request's bytes are
        ready when it is due: what the schedule lag then shows is the client's lateness, not
        its preparation.
        """
        out = out or Outcome()
        self.live.scheduled += 1
        self.live.on_send(self.clock())
        if self.keep_text and not spec.keep_text:
            spec = replace(spec, keep_text=True)
        if meta.session != spec.session:  # what target.session_header sends
            spec = replace(spec, session=meta.session)
        client, target = self.client, ""
        if self.router is not None:
            target = out.target = self.router.pick(meta.id)
            client = self.clients[target]
        try:
            await client.send(spec, out, meta.intended_ns)
        except asyncio.CancelledError:
            out.state, out.error, out.end_ns = State.CANCELLED, self.cancel_reason, self.clock()
            raise
        except Exception as exc:  # send() should never raise; if it does, the request did not succeed
            out.fail(State.PROTOCOL_ERROR, f"client error: {type(exc).__name__}: {exc}", self.clock())
        finally:
            if self.router is not None and out.state is not State.CANCELLED:
                sent_s = out.sent_ns / SECOND if out.sent_ns is not None else None
                self.router.observe(target, out.state is State.OK, out.error, sent_s)
            self.record(meta, out)
        return out

    async def __aenter__(self) -> Execution:
        """Open the connection pools (and, when routing, start the health checks)."""
        for client in (*self.clients.values(), self.client):
            await client.__aenter__()
        if self.router is not None:
            self._checks = asyncio.create_task(self.router.check_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        collector_resumed()  # paused since __init__
        if self.router is not None:
            self._checks.cancel()
            await asyncio.gather(self._checks, return_exceptions=True)
        for client in (*self.clients.values(), self.client):
            await client.__aexit__(None, None, None)

    # -- the end ----------------------------------------------------------------------------

    async def drain(self, grace_s: float, end_ns: int | None = None) -> None:
        """Let in-flight work finish, but only for the grace period after a stop or after the
        schedule's end (``end_ns``): a run never outlives its duration plus its grace."""
        last_ns = end_ns + int(grace_s * SECOND) if end_ns is not None else None
        while self.tasks and not self.stop.requested:
            if last_ns is not None and self.clock() >= last_ns:
                break
            await asyncio.wait(set(self.tasks), timeout=MAX_NAP_S)
        if self.tasks:
            if not self.stop.requested:
                self.cancel_reason = (
                    f"no answer by the end of the grace period ({grace_s:g}s after the planned end, load.grace)"
                )
            else:
                deadline = time.monotonic() + (0 if self.stop.hurry else grace_s)
                while self.tasks and not self.stop.hurry and time.monotonic() < deadline:
                    await asyncio.wait(set(self.tasks), timeout=min(MAX_NAP_S, max(deadline - time.monotonic(), 0)))
                self.cancel_reason = self._stopped_reason(grace_s)
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def _stopped_reason(self, grace_s: float) -> str:
        """The error of a request still in flight when a stop's grace ran out: unanswered, unless the
        user gave it no time (a second interrupt, or an interrupt with no grace), which is not the target's doing."""
        interrupted = self.stop.reason.startswith("interrupted")
        if self.stop.hurry or (interrupted and grace_s <= 0):
            return CUT_SHORT
        return grace_error(grace_s, self.stop.reason)

    async def flush_loop(self) -> None:
        """Write buffered records off the event loop; a write in progress is never abandoned.

        A write that fails (a full disk) stops the run: the parts already written stay, the rows
        that were not are kept for one more try at the end (``final_flush``).
        """
        interval = self.scenario.output.flush_interval
        while True:
            await asyncio.sleep(interval)
            self._in_writing = self.buffer.take()
            self._writing = asyncio.ensure_future(asyncio.to_thread(self.store.write, self._in_writing))
            try:
                await asyncio.shield(self._writing)
            except OSError as exc:
                self._unwritten.append(self._in_writing)
                self._writing = self._in_writing = None
                self.request_stop(f"aborted: records cannot be written: {os_error_line(exc)}")
                return
            self._writing = self._in_writing = None

    async def final_flush(self) -> None:
        """Write what is left; an OSError (naming the file) when some rows could not be written after all."""
        if self._writing is not None:
            try:
                await self._writing  # let a flush under way land before the last one
            except OSError:
                self._unwritten.append(self._in_writing)
            self._writing = self._in_writing = None
        tables, self._unwritten = [*self._unwritten, self.buffer.take()], []
        for i, table in enumerate(tables):
            try:
                self.store.write(table)
            except OSError:
                self._unwritten = tables[i:]  # what could not be written, for the caller to count
                raise

    def tick(self) -> None:
        if self.on_tick is None and not self.observers:
            return
        snapshot = self.live.snapshot(self.clock())
        if self.on_tick is not None:
            self.on_tick(snapshot)
        for observer in self.observers:
            observer.update(snapshot)
