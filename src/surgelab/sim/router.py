"""Which replica gets a request, and what the router believes about replica health.

Policies (``router.policy``), over the replicas the router believes up and that have room:

- ``round_robin``: the next one in creation order after the last pick;
- ``least_outstanding``: the one holding fewest requests (ties: creation order);
- ``weighted``: pools by ``weight`` with smooth weighted round robin (``load.split``, the
  live router's split too), least outstanding inside the pool — 80/20 is exact over any
  10 picks;
- ``failover``: the first pool (primary) while the router believes any of its replicas up,
  else the next (backup); least outstanding inside it;
- ``nearest``: the pools of the nearest region (lowest ``rtt``; a pool without a region is
  at 0) while one of their replicas is up in the router's view and has room, least
  outstanding among them; else the next nearest (spill-over when full or down).

Without ``health_check`` the router learns of a crash at once. With it, the router's view of
each replica is a live router's (``load.health.HealthState``): a crashed replica keeps receiving
requests (each lost, as ``connection_error``) until ``failures`` consecutive failures — failed
checks *and* failed requests — take it out; ``switch_over_s`` = detection − crash. A restarted
replica returns after ``recovery`` consecutive passed checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from surgelab.load.split import SmoothSplit
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.fleet import Router
from surgelab.sim.replica import DOWN, READY, STOPPED, Replica
from surgelab.sim.request import SECOND

if TYPE_CHECKING:
    from surgelab.sim.pool import PoolRuntime
    from surgelab.sim.simulator import Simulator

__all__ = ["RouterRuntime", "health_check", "request_ended"]


def _least(replicas: Iterable[Replica]) -> Replica | None:
    """The routable replica holding fewest requests (``Replica.routable``, inlined: this is hot)."""
    best, fewest = None, 1 << 62
    for rep in replicas:
        held = len(rep.outstanding)
        if held < fewest and rep.router_up:  # only a replica holding fewer can be picked: test it alone
            state = rep.state
            if state == DOWN or (state == READY and (rep.limit is None or held < rep.limit)):
                best, fewest = rep, held
    return best


class RouterRuntime:
    def __init__(self, cfg: Router, pools: list[PoolRuntime]) -> None:
        self.cfg, self.pools = cfg, pools
        self._next = 0
        self._split = SmoothSplit([p.cfg.weight for p in pools])
        by_rtt: dict[float, list[PoolRuntime]] = {}
        for pool in pools:
            by_rtt.setdefault(pool.region.cfg.rtt if pool.region is not None else 0.0, []).append(pool)
        self._tiers = [by_rtt[rtt] for rtt in sorted(by_rtt)]  # nearest first

    def pick(self) -> Replica | None:
        policy = self.cfg.policy
        if policy == "least_outstanding":
            if len(self.pools) == 1:
                return _least(self.pools[0].replicas)
            return _least(r for p in self.pools for r in p.replicas)
        if policy == "round_robin":
            everyone = [r for p in self.pools for r in p.replicas]
            n = len(everyone)
            for k in range(n):
                rep = everyone[(self._next + k) % n]
                if rep.routable():
                    self._next = (self._next + k + 1) % n
                    return rep
            return None
        if policy == "nearest":
            for tier in self._tiers:
                nearest = _least(r for p in tier for r in p.replicas)
                if nearest is not None:
                    return nearest
            return None
        if policy == "failover":
            for pool in self.pools:
                if any(r.router_up for r in pool.replicas):
                    return _least(pool.replicas)
            return None
        return self._weighted()

    def _weighted(self) -> Replica | None:
        live = [i for i, p in enumerate(self.pools) if p.cfg.weight > 0 and any(r.routable() for r in p.replicas)]
        best = self._split.pick(live)
        return None if best is None else _least(self.pools[best].replicas)


def health_check(sim: Simulator) -> Iterable[Event]:
    """One round of checks on every replica; re-arms itself while the run has work."""
    cfg = sim.fleet.router.health_check
    assert cfg is not None
    now_s = sim.now / SECOND
    for pool in sim.pools:
        for rep in pool.replicas:
            if rep.state != STOPPED:
                _verdict(sim, rep, rep.state == READY, True, now_s)
    events: list[Event] = list(sim.dispatch())
    if sim.active():
        events.append(Call(sim.now + round(cfg.interval * SECOND), Rank.CONTROL, health_check))
    return events


def request_ended(sim: Simulator, rep: Replica, ok: bool, sent_ns: int | None) -> None:
    """A request sent to ``rep`` ended: it counts towards the router's view of its health, as a live router's."""
    _verdict(sim, rep, ok, False, (sent_ns if sent_ns is not None else sim.now) / SECOND)


def _verdict(sim: Simulator, rep: Replica, ok: bool, from_check: bool, began_s: float) -> None:
    """A check's or a request's verdict on ``rep`` through the shared ``HealthState``: out, or back."""
    health = rep.health
    assert health is not None
    now_s = sim.now / SECOND
    if ok:
        if health.passed(from_check):
            rep.router_up = True
            if rep.crash is not None:
                rep.crash["back_at_s"] = now_s
                rep.crash = None
    elif health.failed(now_s, began_s):
        rep.router_up = False
        if rep.crash is not None and rep.crash["detected_at_s"] is None:
            rep.crash["detected_at_s"] = now_s
            rep.crash["switch_over_s"] = now_s - rep.crash["at_s"]
