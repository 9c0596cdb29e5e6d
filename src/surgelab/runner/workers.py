"""Several worker processes for one run: each its own event loop and connection pool.

Every worker builds the same schedule from the same seed and sends its share
(``runner.execution.Shard``); all use one monotonic clock origin, so their records merge
into exactly the single-process run. This process coordinates (``runner.coordinator``, as for
Ray): the terminal, the signals, the telemetry scraper, the observers and the summary; workers
report live snapshots and any stop they decide (an abort threshold, a breakpoint) over a queue,
and the coordinator stops them all. Their records reach the observers from the run directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import queue
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from surgelab.aio import run_async
from surgelab.files import os_error_line
from surgelab.load.phases import plan_phases
from surgelab.metrics.live import LiveSnapshot
from surgelab.metrics.rundir import write_run_info
from surgelab.runner.coordinator import Coordinator
from surgelab.runner.cpu import CpuWatch
from surgelab.runner.execution import Shard
from surgelab.runner.losses import WorkerLoss
from surgelab.runner.preflight import ready
from surgelab.runner.protocols import Observer
from surgelab.runner.run import RunResult, run_shard, with_salt
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND

__all__ = ["run_with_workers"]

_POLL_S = 0.1
_READY_TIMEOUT_S = 120.0  # a worker's interpreter start, imports and schedule


def _worker_main(
    data: dict[str, Any], run_dir: str, index: int, count: int, start: Any, go: Any, api_key: str | None,
    messages: Any, stop: Any, hurry: Any,
) -> None:  # fmt: skip
    """One worker process: its shard of the run, until done or told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    scenario = Scenario.model_validate(data)
    plans = plan_phases(scenario)  # the whole schedule, before the clock starts
    messages.put(("ready", index, None))
    if not go.wait(_READY_TIMEOUT_S):
        return
    if stop.is_set():  # interrupted while the workers started: nothing was sent, and that is not a loss
        messages.put(("done", index, {"reason": "interrupted before the start", "at_ns": 0, "cpu_s": 0.0}))
        return
    t0 = start.value
    cpu_start = time.process_time()

    async def main() -> None:
        stop_event, hurry_event = asyncio.Event(), asyncio.Event()

        async def watch() -> None:
            for shared, event in ((stop, stop_event), (hurry, hurry_event)):
                while not shared.is_set():
                    await asyncio.sleep(_POLL_S)
                event.set()

        watcher = asyncio.create_task(watch())
        ex, _ = await run_shard(
            scenario, Path(run_dir), plans, shard=Shard(index, count), t0=t0, api_key=api_key,
            on_tick=lambda snap: messages.put(("tick", index, asdict(snap))),
            on_stop=lambda reason: messages.put(("stop", index, reason)),
            stop_event=stop_event, hurry_event=hurry_event, scraper_wanted=False,
        )  # fmt: skip
        watcher.cancel()
        done = {"reason": ex.stop.reason, "at_ns": ex.stop.at_ns, "cpu_s": time.process_time() - cpu_start,
                "crashes": ex.crashes}
        messages.put(("done", index, done))

    try:
        run_async(main())
    except OSError as exc:  # its last records could not be written (a full disk): the coordinator says so, once
        messages.put(("done", index, {"reason": f"aborted: records cannot be written: {os_error_line(exc)}", "at_ns": None}))


async def _wait_ready(messages: Any, processes: list[Any]) -> None:
    ready, deadline = 0, time.monotonic() + _READY_TIMEOUT_S
    while ready < len(processes):
        try:
            kind, _, _ = messages.get_nowait()
            ready += kind == "ready"
        except queue.Empty:
            if time.monotonic() > deadline or any(not p.is_alive() for p in processes):
                for p in processes:
                    p.kill()
                raise RuntimeError("a worker process failed to start") from None
            await asyncio.sleep(0.02)


async def run_with_workers(
    scenario: Scenario,
    run_dir: Path,
    workers: int,
    *,
    api_key: str | None = None,
    on_tick: Callable[[LiveSnapshot], None] | None = None,
    handle_signals: bool = False,
    observers: Sequence[Observer] = (),
    start_delay_s: float = 0.1,
) -> RunResult:
    """Run ``scenario`` split over ``workers`` processes; the result is that of one run."""
    scenario = await ready(with_salt(scenario), api_key)
    with CpuWatch(workers) as cpu:
        co = Coordinator(scenario, run_dir, workers, on_tick=on_tick, observers=observers)
        ctx = mp.get_context("spawn")  # a clean interpreter per worker: no inherited event loop or sockets
        messages, stop, hurry, go, start = ctx.Queue(), ctx.Event(), ctx.Event(), ctx.Event(), ctx.Value("q", 0)
        data = scenario.model_dump(mode="json", by_alias=True)
        processes = [
            ctx.Process(
                target=_worker_main, args=(data, str(co.run_dir), k, workers, start, go, api_key, messages, stop, hurry),
                daemon=True,
            )
            for k in range(workers)
        ]
        for process in processes:
            process.start()
        co.info["worker_pids"] = [process.pid for process in processes]
        write_run_info(co.run_dir, co.info)
        latest: dict[int, LiveSnapshot] = {}
        done: dict[int, dict[str, Any]] = {}
        dead: set[int] = set()  # ended without saying it was done: killed, or crashed

        def watch_deaths() -> None:
            for k, process in enumerate(processes):
                if k in done or k in dead or process.is_alive() or process.exitcode == 0:
                    continue  # exit code 0: its "done" is on its way through the queue
                dead.add(k)
                co.lose(WorkerLoss(k, co.clock(), _exit_cause(process.exitcode)))

        # from here on, an interrupt is a stop (workers that see it before they start send nothing)
        with co.control(stop.set, hurry.set, handle_signals):
            try:
                await _wait_ready(messages, processes)
                # Every worker starts sending at the same instant, on the one monotonic clock of the machine.
                t0 = time.perf_counter_ns() + int(start_delay_s * SECOND)
                start.value = t0
                co.start(t0)
                go.set()
                while len(done) + len(dead) < workers:
                    watch_deaths()
                    try:
                        kind, index, payload = messages.get_nowait()
                    except queue.Empty:
                        if all(not p.is_alive() for p in processes) and messages.empty():
                            break  # every worker has ended; what they flushed is on disk
                        await asyncio.sleep(_POLL_S / 2)
                        continue
                    if kind == "tick":
                        latest[index] = LiveSnapshot(**payload)
                    elif kind == "stop":
                        co.request_stop(payload)
                    elif kind == "done":
                        done[index] = payload
                    co.tick(list(latest.values()))
            finally:
                stop.set()
                for process in processes:
                    await asyncio.to_thread(process.join, 30)
                    if process.is_alive():
                        process.kill()
                await co.stop_helpers()
        wall_ns = co.clock()
        co.tick(list(latest.values()), force=True)
        for k in range(workers):  # ended with exit code 0 but never said it was done
            if k not in done and k not in dead:
                co.losses.append(WorkerLoss(k, wall_ns, _exit_cause(processes[k].exitcode)))
        co.info["worker_cpu_s"] = [done[k].get("cpu_s") if k in done else None for k in range(workers)]
        return co.end(list(done.values()), wall_ns, cpu)


def _exit_cause(code: int | None) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"exit code {code} ({signal.Signals(-code).name})"
    return f"exit code {code}"
