"""Is the load climbing faster than the target can warm up? Said before a run, not after it.

Seed 000: warm a model server at low load first ("heat the stove"), because a ramp that is
too fast measures the warm-up and reports a false crash. The target's warm-up is the
scenario's ``target.warm_up`` (model load, CUDA graphs, caches), or, for a shape that climbs
(ramp, step, stages, breakpoint), the load's own ``warmup`` period. A phase is warned of when
its level reaches half its peak before that time has passed.
"""

from __future__ import annotations

import numpy as np

from surgelab.scenario.model import Scenario

__all__ = ["ramp_warnings"]

_SAMPLES = 2001


def ramp_warnings(scenario: Scenario) -> list[str]:
    """One sentence for the first phase if it reaches half its peak before the target is warm."""
    phase = scenario.phase_list[0]
    load, shape = phase.load, phase.load.shape
    warm, source = scenario.target.warm_up, "the target's warm-up (target.warm_up)"
    if not warm and shape.climbs:
        warm, source = load.warmup, "the warm-up period (load.warmup)"
    if not warm or shape.peak <= 0:
        return []
    t = np.linspace(0.0, min(warm, load.planned_duration), _SAMPLES)
    reached = np.flatnonzero(shape.level(t) >= shape.peak / 2)
    if reached.size == 0:
        return []
    at = float(t[reached[0]])
    unit = "req/s" if load.mode == "open" else "users"
    climb = (
        f"starts at {float(shape.level(np.zeros(1))[0]):g} {unit}, half its peak or more,"
        if at == 0
        else (f"reaches half its peak ({shape.peak / 2:g} {unit}) at {at:g}s,")
    )
    return [
        f"phase {phase.name}: the load {climb} within {source} of {warm:g}s: a climb this fast measures the "
        f"warm-up and can report a false crash; climb over at least {warm:g}s, or hold a low level until the target is warm"
    ]
