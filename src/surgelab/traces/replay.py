"""Replay a trace's arrival times: the recorded gaps, optionally sped up, windowed or rescaled.

``replay_offsets`` gives the intended send times, in integer nanoseconds from the start of
the replay, for the rows that ``replay_indices`` names with the same window: element ``k``
of one belongs to trace row ``indices[k]`` of the other, so the caller pairs each send time
with that row's lengths, prefix blocks or text::

    offsets = replay_offsets(trace, speed=2.0, start_s=600, end_s=1200)
    rows = replay_indices(trace, start_s=600, end_s=1200)
    for at_ns, row in zip(offsets, rows):
        ...  # send trace.prompt_tokens[row] at start + at_ns

Rows the source marks as failed (``trace.failed``) are kept: they arrived. Drop them with
``rows[~trace.failed[rows]]`` (and the matching offsets) if the load should not resend them;
the other rows keep their times either way. :func:`replay_plan` does both, and that drop,
for a replay shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from surgelab.traces.trace import Trace

__all__ = ["ReplayPlan", "replay_indices", "replay_offsets", "replay_plan"]


def _window(trace: Trace, start_s: float, end_s: float | None) -> tuple[int, int]:
    if not math.isfinite(start_s) or start_s < 0:
        raise ValueError(f"start_s must be a finite number >= 0, got {start_s!r}")
    if end_s is not None and not end_s > start_s:
        raise ValueError(f"end_s must be greater than start_s ({start_s!r}), got {end_s!r}")
    offsets = trace.offsets_s
    lo = int(np.searchsorted(offsets, start_s, side="left"))
    hi = len(offsets) if end_s is None else int(np.searchsorted(offsets, end_s, side="left"))
    return lo, hi


def replay_indices(trace: Trace, start_s: float = 0.0, end_s: float | None = None) -> np.ndarray:
    """Indices (int64, ascending) of the trace rows whose offset lies in ``[start_s, end_s)``."""
    lo, hi = _window(trace, start_s, end_s)
    return np.arange(lo, hi, dtype=np.int64)


def replay_offsets(
    trace: Trace,
    speed: float = 1.0,
    start_s: float = 0.0,
    end_s: float | None = None,
    rate: float | None = None,
) -> np.ndarray:
    """Send times in integer nanoseconds (int64, ascending) for the rows in ``[start_s, end_s)``.

    - Window: rows with ``start_s <= offset < end_s`` (``end_s=None``: to the end), in trace
      time, before any scaling. Times are re-based to the window start: the row at trace
      offset ``t`` is sent at ``(t - start_s) / speed``, so the gap from the window start to
      its first request is kept like every other gap. With the defaults the first request is
      sent at 0.
    - ``speed``: every gap divided by it (2 halves them, 0.5 doubles them). Times are rounded
      to the nearest nanosecond once, from the trace offsets, so gaps do not accumulate error.
    - ``rate``: requests per second to replay at instead; it overrides ``speed``. The scale
      is chosen so that the window's rows have mean rate ``rate`` in the sense of
      :attr:`Trace.mean_rate` — ``(n - 1) / (last - first)``, one over the mean gap — while
      every gap keeps its share of the whole. It needs at least two rows at distinct times.

    Raises ``ValueError`` for a trace without timestamps (give it an arrival process
    instead), bad arguments, or a ``rate`` the window cannot define.
    """
    if not trace.has_timestamps:
        raise ValueError(
            f"trace {trace.source or ''} has no timestamps ({trace.format}); replay needs recorded arrival times"
        )
    if not (math.isfinite(speed) and speed > 0):
        raise ValueError(f"speed must be a finite number > 0, got {speed!r}")
    lo, hi = _window(trace, start_s, end_s)
    times = trace.offsets_s[lo:hi]
    if rate is not None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a finite number > 0, got {rate!r}")
        span = float(times[-1] - times[0]) if len(times) else 0.0
        if span <= 0:
            raise ValueError(f"rate needs at least two requests at distinct times in the window, found {len(times)}")
        speed = rate / ((len(times) - 1) / span)
    return np.rint((times - start_s) * 1e9 / speed).astype(np.int64)


@dataclass(frozen=True)
class ReplayPlan:
    """The requests of a replay: their trace rows and intended send times, in send order."""

    trace: Trace
    rows: np.ndarray  # trace row of each request, in send order
    offsets_ns: np.ndarray  # its intended send time from the phase start


def replay_plan(
    trace: Trace,
    speed: float = 1.0,
    start_s: float = 0.0,
    end_s: float | None = None,
    rate: float | None = None,
    skip_failed: bool = False,
) -> ReplayPlan:
    """The window's rows and their send times; ``skip_failed`` leaves out the rows the trace marks failed."""
    rows = replay_indices(trace, start_s, end_s)
    offsets = replay_offsets(trace, speed, start_s, end_s, rate)
    if skip_failed:
        assert trace.failed is not None, "Trace.__post_init__ sets it"
        keep = ~trace.failed[rows]
        rows, offsets = rows[keep], offsets[keep]
    return ReplayPlan(trace=trace, rows=rows, offsets_ns=offsets)
