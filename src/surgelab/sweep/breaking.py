"""The breaking phase: how the service fails at a multiple of its peak, and how fast it recovers.

One ordinary run whose load is a ``stages`` shape: ``multiple × peak`` for ``hold`` seconds,
then a drop to a level the service handled (the SLA-capacity level) for ``recovery``
seconds. The records tell the story: during the break, errors (the service sheds load) or
a latency explosion (it queues) or both; after the drop, the time until requests are
served normally again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["break_shape", "analyse_break"]

_NS = 1e9
RECOVERED_AFTER = 5  # consecutive good requests that mark the service as recovered
_TRANSITION_S = 0.001  # the drop is a step; stages interpolate, so it takes a millisecond


def break_shape(level: float, hold: float, low: float, recovery: float) -> dict[str, Any]:
    """A ``stages`` load: ``level`` for ``hold`` s, then ``low`` for ``recovery`` s."""
    return {
        "type": "stages",
        "start": level,
        "stages": [
            {"duration": hold, "target": level},
            {"duration": _TRANSITION_S, "target": low},
            {"duration": recovery, "target": low},
        ],
    }


def _p99(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, 99)) if values.size else None


def analyse_break(
    records: pa.Table,
    hold: float,
    recovery: float,
    baseline_ttft_ms: float | None,
    max_error_rate: float,
    explosion_multiple: float,
) -> dict[str, Any]:
    """Classify the failure during the break window and measure recovery after the drop.

    * ``errors``: the break window's error rate is above ``max_error_rate``;
    * ``latency``: its P99 TTFT is above ``explosion_multiple`` × the baseline P99 TTFT;
    * ``errors+latency`` both, ``graceful`` neither (throughput capped, users served).

    Recovery: requests sent after the drop are good when they succeed with a TTFT under
    twice the baseline P99; the service has recovered at the send time of the first of
    ``RECOVERED_AFTER`` good requests in a row (if no such run exists, it has not).
    """
    cols = {name: records.column(name).to_numpy(zero_copy_only=False) for name in ("intended_ns", "state")}
    intended = cols["intended_ns"].astype(float) / _NS
    state = cols["state"].astype(str)
    ft = records.column("first_token_ns").to_numpy(zero_copy_only=False)
    ttft = (np.where(ft == None, np.nan, ft).astype(float) / _NS - intended) * 1000.0  # noqa: E711
    ok = state == "ok"
    failed = np.isin(state, ["http_error", "timeout", "connection_error", "protocol_error"])
    during = intended < hold
    n_done = int((ok | failed)[during].sum())
    error_rate = float(failed[during].sum() / n_done) if n_done else 0.0
    p99 = _p99(ttft[during & ok])
    states = {str(s): int((state[during] == s).sum()) for s in np.unique(state[during])}
    erroring = error_rate > max_error_rate
    exploding = p99 is not None and baseline_ttft_ms is not None and p99 > explosion_multiple * baseline_ttft_ms
    mode = {(True, True): "errors+latency", (True, False): "errors", (False, True): "latency"}.get(
        (erroring, exploding), "graceful"
    )
    served = ok & during & np.isfinite(ttft)
    ended = records.column("end_ns").to_numpy(zero_copy_only=False)
    ended = np.where(ended == None, np.nan, ended).astype(float) / _NS  # noqa: E711
    in_window = served & (ended < hold)
    recovered_s = _recovery(intended, ok, ttft, hold, baseline_ttft_ms)
    return {
        "mode": mode,
        "error_rate": error_rate,
        "states": states,
        "ttft_p99_ms": p99,
        "baseline_ttft_p99_ms": baseline_ttft_ms,
        "requests_per_s": float(in_window.sum() / hold),
        "recovery_s": recovered_s,
        "recovered": recovered_s is not None,
        "recovery_window_s": recovery,
    }


def _recovery(
    intended: np.ndarray, ok: np.ndarray, ttft: np.ndarray, drop_s: float, baseline_ms: float | None
) -> float | None:
    after = np.flatnonzero(intended >= drop_s)
    after = after[np.argsort(intended[after], kind="stable")]
    if after.size == 0:
        return None
    bound = 2 * baseline_ms if baseline_ms else np.inf
    good = ok[after] & (ttft[after] <= bound)
    streak = 0
    for k, g in enumerate(good):
        streak = streak + 1 if g else 0
        if streak == RECOVERED_AFTER:
            first = after[k - RECOVERED_AFTER + 1]
            return max(0.0, float(intended[first] - drop_s))
    return None
