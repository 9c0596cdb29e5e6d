"""The fleet timeline (``fleet.parquet``): gauges and counters sampled every interval.

One row per pool per sample. Pool columns: ``replicas`` (asked for: starting, ready or
restarting), ``ready``, ``in_flight`` (requests held by its replicas), ``engine_waiting``
(inside its engines, not yet running), ``busy`` (fraction of the interval its ready replicas
spent stepping: the simulated "GPU utilisation"). Fleet columns, the same on every pool's
row: ``queue_depth`` (the admission queue), and over the interval ``arrivals``, ``shed``,
``cache_hits``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.replica import READY, STOPPED
from surgelab.sim.request import SECOND

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["Timeline", "TIMELINE_SCHEMA"]

TIMELINE_SCHEMA = pa.schema([
    ("t_s", pa.float64()), ("pool", pa.string()), ("replicas", pa.int32()), ("ready", pa.int32()),
    ("in_flight", pa.int32()), ("engine_waiting", pa.int32()), ("busy", pa.float64()), ("queue_depth", pa.int32()),
    ("arrivals", pa.int64()), ("shed", pa.int64()), ("cache_hits", pa.int64()),
])  # fmt: skip


class Timeline:
    def __init__(self, interval_s: float) -> None:
        self.interval_ns = round(interval_s * SECOND)
        self.rows: dict[str, list] = {f.name: [] for f in TIMELINE_SCHEMA}
        self.arrivals = self.shed = self.cache_hits = 0
        self._busy_mark: dict[int, int] = {}

    def sample(self, sim: Simulator) -> Iterable[Event]:
        rows, t_s = self.rows, sim.now / SECOND
        for pool in sim.pools:
            live = [r for r in pool.replicas if r.state != STOPPED]
            ready = [r for r in live if r.state == READY]
            busy = 0
            for r in pool.replicas:
                now_busy = r.busy_at(sim.now)
                busy += now_busy - self._busy_mark.get(id(r), now_busy if r.started_ns < sim.now else 0)
                self._busy_mark[id(r)] = now_busy
            span = self.interval_ns * max(len(ready), 1)
            rows["t_s"].append(t_s)
            rows["pool"].append(pool.name)
            rows["replicas"].append(pool.current)
            rows["ready"].append(len(ready))
            rows["in_flight"].append(sum(len(r.outstanding) for r in live))
            rows["engine_waiting"].append(sum(r.backend.waiting for r in live))
            rows["busy"].append(min(busy / span, 1.0) if sim.now else 0.0)
            rows["queue_depth"].append(len(sim.queue))
            rows["arrivals"].append(self.arrivals)
            rows["shed"].append(self.shed)
            rows["cache_hits"].append(self.cache_hits)
        self.arrivals = self.shed = self.cache_hits = 0
        if sim.active() or any(r.outstanding for p in sim.pools for r in p.replicas):
            return [Call(sim.now + self.interval_ns, Rank.SAMPLE, self.sample)]
        return ()

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.rows, schema=TIMELINE_SCHEMA)
