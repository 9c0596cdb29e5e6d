"""From raw samples to figures: gauges averaged, counters turned into rates, histograms into
percentiles, scrape failures into gaps — over a run's measurement window.

Counters are reset-aware (a drop means the server restarted; the increase restarts from the
new value), and histogram percentiles interpolate linearly inside the bucket, as PromQL's
``histogram_quantile`` does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa

from surgelab.telemetry.presets import PRESETS, PROCESS_MEMORY, detect_preset
from surgelab.telemetry.samples import parse_labels

__all__ = ["summarize_telemetry", "series_over_time", "memory_series", "increase", "histogram_quantile"]

QUANTILES = (0.5, 0.9, 0.99)


def increase(values: np.ndarray) -> float:
    """Total growth of a counter across its samples, across resets."""
    if values.size < 2:
        return 0.0
    steps = np.diff(values)
    return float(np.where(steps >= 0, steps, values[1:]).sum())


def histogram_quantile(q: float, bounds: np.ndarray, cumulative: np.ndarray) -> float | None:
    """The q-quantile from cumulative bucket counts with upper bounds ``bounds`` (the last +Inf)."""
    order = np.argsort(bounds)
    bounds, cumulative = bounds[order], cumulative[order]
    total = cumulative[-1] if cumulative.size else 0
    if total <= 0:
        return None
    rank = q * total
    i = int(np.searchsorted(cumulative, rank, side="left"))
    if i >= len(bounds) - 1 and np.isinf(bounds[-1]):
        return float(bounds[-2]) if len(bounds) > 1 else None  # in the +Inf bucket: its lower bound
    lower = bounds[i - 1] if i > 0 else 0.0
    below = cumulative[i - 1] if i > 0 else 0.0
    inside = cumulative[i] - below
    return float(lower + (bounds[i] - lower) * ((rank - below) / inside if inside > 0 else 1.0))


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    return {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}


def _sources(c: dict[str, np.ndarray]) -> dict[str, Any]:
    result = {}
    for source in sorted(set(c["source"].tolist())):
        rows = (c["source"] == source) & (c["metric"] == "up")
        t, up, labels = c["t_ns"][rows] / 1e9, c["value"][rows], c["labels"][rows]
        gaps, start = [], None
        for when, ok, label in zip(t, up, labels):
            if not ok and start is None:
                start = (when, parse_labels(label).get("error", "unknown"))
            elif ok and start is not None:
                gaps.append({"from_s": round(start[0], 3), "to_s": round(when, 3), "error": start[1]})
                start = None
        if start is not None:
            gaps.append({"from_s": round(start[0], 3), "to_s": None, "error": start[1]})
        names = set(c["metric"][c["source"] == source].tolist())
        preset = detect_preset(names)
        result[source] = {
            "preset": preset.name if preset else None,
            "scrapes": int(up.size),
            "failed": int((up == 0).sum()),
            "up_fraction": float(up.mean()) if up.size else None,
            "gaps": gaps,
        }
    return result


def _key(source: str, metric: str, labels: str, many: bool) -> str:
    return f"{source}/{metric}" + (f"{{{labels}}}" if many and labels else "")


def summarize_telemetry(table: pa.Table, start_s: float, end_s: float) -> dict[str, Any]:
    """``summary.json``'s telemetry block: sources (with gaps), series, and the roles the analysis reads."""
    if table.num_rows == 0:
        return {}
    c = _columns(table)
    sources = _sources(c)
    t = c["t_ns"] / 1e9
    inside = (t >= start_s) & (t <= end_s) & (c["metric"] != "up") & (c["metric"] != "scrape_duration_seconds")
    series: dict[str, Any] = {}
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i in np.flatnonzero(inside).tolist():
        groups[(c["source"][i], c["metric"][i], c["labels"][i])].append(i)
    label_sets: dict[tuple[str, str], int] = defaultdict(int)
    for source, metric, _ in groups:
        label_sets[(source, metric)] += 1
    buckets: dict[tuple[str, str, str], dict[float, np.ndarray]] = defaultdict(dict)
    for (source, metric, labels), idx in groups.items():
        values, kind = c["value"][idx], c["kind"][idx[0]]
        if metric.endswith("_bucket") and kind == "histogram":
            parsed = parse_labels(labels)
            bound = float(parsed.pop("le", "inf").replace("+Inf", "inf"))
            rest = ",".join(f"{k}={v}" for k, v in sorted(parsed.items()))
            buckets[(source, metric[: -len("_bucket")], rest)][bound] = values
            continue
        many = label_sets[(source, metric)] > 1
        if kind == "counter" or (kind == "histogram" and metric.endswith(("_count", "_sum"))):
            span = t[idx[-1]] - t[idx[0]]
            series[_key(source, metric, labels, many) + ":rate"] = {"rate_per_s": increase(values) / span if span > 0 else None}
        elif kind in ("gauge", "untyped", "unknown"):
            series[_key(source, metric, labels, many)] = {
                "mean": float(values.mean()), "max": float(values.max()), "min": float(values.min()),
                "last": float(values[-1]), "samples": int(values.size),
            }  # fmt: skip
    for (source, metric, labels), by_bound in buckets.items():
        bounds = np.array(sorted(by_bound))
        growth = np.array([increase(by_bound[b]) for b in bounds])
        entry = {f"p{int(q * 100)}": histogram_quantile(q, bounds, growth) for q in QUANTILES}
        entry["count"] = float(growth[-1]) if growth.size else 0.0
        series[_key(source, metric, labels, True)] = entry
    return {"sources": sources, "series": series, "roles": _roles(series, sources)}


def _roles(series: dict[str, Any], sources: dict[str, Any]) -> dict[str, Any]:
    """running / waiting / kv_usage / gpu_util / memory_used, by whatever name each server uses."""
    roles: dict[str, Any] = {}
    for source, info in sources.items():
        preset = PRESETS.get(info["preset"] or "")
        if preset is None:
            continue
        for role, names in preset.roles.items():
            for name in names.split("|"):
                stats = [v for k, v in series.items() if k.split("{")[0] == f"{source}/{name}" and "mean" in v]
                if stats:
                    roles[role] = {
                        "source": source, "metric": name,
                        "mean": float(np.mean([s["mean"] for s in stats])), "max": float(max(s["max"] for s in stats)),
                    }  # fmt: skip
                    break
    return roles


def memory_series(table: pa.Table) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each scraped source's resident memory over time (``process_resident_memory_bytes``), when it exports it."""
    c = _columns(table)
    sources = np.unique(c["source"][c["metric"] == PROCESS_MEMORY])
    return {str(s): series_over_time(table, str(s), PROCESS_MEMORY) for s in sources}


def series_over_time(table: pa.Table, source: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, value) of one series for plotting; counters become per-second rates."""
    c = _columns(table)
    rows = (c["source"] == source) & (c["metric"] == metric)
    t, v = c["t_ns"][rows] / 1e9, c["value"][rows]
    if rows.any() and c["kind"][rows][0] == "counter" and t.size > 1:
        steps = np.diff(v)
        return t[1:], np.where(steps >= 0, steps, v[1:]) / np.diff(t)
    return t, v
