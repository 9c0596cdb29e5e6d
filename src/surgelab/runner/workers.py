"""Several worker processes for one run: each its own event loop and connection pool.

Every worker builds the same schedule from the same seed and sends its share
(``runner.execution.Shard``); all use one monotonic clock origin, so their records merge
into exactly the single-process run. The coordinator owns the terminal, the signals, the
telemetry scraper and the summary; workers report live snapshots and any stop they decide
(an abort threshold, a breakpoint) over a queue, and the coordinator stops them all.
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
from surgelab.metrics.live import LiveSnapshot, merge_snapshots
from surgelab.metrics.rundir import write_run_info
from surgelab.runner.cpu import CpuWatch
from surgelab.runner.execution import Shard
from surgelab.runner.interrupts import Interrupts
from surgelab.runner.losses import WorkerLoss, account_losses
from surgelab.runner.preflight import ready
from surgelab.runner.protocols import Observer
from surgelab.runner.run import RunResult, finish, prepare, run_shard, telemetry_scraper, with_salt
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
        done = {"reason": ex.stop.reason, "at_ns": ex.stop.at_ns, "cpu_s": time.process_time() - cpu_start}
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
        run_dir, plans, info = prepare(scenario, run_dir, workers)
        info["workers"] = workers
        ctx = mp.get_context("spawn")  # a clean interpreter per worker: no inherited event loop or sockets
        messages, stop, hurry, go, start = ctx.Queue(), ctx.Event(), ctx.Event(), ctx.Event(), ctx.Value("q", 0)
        data = scenario.model_dump(mode="json", by_alias=True)
        processes = [
            ctx.Process(
                target=_worker_main, args=(data, str(run_dir), k, workers, start, go, api_key, messages, stop, hurry), daemon=True
            )
            for k in range(workers)
        ]
        for process in processes:
            process.start()
        info["worker_pids"] = [process.pid for process in processes]
        write_run_info(run_dir, info)
        reason: str | None = None
        stop_at: int | None = None
        t0 = time.perf_counter_ns()  # until the workers are ready: a stop then is at 0

        def request_stop(why: str) -> None:
            nonlocal reason, stop_at
            if reason is None:
                reason, stop_at = why, max(time.perf_counter_ns() - t0, 0)
            stop.set()

        # from here on, an interrupt is a stop (workers that see it before they start send nothing)
        interrupts = Interrupts(scenario, request_stop, hurry.set, enabled=handle_signals).install()
        await _wait_ready(messages, processes)
        driver_cpu = time.process_time()  # from the start, as the workers count theirs
        # Every worker starts sending at the same instant, on the one monotonic clock of the machine.
        t0 = time.perf_counter_ns() + int(start_delay_s * SECOND)
        start.value = t0
        go.set()
        scraper = telemetry_scraper(scenario, run_dir, lambda: time.perf_counter_ns() - t0)
        scrape_task = asyncio.create_task(scraper.run()) if scraper is not None else None
        latest: dict[int, LiveSnapshot] = {}
        done: dict[int, dict[str, Any]] = {}
        dead: dict[int, WorkerLoss] = {}  # ended without saying it was done: killed, or crashed
        last_tick = 0.0

        def watch_deaths() -> None:
            for k, process in enumerate(processes):
                if k in done or k in dead or process.is_alive() or process.exitcode == 0:
                    continue  # exit code 0: its "done" is on its way through the queue
                dead[k] = WorkerLoss(k, time.perf_counter_ns() - t0, _exit_cause(process.exitcode))
                if scenario.guards.worker_loss == "stop":
                    request_stop(f"stopped: worker {k} died at {dead[k].died_at_ns / SECOND:.1f} s")

        try:
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
                    request_stop(payload)
                elif kind == "done":
                    done[index] = payload
                if latest and time.monotonic() - last_tick >= 0.5:
                    last_tick = time.monotonic()
                    snapshot = merge_snapshots(list(latest.values()))
                    if on_tick is not None:
                        on_tick(snapshot)
                    for observer in observers:
                        observer.update(snapshot)
        finally:
            interrupts.remove()
            stop.set()
            for process in processes:
                await asyncio.to_thread(process.join, 30)
                if process.is_alive():
                    process.kill()
            if scrape_task is not None:
                scrape_task.cancel()
                await asyncio.gather(scrape_task, return_exceptions=True)
        wall_ns = time.perf_counter_ns() - t0
        for k in range(workers):  # ended with exit code 0 but never said it was done
            if k not in done and k not in dead:
                dead[k] = WorkerLoss(k, wall_ns, _exit_cause(processes[k].exitcode))
        if reason is None:
            reasons = [d["reason"] for d in done.values() if d["reason"] != "completed"]
            reason = reasons[0] if reasons else "completed"
            stops = [d["at_ns"] for d in done.values() if d["at_ns"] is not None]
            stop_at = min(stops) if stops else None
        info["driver_cpu_s"] = time.process_time() - driver_cpu  # this process's, from the start; the workers' below
        info["worker_cpu_s"] = [done[k].get("cpu_s") if k in done else None for k in range(workers)]
        if dead:
            reason = account_losses(scenario, plans, run_dir, info, list(dead.values()), workers, reason, stop_at)
        return finish(scenario, run_dir, info, reason, stop_at, wall_ns, cpu)


def _exit_cause(code: int | None) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"exit code {code} ({signal.Signals(-code).name})"
    return f"exit code {code}"
