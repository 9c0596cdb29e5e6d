"""Does a steady run drift? The trend of latency, errors and memory over a soak, with its confidence.

Seed 000: steady runs "expose memory and connection leaks". A leak shows as a slope, so each
series is cut into equal windows and its trend is estimated the robust way monitoring data
needs: the Theil–Sen slope (the median of every pairwise slope, unmoved by a few spikes), its
95 % interval (Sen's rank method), and the Mann–Kendall test of "no monotonic trend" (normal
approximation with the tie correction). A trend is called *leak-like* when it is significant
(p < 0.01), its interval excludes zero, and it moved the series by at least 10 % over the run
in the bad direction (up for latency, errors and memory) — measured from the series' own
level at the start (the median of its first points), never from the fitted line, whose start
can fall below zero (a run whose latency climbs late was said to rise "from −25.8 ms"); a
series that starts at zero has no baseline to rise 10 % from. Latency and errors must drift
for at least ``MIN_SOAK_S`` to be called a leak: over a 40 s run a rising median is a queue
filling or a warm-up, not the slow drift of a soak.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "Trend", "trend", "windowed", "request_trends", "memory_trends", "MIN_POINTS", "SIGNIFICANCE", "MIN_CHANGE",
    "MIN_SOAK_S",
]  # fmt: skip

MIN_POINTS = 8  # fewer windows than this say nothing about a trend
SIGNIFICANCE = 0.01
MIN_CHANGE = 0.10  # a drift smaller than this over the whole run is not worth a warning
MIN_SOAK_S = 300.0  # latency and errors drifting over less than this are a transient, not a leak
_Z_975 = 1.959963984540054
_MAX_POINTS = 400  # pairwise slopes grow as n²: longer series are averaged down first


@dataclass(frozen=True)
class Trend:
    """One series' drift over the run."""

    metric: str
    unit: str
    points: int
    start: float  # the fitted line at the first point, in ``unit``
    end: float  # … and at the last
    slope_per_hour: float
    slope_ci_per_hour: tuple[float, float]
    p_value: float
    change: float | None  # (last − first) ÷ first; None without a baseline above 0
    leak_like: bool
    first: float  # the series' own level at the start: the median of its first points
    last: float  # … and at the end
    span_s: float  # time from the first point to the last

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sentence(self) -> str:
        pct = "" if self.change is None else f" ({self.change:+.0%} over the run)"
        lo, hi = self.slope_ci_per_hour
        what = "a leak-like trend" if self.unit == "MiB" else "a steady rise"
        return (
            f"{self.metric} rose from {_num(self.first)} to {_num(self.last)} {self.unit}{pct} in {_num(self.span_s)} s, "
            f"{_num(self.slope_per_hour, '+')} {self.unit}/h (95% CI {_num(lo, '+')} to {_num(hi, '+')}), "
            f"p = {self.p_value:.2g}: {what}"
        )


def _num(value: float, sign: str = "") -> str:
    return f"{value:{sign},.0f}" if abs(value) >= 1000 else f"{value:{sign}.3g}"


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def _thin(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if t.size <= _MAX_POINTS:
        return t, y
    edges = np.linspace(0, t.size, _MAX_POINTS + 1).astype(int)
    return (np.array([t[a:b].mean() for a, b in zip(edges[:-1], edges[1:])]),
            np.array([y[a:b].mean() for a, b in zip(edges[:-1], edges[1:])]))  # fmt: skip


def trend(t_s: np.ndarray, y: np.ndarray, metric: str, unit: str, min_span_s: float = 0.0) -> Trend | None:
    """The drift of ``y`` over ``t_s`` (seconds); None with fewer than ``MIN_POINTS`` finite points. It is
    leak-like only over at least ``min_span_s`` seconds."""
    t_s, y = np.asarray(t_s, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(t_s) & np.isfinite(y)
    t_s, y = _thin(t_s[keep], y[keep])
    n = t_s.size
    if n < MIN_POINTS or np.ptp(t_s) <= 0:
        return None
    i, j = np.triu_indices(n, k=1)
    dt, dy = t_s[j] - t_s[i], y[j] - y[i]
    distinct = dt != 0
    slopes = np.sort(dy[distinct] / dt[distinct])
    slope = float(np.median(slopes))
    s = float(np.sign(dy).sum())  # Mann–Kendall S, in time order
    _, counts = np.unique(y, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float((counts * (counts - 1) * (2 * counts + 5)).sum())) / 18
    if var <= 0:  # a constant series
        p, half = 1.0, 0.0
    else:
        z = (s - math.copysign(1, s)) / math.sqrt(var) if s != 0 else 0.0
        p, half = min(1.0, 2 * _normal_sf(abs(z))), _Z_975 * math.sqrt(var)
    m = slopes.size
    lo_rank = max(0, round((m - half) / 2) - 1)
    hi_rank = min(m - 1, round((m + half) / 2))
    lo, hi = (float(slopes[lo_rank]), float(slopes[hi_rank])) if m else (slope, slope)
    intercept = float(np.median(y - slope * t_s))
    start, end = float(intercept + slope * t_s[0]), float(intercept + slope * t_s[-1])
    edge = max(n // 8, 1)  # the series' own level at either end, unmoved by the fit
    first, last = float(np.median(y[:edge])), float(np.median(y[-edge:]))
    change = (last - first) / first if first > 0 else None
    span = float(t_s[-1] - t_s[0])
    leak = p < SIGNIFICANCE and lo > 0 and change is not None and change >= MIN_CHANGE and span >= min_span_s
    return Trend(metric, unit, int(n), start, end, slope * 3600, (lo * 3600, hi * 3600), p, change, bool(leak),
                 first, last, span)  # fmt: skip


def windowed(times: np.ndarray, values: np.ndarray, start: float, end: float, windows: int,
             reduce: str = "p50", min_count: int = 5) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(window mid-times, the reduced values) over ``windows`` equal windows; sparse windows are left out."""
    edges = np.linspace(start, end, windows + 1)
    index = np.searchsorted(edges, times, side="right") - 1
    mids, out = [], []
    for w in range(windows):
        chunk = values[index == w]
        chunk = chunk[np.isfinite(chunk)]
        if chunk.size < min_count:
            continue
        mids.append((edges[w] + edges[w + 1]) / 2)
        out.append(float(chunk.mean()) if reduce == "mean" else float(np.percentile(chunk, float(reduce[1:]))))
    return np.array(mids), np.array(out)


def request_trends(sent_s: np.ndarray, latency_s: np.ndarray, failed: np.ndarray, counted: np.ndarray,
                   start: float, end: float, latency_name: str, windows: int = 20) -> dict[str, Any]:  # fmt: skip
    """Trends of the median latency and of the error rate over ``windows`` windows of the measured run.

    ``latency_s`` is NaN where a request has none; ``counted`` marks the requests an error rate
    counts (measured, not dropped or cancelled), ``failed`` those of them that failed.
    """
    out: dict[str, Any] = {"windows": windows, "window_s": (end - start) / windows if end > start else None}
    if end <= start:
        return out
    t, y = windowed(sent_s, latency_s * 1000, start, end, windows)
    out[f"{latency_name}_p50"] = _as_dict(trend(t, y, f"{latency_name.upper()} P50", "ms", MIN_SOAK_S))
    t, y = windowed(sent_s[counted], failed[counted].astype(float), start, end, windows, reduce="mean")
    out["error_rate"] = _as_dict(trend(t, y, "error rate", "fraction", MIN_SOAK_S))
    return out


def memory_trends(cpu: dict[str, Any] | None, servers: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Trends of the client's resident memory (run.json's ``cpu.rss_mb`` samples) and of each scraped server's.

    ``servers``: source → (seconds, bytes) of ``process_resident_memory_bytes``.
    """
    out: dict[str, Any] = {}
    if cpu is not None:  # a measured run: None until enough seconds were sampled
        rss = np.asarray(cpu.get("rss_mb") or [], dtype=float)
        out["client_memory"] = _as_dict(trend(np.arange(rss.size) * cpu.get("rss_interval_s", 1.0), rss, "client memory", "MiB"))
    for source, (t, v) in servers.items():
        out[f"server_memory:{source}"] = _as_dict(trend(t, np.asarray(v) / 2**20, f"{source} server memory", "MiB"))
    return out


def _as_dict(value: Trend | None) -> dict[str, Any] | None:
    return None if value is None else value.to_dict()
