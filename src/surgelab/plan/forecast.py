"""The peak to plan for: a number, or the busiest window of a traffic profile or a trace.

A scenario file's open-loop phases are summed over time (phases that overlap add up) and
sampled every ``step`` seconds; a trace file's arrivals are counted. Either way the peak is
the highest mean rate over any window of ``window`` seconds, so a burst shorter than the
window (which a queue absorbs) does not size the fleet by itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from surgelab.scenario import ScenarioError, load_scenario
from surgelab.scenario.shapes import Replay

__all__ = ["Peak", "PeakError", "peak_from"]

_SCENARIO_SUFFIXES = (".yaml", ".yml")


class PeakError(ValueError):
    """A peak forecast that cannot be read; one line for the CLI."""


@dataclass(frozen=True)
class Peak:
    rate: float  # requests per second
    source: str  # how it was obtained, for the plan's arithmetic


def _windowed_max(rate: np.ndarray, step: float, window: float) -> float:
    n = max(1, int(round(window / step)))
    if rate.size == 0:
        return 0.0
    if n >= rate.size:
        return float(rate.mean())
    kernel = np.ones(n) / n
    return float(np.convolve(rate, kernel, mode="valid").max())


def _scenario_peak(path: Path, window: float) -> Peak:
    try:
        scenario = load_scenario(path, {})
    except ScenarioError as exc:
        raise PeakError(str(exc).splitlines()[0]) from None
    phases = [p for p in scenario.phase_list if p.load.mode == "open"]
    if not phases:
        raise PeakError(f"{path}: a peak forecast needs an open-loop (rate) load; this scenario has only users")
    step = min(1.0, window)
    t = np.arange(0.0, scenario.planned_duration, step)
    total = np.zeros_like(t)
    for phase in phases:
        local = t - phase.start
        inside = (local >= 0) & (local < phase.load.planned_duration)
        total += np.where(inside, phase.load.shape.level(np.clip(local, 0, None)), 0.0)
    rate = _windowed_max(total, step, window)
    return Peak(rate, f"busiest {window:g}s of {path.name} (open-loop phases summed)")


def _trace_peak(path: Path, window: float) -> Peak:
    try:
        offsets = Replay(type="replay", trace=str(path)).load().offsets_ns / 1e9
    except (ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PeakError(f"cannot read trace {path}: {first}") from None
    if offsets.size == 0:
        raise PeakError(f"trace {path} has no requests")
    # windows may start anywhere: count in tenths of a window and slide over them
    sub = window / 10
    bins = int(math.ceil(max(float(offsets[-1]), window) / sub))
    counts, _ = np.histogram(offsets, bins=bins, range=(0.0, bins * sub))
    rate = _windowed_max(counts / sub, sub, window)
    return Peak(rate, f"busiest {window:g}s of {path.name} ({offsets.size:,} requests)")


def peak_from(spec: str, window: float = 60.0) -> Peak:
    """A number (``1000``), or a scenario/trace file whose busiest ``window`` seconds set the peak."""
    try:
        value = float(spec)
    except ValueError:
        value = None
    if value is not None:
        if not (math.isfinite(value) and value > 0):
            raise PeakError(f"--peak must be a number > 0 (requests/s) or a file, got {spec!r}")
        return Peak(value, "given")
    if not (math.isfinite(window) and window > 0):
        raise PeakError(f"--peak-window must be > 0, got {window!r}")
    path = Path(spec)
    if not path.exists():
        raise PeakError(f"--peak {spec!r} is neither a number nor an existing scenario or trace file")
    if path.suffix in _SCENARIO_SUFFIXES:
        return _scenario_peak(path, window)
    return _trace_peak(path, window)
