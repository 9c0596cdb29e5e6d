"""Build ``summary.json`` from a run's records: the contract documented in docs/summary.md.

It reads only the records, the scenario and the run's start/stop facts, so the same code
summarises a live run, a crashed run's leftovers and (later) a simulated run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from surgelab import __version__
from surgelab.analysis.stats import distribution
from surgelab.metrics.record import FAILED_STATES, State
from surgelab.scenario.model import Scenario
from surgelab.scenario.thresholds import Threshold

__all__ = ["RunInfo", "summarize", "SUMMARY_VERSION"]

SUMMARY_VERSION = 1
_NS = 1e9


@dataclass(frozen=True)
class RunInfo:
    started_at: str | None = None
    stop_reason: str = "unknown"
    stopped_at_s: float | None = None  # end of the measurement window
    wall_s: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        return cls(
            started_at=data.get("started_at"),
            stop_reason=data.get("stop_reason", "unknown (no clean stop recorded)"),
            stopped_at_s=data.get("stopped_at_s"),
            wall_s=data.get("wall_s"),
        )


def _seconds(table: pa.Table, column: str) -> np.ndarray:
    """A nanosecond column as float seconds, NaN where null."""
    return table[column].cast(pa.float64()).to_numpy(zero_copy_only=False) / _NS


class _Columns:
    """The record columns the summary needs, as numpy arrays."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.state = table["state"].to_numpy(zero_copy_only=False).astype(str)
        self.warmup = table["warmup"].to_numpy(zero_copy_only=False).astype(bool)
        self.intended = _seconds(table, "intended_ns")
        self.sent = _seconds(table, "sent_ns")
        self.first_token = _seconds(table, "first_token_ns")
        self.end = _seconds(table, "end_ns")
        self.prompt = table["prompt_tokens"].cast(pa.float64()).to_numpy(zero_copy_only=False)
        self.output = table["output_tokens"].cast(pa.float64()).to_numpy(zero_copy_only=False)
        lengths = pc.list_value_length(table["itl_us"]).to_numpy(zero_copy_only=False)
        self.itl_count = np.nan_to_num(lengths.astype(np.float64))
        flat = pc.list_flatten(table["itl_us"]).to_numpy(zero_copy_only=False).astype(np.float64) / 1e6
        parents = np.repeat(np.arange(len(lengths)), self.itl_count.astype(np.int64))
        self.itl_flat, self.itl_parent = flat, parents

    def itl_of(self, mask: np.ndarray) -> np.ndarray:
        return self.itl_flat[mask[self.itl_parent]] if self.itl_flat.size else self.itl_flat

    def mean_itl(self) -> np.ndarray:
        sums = np.bincount(self.itl_parent, weights=self.itl_flat, minlength=len(self.state))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.itl_count > 0, sums / np.maximum(self.itl_count, 1), np.nan)


def summarize(table: pa.Table, scenario: Scenario, info: RunInfo) -> dict[str, Any]:
    c = _Columns(table)
    load = scenario.load
    window_start = load.warmup
    window_end = info.stopped_at_s
    if window_end is None:  # crashed run: the records tell how far it got
        finite = c.end[~np.isnan(c.end)]
        window_end = min(load.duration, float(finite.max()) if finite.size else load.duration)
    window_end = max(window_end, window_start)
    window = window_end - window_start

    measured = ~c.warmup
    ok = measured & (c.state == State.OK.value)
    failed = measured & np.isin(c.state, [s.value for s in FAILED_STATES])
    dropped = measured & (c.state == State.DROPPED.value)
    in_window = (c.end >= window_start) & (c.end <= window_end)
    ok_in_window = ok & in_window

    # Latency as the user felt it (from the intended send) and as the server served it.
    felt = {
        "ttft": distribution(c.first_token[ok] - c.intended[ok], 1000),
        "itl": distribution(c.itl_of(ok), 1000),
        "tpot": distribution(_tpot(c, ok, scenario.target.stream), 1000),
        "e2e": distribution(c.end[ok] - c.intended[ok], 1000),
    }
    service = {
        "ttft": distribution(c.first_token[ok] - c.sent[ok], 1000),
        "e2e": distribution(c.end[ok] - c.sent[ok], 1000),
    }
    has_sent = measured & ~np.isnan(c.sent)
    lag = c.sent[has_sent] - c.intended[has_sent]
    lag_stats = distribution(lag, 1000)

    by_state = {s.value: int(np.sum(c.state == s.value)) for s in State}
    n_ok, n_failed = int(ok.sum()), int(failed.sum())
    finished = n_ok + n_failed
    error_rate = n_failed / finished if finished else 0.0
    drop_base = finished + int(dropped.sum())
    drop_rate = int(dropped.sum()) / drop_base if drop_base else 0.0

    out_tokens = float(np.nansum(c.output[ok_in_window]))
    in_tokens = float(np.nansum(c.prompt[ok_in_window]))
    per_s = (lambda x: x / window) if window > 0 else (lambda x: 0.0)
    good = _meets_slo(c, ok_in_window, scenario)
    finished_in_window = int((ok_in_window | (failed & in_window)).sum())

    validity = _validity(lag_stats, by_state, scenario)
    summary: dict[str, Any] = {
        "schema_version": SUMMARY_VERSION,
        "surgelab_version": __version__,
        "name": scenario.name,
        "started_at": info.started_at,
        "mode": load.mode,
        "target": {
            "url": scenario.target.base_url,
            "model": scenario.target.model,
            "endpoint": scenario.target.endpoint,
            "stream": scenario.target.stream,
        },  # fmt: skip
        "load": {
            "rate": load.rate,
            "arrival": load.arrival.value if load.mode == "open" else None,
            "concurrency": load.concurrency,
            "planned_duration_s": load.duration,
            "warmup_s": load.warmup,
        },  # fmt: skip
        "stop_reason": info.stop_reason,
        "duration_s": window,
        "wall_s": info.wall_s,
        "requests": {
            "scheduled": len(c.state),
            "ok": by_state["ok"],
            "failed": sum(by_state[s.value] for s in FAILED_STATES),
            "dropped": by_state["dropped"],
            "cancelled": by_state["cancelled"],
            "by_state": by_state,
            "warmup": int(c.warmup.sum()),
            "measured": int(measured.sum()),
            "error_rate": error_rate,
            "drop_rate": drop_rate,
        },
        "throughput": {
            "requests_per_s": per_s(float(ok_in_window.sum())),
            "output_tokens_per_s": per_s(out_tokens),
            "input_tokens_per_s": per_s(in_tokens),
            "total_tokens_per_s": per_s(out_tokens + in_tokens),
        },
        "latency_ms": felt,
        "service_latency_ms": service,
        "schedule_lag_ms": {k: lag_stats[k] for k in ("mean", "p50", "p99", "max")},
        "validity": validity,
        "concurrency": _littles_law(c, window_start, window_end),
        "goodput": {
            "requests_per_s": per_s(float(good.sum())),
            "fraction": float(good.sum()) / finished_in_window if finished_in_window else None,
            "slo_ms": {k: (v * 1000 if v is not None else None) for k, v in scenario.slo.model_dump().items()},
        },
        "tokens": {
            "prompt_total": int(np.nansum(c.prompt[ok])),
            "output_total": int(np.nansum(c.output[ok])),
            "usage_source": {
                str(s): int(n)
                for s, n in zip(
                    *np.unique(table["usage_source"].to_numpy(zero_copy_only=False).astype(str)[ok], return_counts=True)
                )
            },  # fmt: skip
        },
    }
    results = [_judge(t, c, ok, summary) for t in scenario.thresholds]
    summary["thresholds"] = results
    summary["thresholds_passed"] = all(r["passed"] for r in results)
    return summary


def _tpot(c: _Columns, mask: np.ndarray, stream: bool) -> np.ndarray:
    if not stream:
        return np.empty(0)
    sel = mask & (c.output > 1)
    return (c.end[sel] - c.first_token[sel]) / (c.output[sel] - 1)


def _meets_slo(c: _Columns, mask: np.ndarray, scenario: Scenario) -> np.ndarray:
    slo, good = scenario.slo, mask.copy()
    with np.errstate(invalid="ignore"):
        if slo.ttft is not None:
            good &= (c.first_token - c.intended) <= slo.ttft
        if slo.e2e is not None:
            good &= (c.end - c.intended) <= slo.e2e
        if slo.tpot is not None:
            tpot = np.where(c.output > 1, (c.end - c.first_token) / np.maximum(c.output - 1, 1), 0.0)
            good &= tpot <= slo.tpot
        if slo.itl is not None:
            good &= np.nan_to_num(c.mean_itl(), nan=0.0) <= slo.itl
    return good


def _littles_law(c: _Columns, start: float, end: float) -> dict[str, float | None]:
    """Measured mean in flight against λ·W over the window (L = λW)."""
    window = end - start
    if window <= 0:
        return {"mean_in_flight": None, "littles_law_estimate": None, "arrival_rate": None, "mean_latency_s": None}
    live = ~np.isnan(c.sent) & ~np.isnan(c.end)
    overlap = np.clip(np.minimum(c.end[live], end) - np.maximum(c.sent[live], start), 0, None)
    mean_in_flight = float(overlap.sum() / window)
    done = live & (c.end >= start) & (c.end <= end)
    rate = float(done.sum() / window)
    latency = float(np.mean(c.end[done] - c.sent[done])) if done.any() else None
    return {
        "mean_in_flight": mean_in_flight,
        "littles_law_estimate": rate * latency if latency is not None else None,
        "arrival_rate": rate,
        "mean_latency_s": latency,
    }


def _validity(lag: dict[str, Any], by_state: dict[str, int], scenario: Scenario) -> dict[str, Any]:
    reasons = []
    bound_ms = scenario.validity.max_lag_p99 * 1000
    if lag["p99"] is not None and lag["p99"] > bound_ms:
        reasons.append(f"client fell behind its schedule: lag P99 {lag['p99']:.1f} ms > {bound_ms:g} ms")
    if by_state["dropped"] and not scenario.validity.allow_drops:
        reasons.append(f"{by_state['dropped']} requests dropped at max_in_flight ({scenario.load.max_in_flight})")
    return {"valid": not reasons, "reasons": reasons, "max_lag_p99_ms": bound_ms}


def _judge(threshold: Threshold, c: _Columns, ok: np.ndarray, summary: dict[str, Any]) -> dict[str, Any]:
    """Observed value of a threshold's quantity (seconds or a fraction) and its verdict."""
    if threshold.aggregation is not None:
        values = {
            "ttft": c.first_token[ok] - c.intended[ok],
            "e2e": c.end[ok] - c.intended[ok],
            "itl": c.itl_of(ok),
            "tpot": _tpot(c, ok, summary["target"]["stream"]),
        }[threshold.metric]
        values = values[~np.isnan(values)]
        agg = threshold.aggregation
        if values.size == 0:
            observed = None
        elif agg in ("mean", "min", "max"):
            observed = float(getattr(np, agg)(values))
        else:
            observed = float(np.percentile(values, float(agg[1:])))
    else:
        observed = {
            "error_rate": summary["requests"]["error_rate"],
            "drop_rate": summary["requests"]["drop_rate"],
            "throughput": summary["throughput"]["requests_per_s"],
            "output_tokens_per_s": summary["throughput"]["output_tokens_per_s"],
            "goodput": summary["goodput"]["requests_per_s"],
        }[threshold.metric]
    return {"expr": threshold.expr, "metric": threshold.key, "observed": observed, "passed": threshold.passes(observed),
            "abort_on_fail": threshold.abort_on_fail}  # fmt: skip
