"""Watchers that may stop a run: abort thresholds, breakpoint steps, and the live view's tick."""

from __future__ import annotations

import asyncio

from surgelab.load.phases import PhasePlan
from surgelab.runner.execution import Execution
from surgelab.scenario.shapes import Breakpoint
from surgelab.units import SECOND

__all__ = ["watch_thresholds", "watch_breakpoint"]

_MIN_SAMPLES = 10  # an abort needs this many finished requests behind it


async def watch_thresholds(ex: Execution, warmup_end_ns: int) -> None:
    """Tick the live view twice a second; once a second, stop if an abort threshold fails."""
    abort = [t for t in ex.scenario.thresholds if t.abort_on_fail]
    ticks = 0
    while True:
        await asyncio.sleep(0.5)
        ticks += 1
        ex.tick()
        total = ex.live.total
        if not abort or ticks % 2 or ex.clock() < warmup_end_ns or total.ok + total.failed < _MIN_SAMPLES:
            continue
        for threshold in abort:
            value = total.value(threshold)
            if value is not None and not threshold.passes(value):
                ex.request_stop(f"aborted: threshold {threshold.expr!r} failed")
                break


async def watch_breakpoint(ex: Execution, plan: PhasePlan) -> None:
    """At the end of every step, stop the run if a stop condition held over that step."""
    shape = plan.phase.load.shape
    assert isinstance(shape, Breakpoint)
    unit = "req/s" if plan.phase.load.mode == "open" else "users"
    step = 0
    while True:
        boundary = plan.start_ns + int((step + 1) * shape.hold * SECOND)
        if boundary > plan.end_ns or not await ex.sleep_until(boundary):
            return
        level = shape.start + shape.step * step
        window = ex.live.window(plan.phase.name)
        for condition in shape.stop_when:
            value = window.value(condition)
            if value is not None and condition.passes(value):
                ex.request_stop(f"breakpoint: {condition.expr!r} held at {level:g} {unit} (step {step + 1})")
                return
        ex.live.restart_window(plan.phase.name)
        step += 1
