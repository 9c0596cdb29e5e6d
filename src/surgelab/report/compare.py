"""Comparing runs: differences with bootstrap confidence intervals and a verdict per metric.

Method (stated in every comparison report): the first run is the baseline. For each run the
measured requests (after warm-up) are resampled with replacement, ``resamples`` times, with a
seeded generator; each resample recomputes the metric (percentiles over the resampled
requests' values, ITL over all gaps of the resampled requests); throughput resamples every
request and counts the successes ending in the measurement window ÷ its length, exactly as
summary.json counts it (warm-up requests that finish inside the window included). Baseline and candidate are resampled
independently, and the 95 % interval of the difference is the 2.5th–97.5th percentile of the
resampled differences (percentile bootstrap). A percentile with fewer than 20 values beyond it in
either run (P99 of fewer than 2,000 requests) is out of the bootstrap's reach — resamples
cannot invent a tail, and such a tail is one or two requests that a single hiccup of client,
network or server puts there — so its interval is the distribution-free one (each run's 95 %
order-statistic interval, binomial ranks, clipped to the sample; the widest difference they
allow) and it is called different only when the two runs barely overlap: the candidate's
percentile lies beyond the baseline's mirror percentile (P1 for P99) or the reverse. A difference is *significant* when that interval
excludes zero **and** it exceeds ``min_effect`` of the baseline (5 % by default, so that two
runs of one configuration that differ by a hair are not called different) **and**, for
TTFT and E2E (measured from the intended send time), the client's own timing resolution (the larger schedule-lag P99 of the two runs:
a client whose sends wobble by that much cannot resolve finer latency differences); its
direction then makes it *better* or *worse*; otherwise *not significant*. Runs are only called
better or worse where their offered load matched — the measurement window's arrivals per second
within 10 % (plus three standard deviations of Poisson noise) for open loops, the same users for
closed ones — and *load differed* otherwise: three times the load is not three times better. With
an SLO, SLO violations (measured requests that failed or missed their objective, as a simulation
counts them) and goodput are resampled like the rest; a simulation's cost is exact, not
resampled, and called different when it differs by ``min_effect``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from surgelab.analysis.outcomes import e2e_per_row, ttft_per_row
from surgelab.analysis.slo import meets_slo
from surgelab.analysis.window import window_of
from surgelab.report.inputs import load_stored_scenario
from surgelab.report.model import REPORT_VERSION, RunColumns, build_report_data, has_slo, load_columns

__all__ = ["CompareData", "MetricComparison", "compare_runs", "METHOD"]

METHOD = (__doc__ or "").split("Method (stated in every comparison report): ", 1)[-1].replace("\n", " ").strip()


@dataclass
class _Sample:
    """One run's measured requests, arranged so that any resample is O(n)."""

    n: int
    window_s: float
    measured: np.ndarray  # indices of the requests after the warm-up: what latency and error metrics resample
    ok_in_window: np.ndarray  # bool per request
    tokens_in_window: np.ndarray  # output tokens of those, 0 otherwise
    done: np.ndarray  # ok or failed (error-rate denominator)
    failed: np.ndarray
    ttft: np.ndarray  # ms per request, NaN when none
    e2e: np.ndarray
    itl: np.ndarray  # flat gaps, ms
    itl_parent: np.ndarray  # request index of each gap
    violations: np.ndarray  # measured and counted, failed or missing the SLO (none without an SLO)
    good_in_window: np.ndarray  # successes ending in the window within every objective (goodput)


def _sample(c: RunColumns, summary: dict[str, Any], run_info: dict[str, Any], scenario: Any) -> _Sample:
    """Every request of a run: latencies and errors over the measured ones, throughput as the summary counts it
    (successes ending in the window, warm-up ones included: ``analysis.window``), so the exact values are
    the summary's own."""
    measured = c.measured
    ok = c.ok()
    window = window_of(summary, run_info)
    in_window = ok & window.ended(c.end)
    failed = measured & c.outcomes.against  # unanswered, dropped and lost too, as the summary counts them
    lengths = np.where(ok & measured, c.gaps.lengths, 0).astype(np.int64)
    flat = c.gaps.values(measured & ok) * 1000.0
    counted = measured & c.outcomes.counted
    no_slo = np.zeros(len(measured), dtype=bool)
    good = meets_slo(c, ok & counted, scenario) if scenario is not None else no_slo  # type: ignore[arg-type]
    good_rate = meets_slo(c, in_window | (ok & measured), scenario) & in_window if scenario is not None else no_slo  # type: ignore[arg-type]
    return _Sample(
        n=len(measured),
        window_s=window.length if window.length > 0 else 1e-9,
        measured=np.flatnonzero(measured),
        ok_in_window=in_window,
        tokens_in_window=np.where(in_window, np.nan_to_num(c.output), 0.0),
        done=measured & c.outcomes.counted,
        failed=failed,
        ttft=np.where(measured, ttft_per_row(c, c.intended) * 1000.0, np.nan),  # given-up requests as their wait
        e2e=np.where(measured, e2e_per_row(c, c.intended) * 1000.0, np.nan),
        itl=flat,
        itl_parent=np.repeat(np.arange(len(lengths)), lengths),
        violations=counted & ~good if scenario is not None else no_slo,
        good_in_window=good_rate,
    )


class _Weighted:
    """Percentiles of one value column under per-request resampling weights."""

    def __init__(self, values: np.ndarray, parent: np.ndarray | None = None) -> None:
        finite = np.isfinite(values)
        order = np.argsort(values[finite], kind="stable")
        self.sorted = values[finite][order]
        idx = np.flatnonzero(finite) if parent is None else parent[finite]
        self.parent = idx[order]

    def percentile(self, weights: np.ndarray | None, q: float) -> float:
        if self.sorted.size == 0:
            return float("nan")
        if weights is None:
            return float(np.percentile(self.sorted, q))
        cw = np.cumsum(weights[self.parent])
        if cw[-1] <= 0:
            return float("nan")
        i = int(np.searchsorted(cw, q / 100.0 * cw[-1]))
        return float(self.sorted[min(i, self.sorted.size - 1)])


Stat = Callable[[_Sample, "np.ndarray | None", dict[str, _Weighted]], float]


def _sum(mask: np.ndarray, w: np.ndarray | None) -> float:
    return float(mask.sum()) if w is None else float(w[mask].sum())


def _error_rate(s: _Sample, w: np.ndarray | None, _: dict[str, _Weighted]) -> float:
    done = _sum(s.done, w)
    return _sum(s.failed, w) / done * 100.0 if done else float("nan")


def _pct(name: str, q: float) -> Stat:
    return lambda s, w, cols: cols[name].percentile(w, q)


@dataclass(frozen=True)
class _Metric:
    id: str
    label: str
    unit: str
    better: str  # "lower" or "higher"
    stat: Stat
    column: str | None = None  # percentile metrics: the value column and the percentile
    q: float = 0.0

    @property
    def every_request(self) -> bool:
        """A rate: it counts every success ending in the window, warm-up ones included, as the summary does."""
        return self.id in ("throughput", "output_tokens", "goodput")

    @property
    def from_intended(self) -> bool:
        """Measured from the intended send time, so the client's send jitter is inside it."""
        return self.column in ("ttft", "e2e")


METRICS = (
    _Metric("throughput", "throughput", "req/s", "higher", lambda s, w, _: _sum(s.ok_in_window, w) / s.window_s),
    _Metric("output_tokens", "output tokens", "tok/s", "higher",
            lambda s, w, _: float((s.tokens_in_window if w is None else s.tokens_in_window * w).sum()) / s.window_s),
    _Metric("error_rate", "error rate", "%", "lower", _error_rate),
    *(_Metric(f"{c}_p{q}", f"{c.upper()} p{q}", "ms", "lower", _pct(c, q), c, q)
      for c in ("ttft", "itl", "e2e") for q in (50, 99)),
)  # fmt: skip
SLO_METRICS = (  # only where every run has an objective to miss
    _Metric("slo_violations", "SLO violations", "requests", "lower", lambda s, w, _: _sum(s.violations, w)),
    _Metric("goodput", "goodput", "req/s", "higher", lambda s, w, _: _sum(s.good_in_window, w) / s.window_s),
)
LOAD_TOLERANCE = 0.10  # offered loads within 10 % (plus Poisson noise) are the same load


def _offered(summary: dict[str, Any]) -> dict[str, Any]:
    """What the run asked of the system: arrivals per second of the window (open loop), users (closed)."""
    mode, n = summary.get("mode"), summary["requests"]["measured"]
    if mode == "closed":
        return {"value": (summary.get("load") or {}).get("concurrency"), "unit": "users", "n": n}
    window = summary.get("window") or {}
    span = (window.get("end_s") or 0.0) - (window.get("start_s") or 0.0) or summary.get("duration_s") or 1.0
    return {"value": round(n / span, 4), "unit": "req/s", "n": n}


def load_differs(base: dict[str, Any], other: dict[str, Any]) -> str:
    """Why two offered loads are not the same load ("" when they are)."""
    a, b = base["value"], other["value"]
    if base["unit"] != other["unit"]:
        return f"offered load differed: {b} {other['unit']} against {a} {base['unit']}"
    if a is None or b is None:
        return ""
    noise = 3.0 / np.sqrt(max(min(base["n"], other["n"]), 1)) if base["unit"] == "req/s" else 0.0
    if abs(b - a) <= (LOAD_TOLERANCE + noise) * max(abs(a), 1e-9):
        return ""
    return f"offered load differed: {b:,.3g} against {a:,.3g} {base['unit']} ({b / a:.2g}×)" if a else f"offered load differed: {b:,.3g} against 0"


@dataclass
class MetricComparison:
    id: str
    label: str
    unit: str
    better: str
    values: list[float | None]  # per run, exact (no resampling)
    diffs: list[dict[str, Any]]  # per candidate run (runs[1:]): diff, rel, ci_low, ci_high, verdict


@dataclass
class CompareData:
    """The versioned comparison model: terminal table and HTML page both render from it."""

    runs: list[dict[str, Any]]
    metrics: list[MetricComparison]
    overlays: dict[str, Any]
    method: str
    seed: int
    resamples: int
    min_effect: float
    resolution_ms: list[float] = field(default_factory=list)
    version: int = REPORT_VERSION
    kind: str = "compare"
    notes: list[str] = field(default_factory=list)
    settings: list[dict[str, Any]] = field(default_factory=list)  # scenario fields that differ: {"key", "values"}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)

    def verdicts(self, run: int = 1) -> dict[str, str]:
        return {m.id: m.diffs[run - 1]["verdict"] for m in self.metrics}


def _finite(v: float) -> float | None:
    return round(float(v), 4) if np.isfinite(v) else None


def _bootstrap(metric: _Metric, s: _Sample, cols: dict[str, _Weighted], rng: np.random.Generator, b: int) -> np.ndarray:
    """``b`` resamples of ``metric``: of every request for the rates, of the measured ones for the rest."""
    rows = np.arange(s.n) if metric.every_request else s.measured
    out = np.empty(b)
    for i in range(b):
        w = np.bincount(rows[rng.integers(0, rows.size, rows.size)], minlength=s.n).astype(np.float64) if rows.size else None
        out[i] = metric.stat(s, w, cols)
    return out


TAIL_MIN = 20  # values beyond a percentile needed for the bootstrap


def _rank_interval(sorted_values: np.ndarray, q: float) -> tuple[float, float]:
    """Distribution-free 95 % interval of the q-th percentile: order statistics at binomial ranks."""
    n = sorted_values.size
    if n == 0:
        return float("nan"), float("nan")
    p = q / 100.0
    half = 1.96 * np.sqrt(n * p * (1 - p))
    lo = int(np.clip(np.floor(n * p - half), 1, n))
    hi = int(np.clip(np.ceil(n * p + half) + 1, 1, n))
    return float(sorted_values[lo - 1]), float(sorted_values[hi - 1])


def _separated(a: np.ndarray, b: np.ndarray, q: float) -> bool:
    """Barely overlapping runs: one run's q-th percentile beyond the other's (100 − q)-th."""
    a_q, a_m, b_q, b_m = (float(np.percentile(x, p)) for x, p in ((a, q), (a, 100 - q), (b, q), (b, 100 - q)))
    return b_q < a_m or a_q < b_m


def _judged(
    metric: _Metric, base: float, diff: float, lo: float, hi: float, min_effect: float, floor: float
) -> tuple[str, str]:
    """The verdict and, for "not significant", the reason in a few words."""
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(diff)):
        return "not significant", "no data"
    if lo <= 0 <= hi:
        return "not significant", "the 95% interval includes 0"
    if metric.from_intended and abs(diff) < floor:
        return "not significant", f"|Δ| below the client's timing resolution ({floor:.3g} ms lag P99)"
    scale = abs(base) if np.isfinite(base) and base != 0 else 0.0
    if scale and abs(diff) < min_effect * scale:
        return "not significant", f"|Δ| below {min_effect:.0%} of the baseline"
    improved = diff < 0 if metric.better == "lower" else diff > 0
    return ("better" if improved else "worse"), ""


_NOT_SETTINGS = ("name", "output.", "seed", "prompt_salt", "description")  # differ between any two runs without changing what was measured


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node}


def settings_diff(run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """The resolved scenario fields whose values differ between the runs (the rate, the target, …)."""
    flats = []
    for path in run_dirs:
        try:
            flats.append(_flat(yaml.safe_load((path / "scenario.yaml").read_text()) or {}))
        except (OSError, yaml.YAMLError):
            flats.append({})
    keys = sorted({k for f in flats for k in f if not k.startswith(_NOT_SETTINGS)})
    rows = []
    for key in keys:
        values = [f.get(key) for f in flats]
        if any(v != values[0] for v in values[1:]):
            rows.append({"key": key, "values": [None if v is None else str(v) for v in values]})
    return rows


def _labels(run_dirs: Sequence[Path]) -> list[str]:
    names = [p.name for p in run_dirs]
    return names if len(set(names)) == len(names) else [str(p) for p in run_dirs]


def compare_runs(
    run_dirs: Sequence[Path | str], *, seed: int = 0, resamples: int = 1000, min_effect: float = 0.05
) -> CompareData:
    """Compare every run with the first (the baseline)."""
    paths = [Path(p) for p in run_dirs]
    if len(paths) < 2:
        raise ValueError("compare needs at least two runs")
    reports = [build_report_data(p) for p in paths]
    scenarios = [load_stored_scenario(p, []) for p in paths]
    with_slo = all(sc is not None and has_slo(sc) for sc in scenarios)
    samples, columns = [], []
    for path, rep, scenario in zip(paths, reports, scenarios):
        s = _sample(load_columns(path), rep.summary, rep.run_info, scenario if with_slo else None)
        samples.append(s)
        columns.append({"ttft": _Weighted(s.ttft), "e2e": _Weighted(s.e2e), "itl": _Weighted(s.itl, s.itl_parent)})
    floors = [r.summary["schedule_lag_ms"].get("p99") or 0.0 for r in reports]  # the client's timing resolution
    offered = [_offered(r.summary) for r in reports]
    differs = [load_differs(offered[0], o) for o in offered[1:]]
    metrics = []
    for k, metric in enumerate(METRICS + (SLO_METRICS if with_slo else ())):
        values = [metric.stat(s, None, cols) for s, cols in zip(samples, columns)]
        rng = np.random.default_rng([seed, k])
        base_boot = _bootstrap(metric, samples[0], columns[0], rng, resamples)
        diffs = []
        for s, cols, value, floor in zip(samples[1:], columns[1:], values[1:], floors[1:]):
            boot = _bootstrap(metric, s, cols, rng, resamples) - base_boot
            boot = boot[np.isfinite(boot)]
            lo, hi = (np.percentile(boot, [2.5, 97.5]) if boot.size else (np.nan, np.nan))
            sparse = False
            if metric.column is not None:
                a, b = columns[0][metric.column].sorted, cols[metric.column].sorted
                if min(a.size, b.size) * (1 - metric.q / 100.0) < TAIL_MIN:
                    sparse = True
                    (a_lo, a_hi), (b_lo, b_hi) = _rank_interval(a, metric.q), _rank_interval(b, metric.q)
                    lo, hi = b_lo - a_hi, b_hi - a_lo
                    if a.size and b.size and not _separated(a, b, metric.q):
                        lo, hi = min(lo, 0.0), max(hi, 0.0)  # overlapping runs: no claim either way
            diff = value - values[0]
            rel = diff / values[0] if np.isfinite(values[0]) and values[0] else float("nan")
            verdict, why = _judged(metric, values[0], diff, lo, hi, min_effect, max(floors[0], floor))
            if sparse and why == "the 95% interval includes 0":
                why = "sparse tail: the runs overlap (order-statistic interval)"
            widened = sparse and np.isfinite(lo) and np.isfinite(hi) and (lo == 0.0 or hi == 0.0)
            diffs.append({"diff": _finite(diff), "rel": _finite(rel), "ci_low": _finite(lo), "ci_high": _finite(hi),
                          "verdict": verdict, "reason": why, "sparse_tail": sparse, "ci_widened": bool(widened)})  # fmt: skip
        metrics.append(MetricComparison(metric.id, metric.label, metric.unit, metric.better, [_finite(v) for v in values], diffs))
    cost = _cost_row([r.summary for r in reports], min_effect)
    if cost is not None:
        metrics.append(cost)
    for m in metrics:  # a load-driven change is no verdict on the system
        for d, why in zip(m.diffs, differs):
            if why:
                d.update(verdict="load differed", reason=why)
    labels = _labels(paths)
    runs = [
        {"label": label, "run_dir": str(p), "name": r.name, "target": r.summary.get("target", {}),
         "valid": r.summary["validity"]["valid"], "measured": r.summary["requests"]["measured"], "verdict": r.verdict,
         "problems": r.problems, "offered": o, "load_differs": why}
        for label, p, r, o, why in zip(labels, paths, reports, offered, ["", *differs])
    ]  # fmt: skip
    overlays = {
        "cdfs": {label: r.cdfs for label, r in zip(labels, reports)},
        "timeseries": {
            label: {"t": r.timeseries["t"], "throughput_per_s": r.timeseries["throughput_per_s"],
                    "ttft_p99": r.timeseries["ttft_ms"]["p99"], "e2e_p99": r.timeseries["e2e_ms"]["p99"],
                    "ttft_n": r.timeseries["ttft_ms"]["n"], "e2e_n": r.timeseries["e2e_ms"]["n"],
                    "min_n": r.timeseries["ttft_ms"]["min_n"]["p99"]}
            for label, r in zip(labels, reports)
        },
    }  # fmt: skip
    notes = [f"{run['label']} is INVALID (the client distorted its load)" for run in runs if not run["valid"]]
    notes += [
        f"{label} was {r.summary['rate_limits']['verdict']}"
        for label, r in zip(labels, reports)
        if (r.summary.get("rate_limits") or {}).get("quota_limited")
    ]  # a provider's quota, not its speed: its latencies are no verdict on it
    return CompareData(runs, metrics, overlays, METHOD, seed, resamples, min_effect, [round(f, 3) for f in floors],
                       notes=notes, settings=settings_diff(paths))  # fmt: skip


def _cost_row(summaries: list[dict[str, Any]], min_effect: float) -> MetricComparison | None:
    """A simulation's cost (fleet.json's): exact, so different when it differs by ``min_effect``."""
    costs = [(s.get("fleet") or {}).get("cost") for s in summaries]
    if any(c is None for c in costs):
        return None
    base, diffs = costs[0], []
    for c in costs[1:]:
        diff, rel = c - base, (c - base) / base if base else float("nan")
        big = abs(diff) >= min_effect * abs(base) and diff != 0
        verdict = ("better" if diff < 0 else "worse") if big else "not significant"
        diffs.append({"diff": _finite(diff), "rel": _finite(rel), "ci_low": None, "ci_high": None, "verdict": verdict,
                      "reason": "" if big else f"|Δ| below {min_effect:.0%} of the baseline", "sparse_tail": False,
                      "ci_widened": False, "exact": True})  # fmt: skip
    return MetricComparison("cost", "cost", "per cost_per_hour unit", "lower", [_finite(c) for c in costs], diffs)
