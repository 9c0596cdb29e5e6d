"""When a run stops early, whatever clock drives it: the abort guard, abort thresholds, breakpoint steps.

One set of rules for ``surgelab run`` (wall time, ``runner.monitors`` calls it) and ``surgelab
simulate`` (virtual time, events of ``sim.simulator``): the driver feeds every recorded request
to ``observe`` (and to the ``LiveStats`` the rules read), calls ``check_thresholds`` once a
second and ``end_step`` at each breakpoint step's end (``step_ends``). The first rule that holds
calls ``stop`` once, with the reason ``run.json`` and the summary report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from surgelab.load.guards import AbortGuard
from surgelab.load.phases import PhasePlan
from surgelab.metrics.live import LiveSnapshot, LiveStats
from surgelab.metrics.record import Outcome
from surgelab.metrics.store import RecordMeta
from surgelab.scenario.model import Scenario
from surgelab.scenario.shapes import StopSteps
from surgelab.units import SECOND

__all__ = ["StopRules", "THRESHOLD_EVERY_NS", "breakpoints", "grace_error", "step_ends"]

THRESHOLD_EVERY_NS = SECOND  # abort thresholds are judged this often
_MIN_SAMPLES = 10  # an abort threshold needs this many finished requests behind it


def grace_error(grace_s: float, reason: str) -> str:
    """The error of a request still unanswered when a stop's grace ran out."""
    return f"no answer within the grace period ({grace_s:g}s after the run stopped: {reason}, load.grace)"


class StopRules:
    """The scenario's rules for ending a run early; ``stop`` hears the first that holds, once."""

    def __init__(
        self, scenario: Scenario, live: LiveStats, stop: Callable[[str], None], clock: Callable[[], int]
    ) -> None:
        self.live, self.clock, self._stop = live, clock, stop
        self.reason: str | None = None
        self.guard = AbortGuard(scenario.guards.abort, scenario.slo, self.stop, clock)
        self.abort = [t for t in scenario.thresholds if t.abort_on_fail]

    def stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            self._stop(reason)

    # -- every request, as an Observer --------------------------------------------------------

    def observe(self, meta: RecordMeta, out: Outcome) -> None:
        self.guard.observe(meta, out)

    def update(self, snapshot: LiveSnapshot) -> None:
        pass

    @staticmethod
    def need_live(scenario: Scenario, plans: list[PhasePlan]) -> bool:
        """Whether any rule reads the live figures (a simulation keeps none otherwise)."""
        return any(t.abort_on_fail for t in scenario.thresholds) or any(breakpoints(plans))

    # -- once a second: abort thresholds ------------------------------------------------------

    def check_thresholds(self, warmup_end_ns: int) -> None:
        """Stop if an abort threshold fails on the measured requests so far (after the warm-up)."""
        total = self.live.total
        if not self.abort or self.clock() < warmup_end_ns or total.ok + total.failed < _MIN_SAMPLES:
            return
        for threshold in self.abort:
            value = total.value(threshold)
            if value is not None and not threshold.passes(value):
                self.stop(f"aborted: threshold {threshold.expr!r} failed")
                return

    # -- breakpoint steps ---------------------------------------------------------------------

    def end_step(self, plan: PhasePlan, step: int) -> bool:
        """At the end of breakpoint step ``step`` (from 0): stop if a condition held over it, else
        start the next step's window. True while the run goes on."""
        steps = _steps(plan)
        window = self.live.window(plan.phase.name)
        for condition in steps.conditions:
            value = window.value(condition)
            if value is not None and condition.passes(value):
                unit = "req/s" if plan.phase.load.mode == "open" else "users"
                level = steps.level(step)
                self.stop(f"breakpoint: {condition.expr!r} held at {level:g} {unit} (step {step + 1})")
                return False
        self.live.restart_window(plan.phase.name)
        return True


def breakpoints(plans: list[PhasePlan]) -> list[PhasePlan]:
    """The phases whose shape has stop steps."""
    return [p for p in plans if p.phase.load.shape.stop_steps is not None]


def _steps(plan: PhasePlan) -> StopSteps:
    steps = plan.phase.load.shape.stop_steps
    if steps is None:
        raise ValueError(f"phase {plan.phase.name} has no stop steps (its shape is {plan.phase.load.shape.type})")
    return steps


def step_ends(plan: PhasePlan) -> Iterator[tuple[int, int]]:
    """``(step, end_ns)`` of each whole breakpoint step inside the phase."""
    hold = _steps(plan).hold
    step = 0
    while (end := plan.start_ns + int((step + 1) * hold * SECOND)) <= plan.end_ns:
        yield step, end
        step += 1
