"""Regions at run time: the network between the clients and a pool, and region outages.

A request sent to a pool in a region travels half its round trip to reach the replica and
half back with every byte of the answer: the replica sees it ``out`` after the client sent
it, and the client sees the headers, each token and the end ``back`` after the replica
produced them, so TTFT and E2E carry the whole round trip and the gaps between tokens none.
Each request's round trip is ``rtt`` plus a draw uniform in ``[-jitter, +jitter]``, a hash of
the fleet's seed, the region and the request's id: the same request gets the same delay
whatever order events run in (the fast and the reference engine paths agree). The response
cache and the admission queue sit with the router, on the clients' side.

An outage takes every replica of the region's pools down at ``at`` (each one lost as a
crash loses it: what it holds fails ``connection_error``), keeps them down — a replica
whose cold start ends inside the outage does not come up — and starts them all again
(cold start included) after ``duration``. The router learns of it as of any crash: at
once, or through its health checks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.fleet import Region
from surgelab.sim.pool import PoolRuntime, crash, restart
from surgelab.sim.replica import DOWN, DRAINING, READY, STARTING
from surgelab.sim.request import SECOND

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["RegionRuntime", "outage_events"]


class RegionRuntime:
    def __init__(self, cfg: Region, seed: int) -> None:
        self.cfg, self.name = cfg, cfg.name
        self.rtt_ns, self.jitter_ns = round(cfg.rtt * SECOND), round(cfg.jitter * SECOND)
        self.pools: list[PoolRuntime] = []
        self.down = False
        self._salt = f"{seed}\x00{cfg.name}\x00".encode()

    @property
    def delayed(self) -> bool:
        return self.rtt_ns > 0

    def delays(self, rid: str) -> tuple[int, int]:
        """(there, back) in ns for one request: its round trip, split in two halves."""
        rtt = self.rtt_ns
        if self.jitter_ns:
            digest = hashlib.blake2b(self._salt + rid.encode(), digest_size=8).digest()
            u = int.from_bytes(digest, "little") / 2**64  # uniform in [0, 1)
            rtt += round(self.jitter_ns * (2 * u - 1))
        there = rtt // 2
        return there, rtt - there


def outage_events(region: RegionRuntime) -> list[Event]:
    return [
        e
        for o in region.cfg.outages
        for e in (
            Call(round(o.at * SECOND), Rank.LIFECYCLE, _region_down, region),
            Call(round((o.at + o.duration) * SECOND), Rank.LIFECYCLE, _region_up, region),
        )
    ]


def _region_down(sim: Simulator, region: RegionRuntime) -> Iterable[Event]:
    region.down = True
    events: list[Event] = []
    for pool in region.pools:
        for rep in pool.replicas:
            if rep.state in (READY, DRAINING, STARTING):
                events.extend(crash(sim, rep, region=region.name))
    return events


def _region_up(sim: Simulator, region: RegionRuntime) -> Iterable[Event]:
    region.down = False
    events: list[Event] = []
    for pool in region.pools:
        for rep in pool.replicas:
            if rep.state == DOWN:
                events.extend(restart(sim, rep))
    return events
