"""Client-side routing between named targets: weighted, health-checked, with failover.

This is how a team rehearses a dual-active plan (say 80/20) against real endpoints: each
request's target is drawn from the weights with the run's seed; a target is taken out after
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
from surgelab.scenario.model import Health, NamedTarget

__all__ = ["Router", "RouteEvent"]

_MASK = (1 << 64) - 1


def _uniform(seed: int, index: int) -> float:
    """A deterministic uniform draw per request (splitmix64), the same in every worker."""
    z = (seed * 0xBF58476D1CE4E5B9 + index * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53)


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
    def __init__(self, targets: list[NamedTarget], seed: int, health: Health, failover: bool, clock: Callable[[], int]) -> None:
        self.targets = {t.name: t for t in targets}
        self.names = [t.name for t in targets]
        self.weights = [t.weight for t in targets]
        self.seed, self.health, self.failover, self.clock = seed, health, failover, clock
        self.state = {name: _State(HealthState(health.failures, health.recovery)) for name in self.names}
        self.events: list[RouteEvent] = []

    def _draw(self, u: float, names: list[str]) -> str:
        weights = [self.targets[n].weight for n in names]
        total = sum(weights)
        if total <= 0:
            return names[0]
        acc = 0.0
        for name, weight in zip(names, weights):
            acc += weight / total
            if u < acc:
                return name
        return names[-1]

    def pick(self, index: int) -> str:
        u = _uniform(self.seed, index)
        chosen = self._draw(u, self.names)
        if self.state[chosen].up or not self.failover:
            return chosen
        healthy = [n for n in self.names if self.state[n].up and self.targets[n].weight > 0]
        if not healthy:
            return chosen  # everything is down: the request fails where it was meant to go
        other = self._draw(u, healthy)
        self.state[other].rerouted += 1
        return other

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
