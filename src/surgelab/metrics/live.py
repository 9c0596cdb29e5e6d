"""The live snapshot: running figures of the records as they are made, for the terminal view,
the dashboard, the exporter, abort thresholds and breakpoint steps.

Cheap on the hot path: integer counters, per-second completion buckets and flat C arrays of
latencies; percentiles are computed only when somebody looks. Two accumulators run side by
side: one for the whole run and one per phase for its current window (a breakpoint step),
which the caller restarts.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from surgelab.conditions import Threshold
from surgelab.metrics.record import FAILED_STATES, Outcome, State
from surgelab.metrics.store import RecordMeta

__all__ = ["LiveStats", "LiveSnapshot", "merge_snapshots"]

_RATE_WINDOW_S = 5
_KEEP = 200_000


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    elapsed_s: float
    duration_s: float
    target: str  # the planned level now, e.g. "12 req/s" or "8 users"
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


def _trim(values: array) -> None:
    """Live figures follow recent samples; the exact figures come from the records."""
    if len(values) > _KEEP:
        del values[: len(values) - _KEEP // 2]


def _pct(values: array, q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.frombuffer(values, dtype=np.float64), q))


_REDUCE: dict[str, Callable[[np.ndarray], Any]] = {"mean": np.mean, "max": np.max, "min": np.min}
"""A threshold's aggregation other than a percentile."""


class _Accumulator:
    """Measured (post-warm-up) outcomes: counts and latency samples in milliseconds."""

    def __init__(self) -> None:
        self.ok = self.failed = self.dropped = 0
        self.samples = {name: array("d") for name in ("ttft", "e2e", "itl", "tpot", "lag")}

    def add(self, meta: RecordMeta, out: Outcome) -> None:
        samples = self.samples
        if out.sent_ns is not None:
            samples["lag"].append((out.sent_ns - meta.intended_ns) / 1e6)
        if out.state is State.OK:
            self.ok += 1
            if out.first_token_ns is not None:
                samples["ttft"].append((out.first_token_ns - meta.intended_ns) / 1e6)
            if out.end_ns is not None:
                samples["e2e"].append((out.end_ns - meta.intended_ns) / 1e6)
            n = len(out.token_ns)
            if n > 1:
                samples["tpot"].append((out.token_ns[-1] - out.token_ns[0]) / (n - 1) / 1e6)
                samples["itl"].frombytes((np.diff(np.frombuffer(out.token_ns, dtype=np.int64)) / 1e6).tobytes())
        elif out.state in FAILED_STATES:
            self.failed += 1
        elif out.state is State.DROPPED:
            self.dropped += 1
        if len(samples["itl"]) > _KEEP or len(samples["lag"]) > _KEEP:
            for values in samples.values():
                _trim(values)

    @property
    def error_rate(self) -> float:
        done = self.ok + self.failed
        return self.failed / done if done else 0.0

    def value(self, threshold: Threshold) -> float | None:
        """Current value of a latency or ratio threshold's quantity (seconds or fraction)."""
        if threshold.aggregation is None:
            if threshold.metric == "error_rate":
                return self.error_rate if self.ok + self.failed else None
            if threshold.metric == "drop_rate":
                total = self.ok + self.failed + self.dropped
                return self.dropped / total if total else None
            return None  # rates are judged on the whole run only
        values = self.samples[threshold.metric]
        if not values:
            return None
        data = np.frombuffer(values, dtype=np.float64)
        agg = threshold.aggregation
        reduce = _REDUCE.get(agg)
        ms = reduce(data) if reduce else np.percentile(data, float(agg[1:]))
        return float(ms) / 1000.0


class LiveStats:
    def __init__(self, duration_s: float, target_at: Callable[[float], str]) -> None:
        self.duration_s = duration_s
        self.target_at = target_at
        self.scheduled = 0
        self.in_flight = 0
        self.states: Counter[State] = Counter()
        self._sends: Counter[int] = Counter()
        self._ends: Counter[int] = Counter()
        self.total = _Accumulator()
        self.windows: dict[str, _Accumulator] = {}

    def window(self, phase: str) -> _Accumulator:
        """What the phase's requests did since its window last restarted."""
        return self.windows.setdefault(phase, _Accumulator())

    def restart_window(self, phase: str) -> None:
        self.windows[phase] = _Accumulator()

    def on_send(self, now_ns: int) -> None:
        self.in_flight += 1
        self._sends[now_ns // 1_000_000_000] += 1

    def on_done(self, meta: RecordMeta, out: Outcome, now_ns: int) -> None:
        if out.state is not State.DROPPED:
            self.in_flight -= 1
        self.states[out.state] += 1
        self._ends[now_ns // 1_000_000_000] += 1
        if not meta.warmup:
            self.total.add(meta, out)
        self.window(meta.phase).add(meta, out)

    def _rate(self, buckets: Counter[int], now_s: float) -> float:
        current = int(now_s)
        span = min(_RATE_WINDOW_S, current)
        if span <= 0:
            return 0.0
        return sum(buckets.get(s, 0) for s in range(current - span, current)) / span

    def snapshot(self, now_ns: int) -> LiveSnapshot:
        now_s = now_ns / 1e9
        s, total = self.states, self.total
        return LiveSnapshot(
            elapsed_s=now_s,
            duration_s=self.duration_s,
            target=self.target_at(now_s),
            send_rate=self._rate(self._sends, now_s),
            completion_rate=self._rate(self._ends, now_s),
            in_flight=self.in_flight,
            scheduled=self.scheduled,
            ok=s[State.OK],
            failed=sum(s[x] for x in FAILED_STATES),
            dropped=s[State.DROPPED],
            cancelled=s[State.CANCELLED],
            error_rate=total.error_rate,
            ttft_p50_ms=_pct(total.samples["ttft"], 50),
            ttft_p99_ms=_pct(total.samples["ttft"], 99),
            e2e_p50_ms=_pct(total.samples["e2e"], 50),
            e2e_p99_ms=_pct(total.samples["e2e"], 99),
            lag_p99_ms=_pct(total.samples["lag"], 99),
        )


def merge_snapshots(snapshots: Sequence[LiveSnapshot]) -> LiveSnapshot:
    """The whole run's live figures from its workers': counts and rates add up; percentiles
    are approximate (P50 averaged, P99 and lag the worst worker's) — the summary is exact."""

    def total(name: str) -> Any:
        return sum(getattr(s, name) for s in snapshots)

    def worst(name: str) -> float | None:
        values = [getattr(s, name) for s in snapshots if getattr(s, name) is not None]
        return max(values) if values else None

    def mean(name: str) -> float | None:
        values = [getattr(s, name) for s in snapshots if getattr(s, name) is not None]
        return sum(values) / len(values) if values else None

    first = snapshots[0]
    ok, failed = total("ok"), total("failed")
    return LiveSnapshot(
        elapsed_s=max(s.elapsed_s for s in snapshots), duration_s=first.duration_s, target=first.target,
        send_rate=total("send_rate"), completion_rate=total("completion_rate"), in_flight=total("in_flight"),
        scheduled=total("scheduled"), ok=ok, failed=failed, dropped=total("dropped"), cancelled=total("cancelled"),
        error_rate=failed / (ok + failed) if ok + failed else 0.0,
        ttft_p50_ms=mean("ttft_p50_ms"), ttft_p99_ms=worst("ttft_p99_ms"),
        e2e_p50_ms=mean("e2e_p50_ms"), e2e_p99_ms=worst("e2e_p99_ms"), lag_p99_ms=worst("lag_p99_ms"),
    )  # fmt: skip
