"""A pool of identical replicas at run time: starting, stopping, crashing, and its autoscaler.

A new replica is ``starting`` for the pool's cold start, then ``ready``. Scaling down takes
starting replicas first, then the ready ones holding least; a ready one *drains* (no new
requests, finishes what it holds) before it stops. A crash loses everything the replica
holds; after ``recovery`` it starts again (cold start included). Replica-seconds count from
creation to stop, whatever the state: that is what a cloud bills.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from surgelab.load.health import HealthState
from surgelab.sim.autoscaler import Decision, Hpa
from surgelab.sim.curve import CurveBackend
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.fastengine import FastEngineBackend, fast_eligible
from surgelab.sim.fleet import Pool
from surgelab.sim.loader import pool_profile
from surgelab.sim.replica import (
    DOWN,
    DRAINING,
    READY,
    STARTING,
    STOPPED,
    Backend,
    EngineBackend,
    Replica,
    ServiceBackend,
)
from surgelab.sim.request import SECOND

if TYPE_CHECKING:
    from surgelab.sim.regions import RegionRuntime
    from surgelab.sim.simulator import Simulator

__all__ = ["PoolRuntime", "crash", "restart"]


class PoolRuntime:
    def __init__(self, cfg: Pool, index: int, seed: int, fast: bool = True) -> None:
        self.cfg, self.index = cfg, index
        self.fast = fast  # engines stepped a run at a time (Engine.run), not one step per event
        self.name = cfg.name
        self.profile = pool_profile(cfg.profile) if cfg.profile else None
        self.rng = np.random.default_rng([seed, 40, index])
        self.replicas: list[Replica] = []
        self.hpa = Hpa(cfg.autoscale) if cfg.autoscale else None
        self.decisions: list[Decision] = []
        self.scheduled_min: int | None = None
        self.last_activity = 0
        self.latencies: list[float] = []  # E2E seconds finished since the last sync
        self._serial = 0
        self.cold_ns = round(cfg.cold_start * SECOND)
        self.region: RegionRuntime | None = None  # set by the simulator when the pool has a region

    # -- replicas ---------------------------------------------------------------------------

    @property
    def current(self) -> int:
        """Replicas the deployment asks for (starting, ready or restarting after a crash)."""
        return sum(1 for r in self.replicas if r.state in (STARTING, READY, DOWN))

    @property
    def ready(self) -> list[Replica]:
        return [r for r in self.replicas if r.state == READY]

    def _backend(self) -> Backend:
        if self.cfg.latency_curve is not None:
            return CurveBackend(self.cfg.latency_curve)
        if self.profile is not None:
            if self.fast and fast_eligible(self.profile, self.cfg.coalesce):
                return FastEngineBackend(self.profile, self.cfg.prefix_caching, self.cfg.coalesce)
            return EngineBackend(self.profile, self.cfg.prefix_caching, self.cfg.coalesce)
        return ServiceBackend(self.cfg.service_time, self.cfg.concurrency or 1, self.rng, self.cfg.per_output_token)

    def spawn(self, sim: Simulator, ready: bool) -> list[Event]:
        limit = self.cfg.concurrency or (1 if self.cfg.service_time is not None else None)
        rep = Replica(f"{self.name}-{self._serial}", self, self._backend(), limit, sim.now, ready)
        checks = sim.fleet.router.health_check
        if checks is not None:
            rep.health = HealthState(checks.failures, checks.recovery)
        self._serial += 1
        self.replicas.append(rep)
        events: list[Event] = []
        if not ready:
            rep.coming_up = Call(sim.now + self.cold_ns, Rank.LIFECYCLE, _ready, rep)
            events.append(rep.coming_up)
        events.extend(self._arm_mtbf(sim, rep))
        return events

    def _arm_mtbf(self, sim: Simulator, rep: Replica) -> list[Event]:
        if self.cfg.failures.mtbf is None or not sim.active():
            return []
        gap = round(float(self.rng.exponential(self.cfg.failures.mtbf)) * SECOND)
        return [Call(sim.now + gap, Rank.LIFECYCLE, crash, rep)]

    def scale_to(self, sim: Simulator, desired: int) -> list[Event]:
        events: list[Event] = []
        for _ in range(desired - self.current):
            events.extend(self.spawn(sim, ready=False))
        surplus = self.current - desired
        if surplus > 0:
            order = {DOWN: 0, STARTING: 1, READY: 2}
            victims = sorted((r for r in self.replicas if r.state in order),
                             key=lambda r: (order[r.state], len(r.outstanding), -r.started_ns))[:surplus]  # fmt: skip
            for rep in victims:
                if rep.state == READY and rep.outstanding:
                    rep.state = DRAINING
                else:
                    self.stop(sim, rep)
        return events

    def stop(self, sim: Simulator, rep: Replica) -> None:
        if rep.state != STOPPED:
            rep.state, rep.stopped_ns, rep.router_up = STOPPED, sim.now, False
            rep.reset(sim.now)

    # -- autoscaling ------------------------------------------------------------------------

    def min_replicas(self, sim: Simulator) -> int:
        auto = self.cfg.autoscale
        assert auto is not None
        floor = self.scheduled_min if self.scheduled_min is not None else auto.min
        if auto.forecast is not None:
            now_s = sim.now / SECOND
            rate = sim.traffic.planned_peak(now_s, now_s + auto.forecast.lead)
            floor = max(floor, math.ceil(rate / auto.forecast.per_replica - 1e-9))
        return min(floor, auto.max)

    def metric(self, sim: Simulator, period_s: float) -> tuple[list[float], bool]:
        """The autoscaler's metric: one value per ready replica, or one for the pool."""
        auto, ready = self.cfg.autoscale, self.ready
        assert auto is not None
        kind = auto.metric
        if kind == "rps":
            values = [r.dispatched / period_s for r in ready]
        elif kind == "in_flight":
            values = [float(len(r.outstanding)) for r in ready]
        elif kind == "busy":
            values = [min((r.busy_at(sim.now) - r.busy_mark) / (period_s * SECOND), 1.0) for r in ready]
        elif kind == "queue":
            waiting = len(sim.queue) + sum(r.backend.waiting for r in ready)
            return ([waiting / len(ready)] if ready else []), False
        else:
            lat = self.latencies
            return ([float(np.percentile(lat, 99))] if lat else []), False
        return values, True

    def sync(self, sim: Simulator, period_s: float) -> list[Event]:
        auto = self.cfg.autoscale
        assert auto is not None and self.hpa is not None
        current = self.current
        values, per_pod = self.metric(sim, period_s)
        for r in self.replicas:
            r.dispatched, r.busy_mark = 0, r.busy_at(sim.now)
        self.latencies = []
        now_s = sim.now / SECOND
        idle = sim.now - self.last_activity >= (auto.scale_to_zero.cooldown * SECOND if auto.scale_to_zero else 0)
        if auto.scale_to_zero and current and idle and not any(r.outstanding for r in self.replicas) and not sim.queue:
            desired = recommended = 0  # KEDA deactivation
        elif current == 0:
            return []
        else:
            not_ready = sum(1 for r in self.replicas if r.state in (STARTING, DOWN))
            recommended = self.hpa.recommend(current, values, not_ready, per_pod)
            desired = self.hpa.decide(now_s, current, recommended, max(self.min_replicas(sim), 1))
        metric = sum(values) / len(values) if values else None
        self.decisions.append(Decision(now_s, metric, current, recommended, desired))
        return self.scale_to(sim, desired)

    def wake(self, sim: Simulator) -> list[Event]:
        """KEDA activation: a request for a pool scaled to zero starts one replica."""
        if self.current == 0 and self.cfg.autoscale and self.cfg.autoscale.scale_to_zero:
            self.decisions.append(Decision(sim.now / SECOND, None, 0, 1, 1))
            return self.scale_to(sim, max(1, self.min_replicas(sim)))
        return []


def _ready(sim: Simulator, rep: Replica) -> Iterable[Event]:
    if rep.state != STARTING:
        return ()
    if rep.pool.region is not None and rep.pool.region.down:  # type: ignore[attr-defined]
        rep.state = DOWN  # nothing comes up in a region that is down; it starts when the region is back
        return ()
    rep.state = READY
    if rep.crash is not None:  # up again: what the router sent it since the crash failed until now
        rep.crash["ready_at_s"] = sim.now / SECOND
    if rep.crash is None or sim.fleet.router.health_check is None:
        rep.router_up = True
        if rep.health is not None:  # new, or back before the router noticed: no streak
            rep.health.reset()
        if rep.crash is not None:
            rep.crash["back_at_s"] = sim.now / SECOND
            rep.crash = None
    return sim.dispatch()


def crash(sim: Simulator, rep: Replica, region: str | None = None) -> Iterable[Event]:
    """The replica dies: it loses what it holds, and starts again after ``recovery``.

    With ``region`` (an outage of that region) it stays down until the region is back.
    """
    if rep.state not in (READY, DRAINING, STARTING) or not sim.active():
        return ()
    pool: PoolRuntime = rep.pool  # type: ignore[assignment]
    draining = rep.state == DRAINING
    if rep.state == STARTING and rep.coming_up is not None:
        rep.coming_up.cancelled = True  # its restart has a cold start of its own
    rep.state = DOWN
    rep.reset(sim.now)
    rep.crash = {"replica": rep.name, "pool": pool.name, "at_s": sim.now / SECOND, "detected_at_s": None,
                 "switch_over_s": None, "lost_in_flight": len(rep.outstanding), "lost_routed": 0}  # fmt: skip
    if region is not None:
        rep.crash["region"] = region
    sim.failures.append(rep.crash)
    if sim.fleet.router.health_check is None:
        rep.router_up = False
        rep.crash["detected_at_s"], rep.crash["switch_over_s"] = sim.now / SECOND, 0.0
    events: list[Event] = []
    why = "connection reset: replica crashed" if region is None else f"connection reset: region {region} is down"
    for req in list(rep.outstanding.values()):
        events.extend(sim.lose(req, why))
    if draining:
        pool.stop(sim, rep)
        return events
    if region is not None:
        return events
    at = sim.now + round(pool.cfg.failures.recovery * SECOND)
    return [*events, Call(at, Rank.LIFECYCLE, restart, rep)]


def restart(sim: Simulator, rep: Replica) -> Iterable[Event]:
    """A crashed replica starts again (its cold start, then ready), unless its region is still down."""
    if rep.state != DOWN or (rep.pool.region is not None and rep.pool.region.down):  # type: ignore[attr-defined]
        return ()
    pool: PoolRuntime = rep.pool  # type: ignore[assignment]
    rep.state = STARTING
    rep.coming_up = Call(sim.now + pool.cold_ns, Rank.LIFECYCLE, _ready, rep)
    return [rep.coming_up, *pool._arm_mtbf(sim, rep)]
