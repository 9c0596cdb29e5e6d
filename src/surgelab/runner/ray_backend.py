"""The worker split on Ray, for load beyond one machine (``surgelab run --ray ADDRESS``).

One async actor per worker, spread over the cluster's nodes. Each sends its shard of the
schedule (``runner.execution.Shard``) on its own node's monotonic clock, started at one
agreed wall-clock instant; the offset between each node's wall clock and the
coordinator's is measured (half the round trip corrected) and recorded in ``run.json``
before the run starts, with the node, host and process of every actor.

Records come back while the run goes on: an actor's flushes are held in memory
(``HeldTables``) and the driver takes them every ``PULL_S`` as Arrow IPC bytes and writes
them as that worker's parts of the run directory. An actor that dies (its process killed,
its node lost) loses at most what it recorded since the last pull and flush; the driver
records that, and every planned request it never sent, as ``lost`` (``runner.losses``)
and goes on with the others, or stops them (``guards.worker_loss``). The stop, the live view,
the telemetry scraper, the observers and the summary are the coordinator's, as with worker
processes (``runner.coordinator``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from surgelab.load.phases import plan_phases
from surgelab.metrics.live import LiveSnapshot
from surgelab.metrics.rundir import write_run_info
from surgelab.metrics.store import HeldTables, RecordStore, table_from_bytes
from surgelab.ray_cluster import RayUnavailable, connect
from surgelab.runner.coordinator import Coordinator
from surgelab.runner.cpu import CpuWatch
from surgelab.runner.execution import Shard
from surgelab.runner.losses import WorkerLoss
from surgelab.runner.preflight import ready
from surgelab.runner.protocols import Observer
from surgelab.runner.run import RunResult, run_shard, with_salt
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND

__all__ = ["run_on_ray", "RayUnavailable", "PULL_S"]

PULL_S = 0.5  # how often the driver takes every actor's new records and live figures
_CALL_TIMEOUT_S = 30.0  # an actor that answers nothing for this long is taken for lost
_LATE_S = 60.0  # past the planned end plus grace, an actor still running is given up
_UNAVAILABLE_S = 10.0  # unreachable (ActorUnavailableError: maybe a network blip) this long is lost


class _ShardActor:
    """Runs one shard; ``take``, ``stop`` and ``clock`` answer while ``run`` is under way (async actor)."""

    def __init__(self) -> None:
        self._stop, self._hurry = asyncio.Event(), asyncio.Event()
        self._snapshot: dict[str, Any] | None = None
        self._held = HeldTables()
        self._stopped: str | None = None  # a stop this actor decided (an abort, a breakpoint), for its peers

    def clock(self) -> tuple[int, str, int, str]:
        """This node's wall clock, host, process and Ray node."""
        import ray  # this module imports without Ray; an actor runs only where Ray is

        return time.time_ns(), socket.gethostname(), os.getpid(), ray.get_runtime_context().get_node_id()

    async def run(self, data: dict[str, Any], index: int, count: int, start_wall_ns: int, api_key: str | None) -> dict[str, Any]:
        scenario = Scenario.model_validate(data)
        plans = plan_phases(scenario)
        cpu_start = time.process_time()
        t0 = time.perf_counter_ns() + (start_wall_ns - time.time_ns())  # this node's clock at the agreed instant
        with tempfile.TemporaryDirectory() as unused:  # records go to self._held, not to a directory
            ex, _ = await run_shard(
                scenario, Path(unused), plans, shard=Shard(index, count), t0=t0, api_key=api_key,
                on_tick=lambda snap: setattr(self, "_snapshot", asdict(snap)), stop_event=self._stop, hurry_event=self._hurry,
                on_stop=lambda reason: setattr(self, "_stopped", reason), scraper_wanted=False, store=self._held,
            )  # fmt: skip
        return {"reason": ex.stop.reason, "at_ns": ex.stop.at_ns, "cpu_s": time.process_time() - cpu_start,
                "crashes": ex.crashes}

    def take(self) -> tuple[dict[str, Any] | None, bytes | None, str | None]:
        """The latest live snapshot, every record flushed since the last call, and a stop it decided."""
        return self._snapshot, self._held.take(), self._stopped

    def stop(self) -> None:
        self._stop.set()

    def hurry(self) -> None:
        """No grace for what is in flight (a second interrupt)."""
        self._hurry.set()


@dataclass
class _Worker:
    """The driver's view of one actor."""

    index: int
    actor: Any
    store: RecordStore
    run_ref: Any = None
    snapshot: LiveSnapshot | None = None
    result: dict[str, Any] | None = None
    loss: WorkerLoss | None = None
    rows: int = 0
    bytes_back: int = 0
    unreachable_since: int | None = None  # run clock; the actor may still come back
    stopped: str | None = None  # a stop the actor decided (an abort threshold, a breakpoint)
    node: dict[str, Any] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.result is None and self.loss is None


async def _offset(actor: Any, pings: int = 5) -> dict[str, Any]:
    """The node's wall clock minus ours, from the ping with the shortest round trip."""
    best = None
    for _ in range(pings):
        sent = time.time_ns()
        remote_ns, host, pid, node = await actor.clock.remote()
        received = time.time_ns()
        rtt = received - sent
        if best is None or rtt < best[0]:
            best = (rtt, remote_ns - (sent + received) / 2, host, pid, node)
    assert best is not None, "at least one ping"
    rtt, offset, host, pid, node = best
    return {"host": host, "node_id": node, "pid": pid, "offset_ms": offset / 1e6, "rtt_ms": rtt / 1e6}


async def _call(ray: Any, ref: Any, timeout: float = _CALL_TIMEOUT_S) -> tuple[Any, str | None]:
    """An actor call's answer, or why there is none (the actor or its node is gone)."""
    try:
        return await asyncio.wait_for(ref, timeout), None
    except ray.exceptions.RayError as exc:
        return None, type(exc).__name__
    except asyncio.TimeoutError:
        return None, f"no answer in {timeout:g} s"


async def _pull(ray: Any, worker: _Worker) -> str | None:
    """Take ``worker``'s new records into the run directory and its snapshot; why it is gone, if it is."""
    answer, gone = await _call(ray, worker.actor.take.remote())
    if gone is not None:
        return gone
    snapshot, data, worker.stopped = answer
    if snapshot is not None:
        worker.snapshot = LiveSnapshot(**snapshot)
    if data is not None:
        table = table_from_bytes(data)
        await asyncio.to_thread(worker.store.write, table)
        worker.rows += table.num_rows
        worker.bytes_back += len(data)
    return None


async def run_on_ray(
    scenario: Scenario, run_dir: Path, workers: int, address: str = "auto", *, api_key: str | None = None,
    on_tick: Any = None, start_delay_s: float = 2.0, handle_signals: bool = False, observers: Sequence[Observer] = (),
) -> RunResult:  # fmt: skip
    """Run ``scenario`` split over ``workers`` Ray actors; ``address`` is a cluster, ``auto`` or ``local``."""
    ray = connect(address)
    actor_class = ray.remote(num_cpus=0, max_restarts=0)(_ShardActor)
    actors = [actor_class.options(max_concurrency=4, scheduling_strategy="SPREAD").remote() for _ in range(workers)]
    scenario = await ready(with_salt(scenario), api_key)
    with CpuWatch(workers) as cpu:
        co = Coordinator(scenario, run_dir, workers, on_tick=on_tick, observers=observers)
        await asyncio.gather(*(actor.clock.remote() for actor in actors))  # every actor up before any timing
        nodes = [await _offset(actor) for actor in actors]
        co.info["ray"] = {"address": address, "nodes": nodes}
        write_run_info(co.run_dir, co.info)  # the actors and their clock offsets, before anything can be lost
        pool = [_Worker(k, actor, RecordStore(co.run_dir, worker=k), node=nodes[k]) for k, actor in enumerate(actors)]
        start_wall = time.time_ns() + int(start_delay_s * SECOND)
        co.start(time.perf_counter_ns() + (start_wall - time.time_ns()))
        data = scenario.model_dump(mode="json", by_alias=True)
        for w in pool:  # each node starts at the agreed instant as its own wall clock reads it
            node_start = start_wall + int(w.node["offset_ms"] * 1e6)
            w.run_ref = w.actor.run.remote(data, w.index, workers, node_start, api_key)

        def tell_running(call: str) -> Callable[[], None]:
            def tell() -> None:
                for w in pool:
                    if w.running:
                        getattr(w.actor, call).remote()

            return tell

        grace = max(p.phase.load.grace for p in co.plans)
        give_up_ns = max(p.end_ns for p in co.plans) + int((grace + _LATE_S) * SECOND)
        with co.control(tell_running("stop"), tell_running("hurry"), handle_signals):
            try:
                await _follow(ray, pool, co, give_up_ns)
            finally:
                for w in pool:
                    ray.kill(w.actor, no_restart=True)
                await co.stop_helpers()
        wall_ns = co.clock()
        co.tick([w.snapshot for w in pool if w.snapshot is not None], force=True)
        co.info["ray"]["records_back"] = [
            {"rows": w.rows, "bytes": w.bytes_back, "actor_cpu_s": w.result["cpu_s"] if w.result else None} for w in pool
        ]
        return co.end([w.result for w in pool if w.result is not None], wall_ns, cpu)


async def _follow(ray: Any, pool: list[_Worker], co: Coordinator, give_up_ns: int) -> None:
    """Until every actor has finished or is lost: pull records and figures, notice deaths, tick.

    Every actor is asked at once, so one whose node went silent delays nobody else's records.
    """

    async def check(w: _Worker, now: int) -> None:
        ready, _ = ray.wait([w.run_ref], timeout=0)
        finished, gone = (await _call(ray, w.run_ref)) if ready else (None, None)
        if gone is None:
            gone = await _pull(ray, w)  # after the run ended, this takes its last flush
        if gone is None and finished is None and now > give_up_ns:
            gone = "still running long after the planned end"
        if gone == "ActorUnavailableError":  # unreachable, not known dead: wait a while before giving it up
            w.unreachable_since = now if w.unreachable_since is None else w.unreachable_since
            if now - w.unreachable_since < _UNAVAILABLE_S * SECOND:
                return
        elif gone is None:
            w.unreachable_since = None
        if gone is not None:
            w.loss = WorkerLoss(w.index, w.unreachable_since if w.unreachable_since is not None else now, gone)
            co.lose(w.loss)
        elif finished is not None:
            w.result = finished

    while any(w.running for w in pool):
        await asyncio.sleep(PULL_S)
        now = co.clock()
        await asyncio.gather(*(check(w, now) for w in pool if w.running))
        for w in pool:
            if w.stopped is not None:  # one actor's abort or breakpoint stops them all, as with worker processes
                co.request_stop(w.stopped)
                w.stopped = None
        co.tick([w.snapshot for w in pool if w.snapshot is not None])
