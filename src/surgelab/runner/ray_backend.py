"""The worker split on Ray, for load beyond one machine (``surgelab run --ray ADDRESS``).

One async actor per worker, spread over the cluster's nodes. Each sends its shard of the
schedule (``runner.execution.Shard``) on its own node's monotonic clock, started at one
agreed wall-clock instant; the offset between each node's wall clock and the
coordinator's is measured (half the round trip corrected) and recorded in ``run.json``.
Records travel back as Arrow tables when a worker ends and are merged like local workers'.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from surgelab.load.phases import plan_phases
from surgelab.metrics.live import LiveSnapshot, merge_snapshots
from surgelab.metrics.record import RECORD_SCHEMA
from surgelab.metrics.store import RecordStore, read_records
from surgelab.runner.cpu import CpuWatch
from surgelab.runner.execution import Shard
from surgelab.runner.preflight import ready
from surgelab.runner.run import RunResult, finish, prepare, run_shard, with_salt
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND

__all__ = ["run_on_ray", "RayUnavailable"]


class RayUnavailable(RuntimeError):
    pass


class _ShardActor:
    """Runs one shard; ``stop`` and ``clock`` answer while ``run`` is under way (async actor)."""

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._snapshot: dict[str, Any] | None = None

    def clock(self) -> tuple[int, str]:
        return time.time_ns(), socket.gethostname()

    async def run(self, data: dict[str, Any], index: int, count: int, start_wall_ns: int, api_key: str | None) -> dict[str, Any]:
        scenario = Scenario.model_validate(data)
        plans = plan_phases(scenario)
        t0 = time.perf_counter_ns() + (start_wall_ns - time.time_ns())  # this node's clock at the agreed instant
        with tempfile.TemporaryDirectory() as tmp:
            ex, _ = await run_shard(
                scenario, Path(tmp), plans, shard=Shard(index, count), t0=t0, api_key=api_key,
                on_tick=lambda snap: setattr(self, "_snapshot", asdict(snap)), stop_event=self._stop, scraper_wanted=False,
            )  # fmt: skip
            ex.store.finalize()
            table = read_records(tmp)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, RECORD_SCHEMA) as writer:
            writer.write_table(table)
        return {"records": sink.getvalue().to_pybytes(), "reason": ex.stop.reason, "at_ns": ex.stop.at_ns}

    def stop(self) -> None:
        self._stop.set()

    def snapshot(self) -> dict[str, Any] | None:
        return self._snapshot


async def _offset(actor: Any, pings: int = 5) -> dict[str, Any]:
    """The node's wall clock minus ours, from the ping with the shortest round trip."""
    best = None
    for _ in range(pings):
        sent = time.time_ns()
        remote_ns, host = await actor.clock.remote()
        received = time.time_ns()
        rtt = received - sent
        if best is None or rtt < best[0]:
            best = (rtt, remote_ns - (sent + received) / 2, host)
    rtt, offset, host = best
    return {"host": host, "offset_ms": offset / 1e6, "rtt_ms": rtt / 1e6}


def _connect(address: str) -> Any:
    try:
        import ray  # optional: only with --ray (pip install 'surgelab[ray]')
    except ImportError:
        raise RayUnavailable("--ray needs Ray: pip install 'surgelab[ray]'") from None
    if not ray.is_initialized():
        if address == "local":
            ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        else:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    return ray


async def run_on_ray(
    scenario: Scenario, run_dir: Path, workers: int, address: str = "auto", *, api_key: str | None = None,
    on_tick: Any = None, start_delay_s: float = 2.0,
) -> RunResult:  # fmt: skip
    """Run ``scenario`` split over ``workers`` Ray actors; ``address`` is a cluster, ``auto`` or ``local``."""
    ray = _connect(address)
    actor_class = ray.remote(num_cpus=0)(_ShardActor)
    actors = [actor_class.options(max_concurrency=4, scheduling_strategy="SPREAD").remote() for _ in range(workers)]
    scenario = await ready(with_salt(scenario), api_key)
    with CpuWatch(workers) as cpu:
        run_dir, _, info = prepare(scenario, run_dir, workers)
        await asyncio.gather(*(actor.clock.remote() for actor in actors))  # every actor up before any timing
        offsets = [await _offset(actor) for actor in actors]
        start_wall = time.time_ns() + int(start_delay_s * SECOND)
        t0 = time.perf_counter_ns() + (start_wall - time.time_ns())
        info.update(workers=workers, ray={"address": address, "nodes": offsets})
        data = scenario.model_dump(mode="json", by_alias=True)
        pending = [actor.run.remote(data, k, workers, start_wall, api_key) for k, actor in enumerate(actors)]
        results: list[dict[str, Any]] = []
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
                results += [await ref for ref in done]
                if on_tick is not None and pending:
                    snaps = [s for s in ray.get([a.snapshot.remote() for a in actors]) if s]
                    if snaps:
                        on_tick(merge_snapshots([LiveSnapshot(**s) for s in snaps]))
        except (KeyboardInterrupt, asyncio.CancelledError):
            for actor in actors:
                actor.stop.remote()
            results += ray.get(pending)
            raise
        for k, result in enumerate(results):
            table = pa.ipc.open_stream(result["records"]).read_all()
            RecordStore(run_dir, worker=k).write(table)
        reasons = [r["reason"] for r in results if r["reason"] != "completed"]
        stops = [r["at_ns"] for r in results if r["at_ns"] is not None]
        reason, stop_at = (reasons[0] if reasons else "completed"), (min(stops) if stops else None)
        return finish(scenario, run_dir, info, reason, stop_at, time.perf_counter_ns() - t0, cpu)
