"""The run's stop rules (``load.stops.StopRules``) on the simulator's virtual clock.

The same rules a measured run obeys, at the same moments: abort thresholds judged once a
second, breakpoint steps at each step's end, the abort guard on every recorded request. After a
stop nothing more is sent; the requests under way get ``load.grace``, as they would from the
runner, and those still unanswered then are recorded as cancelled, so totals reconcile.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from surgelab.load.phases import PhasePlan
from surgelab.load.stops import THRESHOLD_EVERY_NS, StopRules, breakpoints, grace_error, step_ends
from surgelab.metrics.live import LiveStats
from surgelab.metrics.record import State
from surgelab.sim.events import Call, Event, Rank
from surgelab.sim.request import SECOND

if TYPE_CHECKING:
    from surgelab.sim.simulator import Simulator

__all__ = ["RunOver", "SimStops"]


class RunOver(Exception):
    """Raised once a stopped simulation has nothing left under way: the run ends there."""


class SimStops:
    """What the simulator keeps for its stop rules: the rules, the live figures they read, the stop."""

    def __init__(self, sim: Simulator, plans: list[PhasePlan]) -> None:
        scenario = sim.scenario
        self.plans = plans
        self.live = LiveStats(max(p.end_ns for p in plans) / SECOND, lambda _t: "")
        self.rules = StopRules(scenario, self.live, self._stop, lambda: sim.now)
        self.feed_live = StopRules.need_live(scenario, plans)  # else no rule reads them: not kept
        self.grace_s = max(p.phase.load.grace for p in plans)
        self.warmup_end_ns = min(p.warmup_end_ns for p in plans)
        self.reason = ""
        self.at_ns: int | None = None
        self._sim = sim

    def watching(self, record):
        """``record``, then the rules' look at what was recorded."""
        sim, observe = self._sim, self.rules.observe
        on_done = self.live.on_done if self.feed_live else None

        def recorded(meta, out) -> None:
            record(meta, out)
            if on_done is not None:
                on_done(meta, out, sim.now)
            observe(meta, out)

        return recorded

    def events(self) -> list[Event]:
        """The moments the rules are judged at."""
        events: list[Event] = []
        if self.rules.abort:
            events.append(Call(THRESHOLD_EVERY_NS, Rank.CONTROL, _judge_thresholds, self))
        for plan in breakpoints(self.plans):
            events.extend(_next_step(self, plan, step_ends(plan)))
        return events

    def _stop(self, reason: str) -> None:
        sim = self._sim
        self.reason, self.at_ns = reason, sim.now
        sim.traffic.stopped = True
        sim.push(Call(sim.now + round(self.grace_s * SECOND), Rank.CONTROL, _grace_over, self))
        self.over_if_idle()

    def over_if_idle(self) -> None:
        if self.reason and not self._sim.open:
            raise RunOver


def _judge_thresholds(sim: Simulator, stops: SimStops) -> Iterable[Event]:
    stops.rules.check_thresholds(stops.warmup_end_ns)
    return (Call(sim.now + THRESHOLD_EVERY_NS, Rank.CONTROL, _judge_thresholds, stops),) if sim.active() else ()


def _next_step(stops: SimStops, plan: PhasePlan, ends: Iterator[tuple[int, int]]) -> Iterable[Event]:
    step_end = next(ends, None)
    if step_end is None:
        return ()
    return (Call(step_end[1], Rank.CONTROL, _end_step, stops, plan, step_end[0], ends),)


def _end_step(sim: Simulator, stops: SimStops, plan: PhasePlan, step: int, ends) -> Iterable[Event]:
    if stops.reason or not stops.rules.end_step(plan, step):
        return ()
    return _next_step(stops, plan, ends)


def _grace_over(sim: Simulator, stops: SimStops) -> Iterable[Event]:
    """The grace after a stop has run out: what is still under way is cancelled, and the run ends."""
    error = grace_error(stops.grace_s, stops.reason)
    for req in list(sim.open):
        req.done = True
        req.outcome.fail(State.CANCELLED, error, sim.now)
        sim.record(req.meta, req.outcome)
    sim.open.clear()
    raise RunOver
