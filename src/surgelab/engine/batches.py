"""Engine steps run back to back as one batch: the one coalescing rule of the server and the simulator.

A step far shorter than a timer's resolution is not worth a timer of its own (``surgelab serve``)
nor an event of its own (``surgelab simulate``): steps are run until their summed time, plus how
far the batch already runs ahead of the clock, reaches ``coalesce_s``, and their tokens are
delivered together at its end. In wall time stepping itself costs CPU, so a ``clock`` also ends
the batch once ``coalesce_s`` of it went into stepping; in virtual time no clock moves.
"""

from __future__ import annotations

from collections.abc import Callable

from surgelab.engine.core import Engine
from surgelab.engine.request import StepResult

__all__ = ["step_batch"]


def step_batch(
    engine: Engine, coalesce_s: float, *, ahead_s: float = 0.0, clock: Callable[[], float] | None = None
) -> tuple[list[StepResult], float]:
    """The batch's steps and their summed duration (s); empty when the engine has nothing it can run."""
    results: list[StepResult] = []
    total = 0.0
    start = clock() if clock is not None else 0.0
    while engine.has_work:
        result = engine.step()
        if result.idle:
            break
        results.append(result)
        total += result.duration
        spent = clock() - start if clock is not None else 0.0
        if ahead_s + total - spent >= coalesce_s or spent >= coalesce_s:
            break
    return results, total
