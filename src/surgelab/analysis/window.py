"""The measurement window and the one definition of throughput every figure and report shares.

Throughput is the successes that *ended* inside the window, whenever they were sent (warm-up
requests that finish inside it included), divided by the window's length: the steady-state
completion rate. ``summary.json`` (``throughput``, ``goodput``, every breakdown), ``surgelab
show``, the HTML report and ``surgelab compare`` all count with ``Window.ended``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Window", "window_of"]


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start

    def per_s(self, count: float) -> float:
        return count / self.length if self.length > 0 else 0.0

    def ended(self, end: np.ndarray) -> np.ndarray:
        """Rows whose end (seconds from the run's start, NaN when none) lies inside the window."""
        with np.errstate(invalid="ignore"):
            return (end >= self.start) & (end <= self.end)


def window_of(summary: dict[str, Any], run_info: dict[str, Any]) -> Window:
    """The window a summary's rates were computed over (``window`` in summary.json; derived for older ones)."""
    saved = summary.get("window")
    if saved:
        return Window(float(saved["start_s"]), float(saved["end_s"]))
    start = run_info.get("window_start_s") or (summary.get("load") or {}).get("warmup_s") or 0.0
    return Window(float(start), float(start) + float(summary.get("duration_s") or 0.0))
