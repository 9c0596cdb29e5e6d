"""Client-side routing between named targets: weighted, health-checked, with failover.

This is how a team rehearses a dual-active plan (say 80/20) against real endpoints: requests
are dealt to the targets by smooth weighted round robin (``load.split``, the simulator's split
too: 80/20 is exact over every 10 requests, live and simulated alike); a target is taken out after
``failures`` consecutive failed checks or requests, and its share goes to the healthy ones;
it comes back after ``recovery`` passing checks. Every switch is an event with its time, and
the requests lost around it (failed on a target between the first failure of the streak and
its removal, or in flight on it then) are counted.

Each target is checked on its own fixed cadence, a check starting every ``interval`` whatever
the last one did: a hung target's checks time out (``timeout``) and count as failures without
pushing its next check, or another target's, later (they used to run together and then sleep,
so one hung target stretched every target's period to ``interval + timeout``). A streak's first
failure is when the failing request was sent or the failing check started — when the target
was already failing, not when that was noticed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from surgelab.client.network import request_options
from surgelab.load.health import HealthState
from surgelab.load.split import SmoothSplit
from surgelab.scenario.model import Health, NamedTarget

__all__ = ["Router", "RouteEvent"]

@dataclass
class RouteEvent:
    t_s: float
    target: str
    event: str  # "down" or "up"
    reason: str
    first_failure_s: float | None = None  # down: the streak's first failing send or check start


@dataclass
class _State:
    health: HealthState
    sent: int = 0
    failed: int = 0
    lost: int = 0
    streak_requests: int = 0  # requests failed in the current streak: lost if it ends in removal
    rerouted: int = 0  # requests that came here because their own target was down
    switchovers: list[float] = field(default_factory=list)  # first failure → removal, seconds

    @property
    def up(self) -> bool:
        return self.health.up


class Router:
    def __init__(self, targets: list[NamedTarget], health: Health, failover: bool, clock: Callable[[], int]) -> None:
        self.targets = {t.name: t for t in targets}
        self.names = [t.name for t in targets]
        self.weights = [t.weight for t in targets]
        self.health, self.failover, self.clock = health, failover, clock
        self.state = {name: _State(HealthState(health.failures, health.recovery)) for name in self.names}
        self.events: list[RouteEvent] = []
        self._split = SmoothSplit(self.weights)  # deals requests among the targets up
        self._meant = SmoothSplit(self.weights)  # deals them among all: whose turn it was
        self._everyone = range(len(self.names))

    def pick(self, index: int) -> str:
        """The target of the run's ``index``-th request (picked in order, once each)."""
        meant = self._meant.pick(self._everyone)
        if meant is None:
            return self.names[0]  # no target weighs anything: the first takes it all
        if not self.failover:
            return self.names[meant]
        chosen = self._split.pick([i for i, n in enumerate(self.names) if self.state[n].up])
        if chosen is None:  # everything is down: the request fails where it was meant to go
            return self.names[meant]
        if chosen != meant and not self.state[self.names[meant]].up:
            self.state[self.names[chosen]].rerouted += 1
        return self.names[chosen]

    def _now(self) -> float:
        return self.clock() / 1e9

    def _failure(self, name: str, reason: str, began_s: float) -> None:
        state, now = self.state[name], self._now()
        if state.health.failed(now, began_s):
            state.lost += state.streak_requests
            state.streak_requests = 0
            state.switchovers.append(now - (state.health.streak_started_s or now))
            self.events.append(RouteEvent(now, name, "down", reason, state.health.first_failure_s))

    def _success(self, name: str, from_check: bool) -> None:
        state = self.state[name]
        if state.up:
            state.streak_requests = 0
        if state.health.passed(from_check):
            self.events.append(RouteEvent(self._now(), name, "up", f"{self.health.recovery} passing checks"))

    def observe(self, name: str, ok: bool, error: str | None = None, sent_s: float | None = None) -> None:
        """A request's outcome counts towards its target's health (``sent_s``: when it was sent)."""
        state = self.state[name]
        state.sent += 1
        if ok:
            if state.up:
                self._success(name, from_check=False)
            return
        state.failed += 1
        if state.up:
            state.streak_requests += 1  # lost only if this streak takes the target out
        else:
            state.lost += 1  # in flight when it was taken out
        self._failure(name, f"request failed: {(error or '')[:120]}", sent_s if sent_s is not None else self._now())

    async def check_forever(self) -> None:
        """Health checks of every target, each on its own cadence, until cancelled."""
        timeout = aiohttp.ClientTimeout(total=self.health.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await asyncio.gather(*(self._check_every(session, name) for name in self.names))

    async def _check_every(self, session: aiohttp.ClientSession, name: str) -> None:
        """A check of ``name`` starting every ``interval``; one that outlasted its interval (a timeout at
        or above it) is followed at once, so checks of one target never overlap nor fall behind."""
        next_s = self._now()
        while True:
            await self._check(session, name)
            next_s = max(next_s + self.health.interval, self._now())
            await asyncio.sleep(next_s - self._now())

    async def _check(self, session: aiohttp.ClientSession, name: str) -> None:
        target = self.targets[name]
        url = target.base_url + self.health.path
        began_s = self._now()
        try:
            async with session.get(url, **request_options(url, target.tls, target.proxy)) as response:
                await response.read()
                ok = response.status < 500
                reason = f"check: HTTP {response.status}"
        except (aiohttp.ClientError, OSError, TimeoutError, asyncio.TimeoutError) as exc:
            ok, reason = False, f"check: {type(exc).__name__}"
        if ok:
            self._success(name, from_check=True)
        else:
            self._failure(name, reason, began_s)

    def report(self) -> dict[str, Any]:
        """The summary's ``routing`` block."""
        total = sum(s.sent for s in self.state.values()) or 1
        return {
            "targets": {
                name: {
                    "weight": self.targets[name].weight, "requests": s.sent, "share": s.sent / total, "failed": s.failed,
                    "lost_around_failover": s.lost, "rerouted_here": s.rerouted,
                    "switchover_s": s.switchovers, "up_at_end": s.up,
                }
                for name, s in self.state.items()
            },  # fmt: skip
            "events": [e.__dict__ for e in self.events],
        }
