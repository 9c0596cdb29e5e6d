"""The run's wall-clock watchers: the live view's tick, and the times ``load.stops.StopRules`` judges."""

from __future__ import annotations

import asyncio

from surgelab.load.phases import PhasePlan
from surgelab.load.stops import THRESHOLD_EVERY_NS, step_ends
from surgelab.runner.execution import Execution
from surgelab.units import SECOND

__all__ = ["watch_thresholds", "watch_breakpoint"]

_TICK_S = 0.5


async def watch_thresholds(ex: Execution, warmup_end_ns: int) -> None:
    """Tick the live view twice a second; once a second, judge the abort thresholds."""
    every = round(THRESHOLD_EVERY_NS / SECOND / _TICK_S)
    ticks = 0
    while True:
        await asyncio.sleep(_TICK_S)
        ticks += 1
        ex.tick()
        if ticks % every == 0:
            ex.stops.check_thresholds(warmup_end_ns)


async def watch_breakpoint(ex: Execution, plan: PhasePlan) -> None:
    """At the end of every breakpoint step, let the rules judge it."""
    for step, end_ns in step_ends(plan):
        if not await ex.sleep_until(end_ns) or not ex.stops.end_step(plan, step):
            return
