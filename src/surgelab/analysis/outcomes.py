"""Which requests count against a run, and what an unanswered request's latency is.

Every state but ``ok`` is a request that did not succeed, and counts against the run: the four
error states, ``dropped`` (never sent: the client's ``max_in_flight`` was reached), ``lost``
(with a worker that died) and ``cancelled`` when a grace period ran out — a request the
target had the whole grace to answer and did not. The one exception is a request cut short
by the user (a second Ctrl-C, or Ctrl-C with no grace): the target was given no time, so it
counts neither way. A hung server can no longer pass by leaving its requests unanswered.

Latency does not forget them either: a request that was given up on (``timeout``, or
cancelled at the end of a grace) has waited at least until then, so its TTFT and E2E enter the
percentiles as that wait — a lower bound, *censored* — and a P99 cannot look good because the
slowest requests never finished. Errors that came back (HTTP 500, a reset, a bad stream) are
answers, not waits, and stay out of the latencies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from surgelab.analysis.columns import ColumnSource, Labels, labels
from surgelab.analysis.stats import distribution
from surgelab.metrics.record import CUT_SHORT, FAILED_STATES, State

__all__ = [
    "Outcomes",
    "outcomes_of",
    "ttft_per_row",
    "e2e_per_row",
    "ttft_values",
    "e2e_values",
    "censored_distribution",
]


@dataclass(frozen=True)
class Outcomes:
    """Row masks of every record by how it counts (all rows, warm-up included)."""

    ok: np.ndarray
    failed: np.ndarray  # http_error, timeout, connection_error, protocol_error
    unanswered: np.ndarray  # cancelled when a grace period ran out
    cut_short: np.ndarray  # cancelled by the user with no grace given: counts neither way
    dropped: np.ndarray
    lost: np.ndarray
    timed_out: np.ndarray

    @property
    def against(self) -> np.ndarray:
        """Requests that did not succeed and count against the run (the error rate's numerator)."""
        return self.failed | self.unanswered | self.dropped | self.lost

    @property
    def counted(self) -> np.ndarray:
        """Requests the error rate is over: every one but those cut short by the user."""
        return ~self.cut_short

    @property
    def censored(self) -> np.ndarray:
        """Requests given up on while waiting: their latency is at least the wait (a lower bound)."""
        return self.timed_out | self.unanswered

    def error_rate(self, rows: np.ndarray) -> float:
        counted = int((rows & self.counted).sum())
        return int((rows & self.against).sum()) / counted if counted else 0.0


def outcomes_of(source: ColumnSource, state: Labels) -> Outcomes:
    """Classify every record; the error column is read only when some request was cancelled."""
    cancelled = state == State.CANCELLED.value
    cut_short = np.zeros(len(state), dtype=bool)
    if cancelled.any():
        cut_short = cancelled & (labels(source, "error") == CUT_SHORT)
    return Outcomes(
        ok=state == State.OK.value,
        failed=state.isin([s.value for s in FAILED_STATES]),
        unanswered=cancelled & ~cut_short,
        cut_short=cut_short,
        dropped=state == State.DROPPED.value,
        lost=state == State.LOST.value,
        timed_out=state == State.TIMEOUT.value,
    )


def ttft_per_row(c: Any, start: np.ndarray) -> np.ndarray:
    """Every row's time to first token from ``start`` (intended or actual send): a success's own, a
    censored request's own when its first token came, else its wait until it was given up; NaN for
    every other row."""
    o = c.outcomes
    first = np.where(o.censored & np.isnan(c.first_token), c.end, c.first_token)
    return np.where(o.ok | o.censored, first - start, np.nan)


def e2e_per_row(c: Any, start: np.ndarray) -> np.ndarray:
    """Every row's end to end from ``start``: a success's, or a censored request's wait until given up; else NaN."""
    return np.where(c.outcomes.ok | c.outcomes.censored, c.end - start, np.nan)


def ttft_values(c: Any, rows: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, int]:
    """``ttft_per_row`` of ``rows`` (those of kinds with a first token), and how many of them are censored waits."""
    values = ttft_per_row(c, start)[rows]
    waited = rows & c.outcomes.censored & np.isnan(c.first_token)
    return values, int(np.isfinite(c.end[waited] - start[waited]).sum())


def e2e_values(c: Any, rows: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, int]:
    """``e2e_per_row`` of ``rows``, and how many of them are censored waits."""
    values = e2e_per_row(c, start)[rows]
    waited = rows & c.outcomes.censored
    return values, int(np.isfinite(c.end[waited] - start[waited]).sum())


def censored_distribution(values: tuple[np.ndarray, int], scale: float = 1000) -> dict[str, Any]:
    """``distribution`` of what ``ttft_values`` or ``e2e_values`` gave, with ``censored``: how many of
    its ``count`` values are waits that were cut off (lower bounds) rather than answers."""
    return {**distribution(values[0], scale), "censored": values[1]}
