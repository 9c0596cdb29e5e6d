"""Sections beyond a single run: sweeps (``sweep.json``) and simulations (``simulation.json``).

The report model asks each reader in ``READERS`` for its section; a reader returns None when
its file is absent. ``surgelab sweep`` and ``surgelab simulate`` plug in here by adding or
refining a reader — the HTML page draws the documented shapes below.

* ``sweep`` (from ``sweep.json``): ``{"points": [{"offered", "throughput", "ttft_p99_ms",
  "e2e_p99_ms", ...}], "knee": {"offered", "throughput"} | None, "slo_ms": {"ttft": ..},
  "plan": <the SLA capacity> | None}``
* ``fleet`` (a simulation's ``fleet.parquet``): provisioned and ready replicas, requests inside
  them and in the router's queue, utilisation, cost per hour and scaling events (report/fleet.py)
* ``rate_limits`` (a run whose provider sent rate-limit headers, docs/networks.md): per second
  of the run, ``{"t": [...], "remaining_requests": [...], "remaining_tokens": [...],
  "throttled_per_s": [...]}`` — the fewest requests and tokens left among the answers that
  ended in that second (null when none said; ``…_most``: the most), and the 429s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from surgelab.analysis.columns import ColumnSource, seconds
from surgelab.analysis.stats import min_count, sparse_percentile
from surgelab.report.fleet import read_fleet
from surgelab.report.unreadable import Unreadable, why
from surgelab.sweep.result import SweepFileError, read_sweep
from surgelab.units import parse_duration

__all__ = ["READERS", "Unreadable", "extensions_for", "why"]

Reader = Callable[[Path], "dict[str, Any] | None"]


def _slo_ms(expressions: list[str]) -> dict[str, float]:
    """``p99(ttft) <= 200ms`` → ``{"ttft": 200.0}`` (a bare number is seconds; ms on the chart)."""
    out = {}
    for expr in expressions:
        m = re.match(r"\s*p\d+\((\w+)\)\s*<=?\s*(\S+)\s*$", expr)
        if m:
            try:
                out[m.group(1)] = float(parse_duration(m.group(2))) * 1000.0
            except (TypeError, ValueError):
                continue
    return out


def _sweep(run_dir: Path) -> dict[str, Any] | None:
    """``sweep.json`` (written by ``surgelab sweep``) as the curve, knee, SLO lines and capacity."""
    if not (run_dir / "sweep.json").exists():
        return None
    try:
        result = read_sweep(run_dir / "sweep.json")
    except SweepFileError as exc:
        raise Unreadable(f"sweep.json cannot be read ({why(exc)}): the sweep sections are left out") from None
    rows = result.sorted_levels()
    points = [
        {"offered": r.offered, "achieved": r.achieved_load, "throughput": r.requests_per_s, "goodput": r.goodput_per_s,
         "measured": r.measured, "sparse": sparse_percentile(r.measured, 99),
         "ttft_p50_ms": r.latency("ttft", "p50"), "ttft_p99_ms": r.latency("ttft", "p99"),
         "e2e_p50_ms": r.latency("e2e", "p50"), "e2e_p99_ms": r.latency("e2e", "p99"),
         "tpot_p50_ms": r.latency("tpot", "p50"), "tpot_p99_ms": r.latency("tpot", "p99"),
         "itl_p50_ms": r.latency("itl", "p50"), "itl_p99_ms": r.latency("itl", "p99"), "run_dir": r.run_dir,
         "error_rate": r.error_rate, "stage": r.stage, "valid": r.valid, "validity_reasons": r.validity_reasons,
         "diagnosis": r.diagnosis}
        for r in rows
    ]  # fmt: skip
    knee = None
    if result.knee.get("level") is not None:
        at = next((r for r in rows if r.offered == result.knee["level"]), None)
        knee = {"offered": result.knee["level"], "throughput": at.requests_per_s if at else None,
                "reason": result.knee.get("reason", ""), "sparse": bool(at and sparse_percentile(at.measured, 99))}  # fmt: skip
    plan = result.sla_capacity
    if plan is not None:
        at = next((r for r in rows if r.index == plan.get("index")), None)
        plan = {**plan, "measured": at.measured if at else None, "sparse": bool(at and sparse_percentile(at.measured, 99))}
    return {"name": result.name, "unit": result.unit, "points": points, "knee": knee, "slo_ms": _slo_ms(result.slo),
            "plan": plan, "stop_reason": result.stop_reason, "min_count_p99": min_count(99)}  # fmt: skip


def _rate_limits(run_dir: Path) -> dict[str, Any] | None:
    """The provider's quota left over the run, a second at a time; None when it never said."""
    try:
        source = ColumnSource(run_dir)
    except (OSError, ValueError):
        return None
    if not source.has("ratelimit_requests"):
        return None
    requests, tokens = source.floats("ratelimit_requests"), source.floats("ratelimit_tokens")
    said = np.isfinite(requests) | np.isfinite(tokens)
    end = source.numpy("end_ns", seconds)
    if end is None or not (said & np.isfinite(end)).any():
        return None
    throttled = source.floats("http_status") == 429
    n = int(np.nanmax(end)) + 1
    second = np.where(np.isfinite(end), end, -1).astype(np.int64)
    out: dict[str, Any] = {"t": [k + 0.5 for k in range(n)]}
    for key, values in (("remaining_requests", requests), ("remaining_tokens", tokens)):
        least, most = np.full(n, np.inf), np.full(n, -np.inf)
        keep = (second >= 0) & np.isfinite(values)
        np.minimum.at(least, second[keep], values[keep])
        np.maximum.at(most, second[keep], values[keep])
        out[key] = [None if not np.isfinite(v) else int(v) for v in least]
        out[key + "_most"] = [None if not np.isfinite(v) else int(v) for v in most]
    out["throttled_per_s"] = np.bincount(second[(second >= 0) & throttled], minlength=n)[:n].tolist()
    return out


READERS: dict[str, Reader] = {"sweep": _sweep, "fleet": read_fleet, "rate_limits": _rate_limits}


def extensions_for(run_dir: Path | str, problems: list[str] | None = None) -> dict[str, Any]:
    """Every section whose file exists; one that cannot be read adds its sentence to ``problems``."""
    out = {}
    for name, reader in READERS.items():
        try:
            section = reader(Path(run_dir))
        except Unreadable as exc:
            if problems is None:
                raise ValueError(str(exc)) from None
            problems.append(str(exc))
            continue
        if section is not None:
            out[name] = section
    return out
