"""Live counters for the terminal view and for abort thresholds, updated per request.

Cheap on the hot path: integer counters, per-second completion buckets and flat C arrays of
latencies; percentiles are computed only when somebody looks.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass

import numpy as np

from surgelab.metrics.record import FAILED_STATES, Outcome, State
from surgelab.metrics.store import RecordMeta
from surgelab.scenario.thresholds import Threshold

__all__ = ["LiveStats", "LiveSnapshot"]

_RATE_WINDOW_S = 5


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    elapsed_s: float
    duration_s: float
    target: str  # "10.0 req/s" or "8 users"
    send_rate: float  # sends per second over the last few seconds
    completion_rate: float
    in_flight: int
    scheduled: int
    ok: int
    failed: int
    dropped: int
    cancelled: int
    error_rate: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p99_ms: float | None
    lag_p99_ms: float | None


_KEEP = 200_000


def _trim(values: array) -> None:
    """Live figures follow recent samples; the exact figures come from the records."""
    if len(values) > _KEEP:
        del values[: len(values) - _KEEP // 2]


def _pct(values: array, q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.frombuffer(values, dtype=np.float64), q))


class LiveStats:
    def __init__(self, duration_s: float, target: str) -> None:
        self.duration_s = duration_s
        self.target = target
        self.scheduled = 0
        self.in_flight = 0
        self.states: Counter[State] = Counter()
        self._sends: Counter[int] = Counter()
        self._ends: Counter[int] = Counter()
        self._ttft = array("d")  # ms from intended, measured (non-warm-up) successes
        self._e2e = array("d")
        self._itl = array("d")
        self._tpot = array("d")
        self._lag = array("d")
        self.measured_ok = 0
        self.measured_failed = 0
        self.measured_dropped = 0

    def on_send(self, now_ns: int) -> None:
        self.in_flight += 1
        self._sends[now_ns // 1_000_000_000] += 1

    def on_done(self, meta: RecordMeta, out: Outcome, now_ns: int) -> None:
        if out.state is not State.DROPPED:
            self.in_flight -= 1
        self.states[out.state] += 1
        self._ends[now_ns // 1_000_000_000] += 1
        if meta.warmup:
            return
        if out.sent_ns is not None:
            self._lag.append((out.sent_ns - meta.intended_ns) / 1e6)
        if out.state is State.OK:
            self.measured_ok += 1
            if out.first_token_ns is not None:
                self._ttft.append((out.first_token_ns - meta.intended_ns) / 1e6)
            if out.end_ns is not None:
                self._e2e.append((out.end_ns - meta.intended_ns) / 1e6)
            n = len(out.token_ns)
            if n > 1:
                self._tpot.append((out.token_ns[-1] - out.token_ns[0]) / (n - 1) / 1e6)
                gaps = np.diff(np.frombuffer(out.token_ns, dtype=np.int64)) / 1e6
                self._itl.frombytes(gaps.tobytes())
                _trim(self._itl)
        elif out.state in FAILED_STATES:
            self.measured_failed += 1
        elif out.state is State.DROPPED:
            self.measured_dropped += 1
        if len(self._lag) > _KEEP:
            for values in (self._lag, self._ttft, self._e2e, self._tpot):
                _trim(values)

    def _rate(self, buckets: Counter[int], now_s: float) -> float:
        current = int(now_s)
        span = min(_RATE_WINDOW_S, current)
        if span <= 0:
            return 0.0
        return sum(buckets.get(s, 0) for s in range(current - span, current)) / span

    @property
    def error_rate(self) -> float:
        done = self.measured_ok + self.measured_failed
        return self.measured_failed / done if done else 0.0

    def value(self, threshold: Threshold) -> float | None:
        """Current value of a latency or ratio threshold's quantity (seconds or fraction)."""
        if threshold.aggregation is None:
            if threshold.metric == "error_rate":
                return self.error_rate
            if threshold.metric == "drop_rate":
                total = self.measured_ok + self.measured_failed + self.measured_dropped
                return self.measured_dropped / total if total else 0.0
            return None  # rates are judged on the whole run only
        values = {"ttft": self._ttft, "e2e": self._e2e, "itl": self._itl, "tpot": self._tpot}[threshold.metric]
        if not values:
            return None
        data = np.frombuffer(values, dtype=np.float64)
        agg = threshold.aggregation
        result = {"mean": np.mean, "max": np.max, "min": np.min}.get(agg)
        ms = result(data) if result else np.percentile(data, float(agg[1:]))
        return float(ms) / 1000.0

    def snapshot(self, now_ns: int) -> LiveSnapshot:
        now_s = now_ns / 1e9
        s = self.states
        return LiveSnapshot(
            elapsed_s=now_s,
            duration_s=self.duration_s,
            target=self.target,
            send_rate=self._rate(self._sends, now_s),
            completion_rate=self._rate(self._ends, now_s),
            in_flight=self.in_flight,
            scheduled=self.scheduled,
            ok=s[State.OK],
            failed=sum(s[x] for x in FAILED_STATES),
            dropped=s[State.DROPPED],
            cancelled=s[State.CANCELLED],
            error_rate=self.error_rate,
            ttft_p50_ms=_pct(self._ttft, 50),
            ttft_p99_ms=_pct(self._ttft, 99),
            e2e_p50_ms=_pct(self._e2e, 50),
            e2e_p99_ms=_pct(self._e2e, 99),
            lag_p99_ms=_pct(self._lag, 99),
        )
