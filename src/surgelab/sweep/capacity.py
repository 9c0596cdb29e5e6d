"""Stop rules and the SLA capacity, both judged on a level's row with the scenario's thresholds.

A threshold (``p99(ttft) < 500ms``, ``error_rate < 1%``) is read against a level row the
way ``summary.json`` judges it, from the row's exact percentiles. The SLA capacity is the
seeds' rule: only throughput that meets every SLO at the chosen percentile counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from surgelab.conditions import Threshold
from surgelab.scenario.model import Slo
from surgelab.sweep.config import StopRules
from surgelab.sweep.result import LevelRow

__all__ = ["observe", "slo_thresholds", "sla_capacity", "stop_reason"]


def observe(threshold: Threshold, row: LevelRow) -> float | None:
    """The threshold's quantity on a level: seconds for latencies, a fraction or a rate otherwise."""
    if threshold.aggregation is not None:
        ms = row.latency(threshold.metric, threshold.aggregation)
        if ms is None and threshold.aggregation not in ("mean", "p50", "p90", "p95", "p99"):
            raise ValueError(f"{threshold.expr!r}: a sweep keeps mean, p50, p90, p95 and p99 only")
        return None if ms is None else ms / 1000.0
    return {
        "error_rate": row.error_rate,
        "drop_rate": None,
        "throughput": row.requests_per_s,
        "output_tokens_per_s": row.output_tokens_per_s,
        "goodput": row.goodput_per_s,
    }[threshold.metric]


def slo_thresholds(slo: Slo, percentile: str = "p99") -> list[Threshold]:
    """The scenario's SLOs as ``pNN(metric) <= bound`` thresholds."""
    return [
        Threshold(expr=f"{percentile}({name}) <= {value * 1000:g}ms")
        for name, value in slo.model_dump().items()
        if value is not None
    ]


def sla_capacity(rows: Sequence[LevelRow], slos: Sequence[Threshold], max_error_rate: float) -> dict[str, Any] | None:
    """The highest level (by offered load) that meets every SLO and the error limit.

    Its achieved requests/s is the per-instance capacity planning uses. None when no level
    qualifies. A level whose latency has no data (nothing succeeded) does not qualify.
    """
    best: LevelRow | None = None
    for row in sorted(rows, key=lambda r: r.offered):
        if row.error_rate > max_error_rate or row.measured == 0:
            continue
        if all(s.passes(observe(s, row)) for s in slos):
            best = row
    if best is None:
        return None
    return {
        "index": best.index,
        "level": best.offered,
        "requests_per_s": best.requests_per_s,
        "output_tokens_per_s": best.output_tokens_per_s,
        "mean_in_flight": best.mean_in_flight,
        "error_rate": best.error_rate,
        "valid": best.valid,
        "slo": [s.expr for s in slos],
        "max_error_rate": max_error_rate,
    }


def stop_reason(rows: Sequence[LevelRow], rules: StopRules, slo_bounds: Sequence[Threshold]) -> str | None:
    """Why the sweep must stop after the last row (rows in run order), or None to go on."""
    last = rows[-1]
    if last.error_rate > rules.max_error_rate:
        return f"error rate {last.error_rate:.1%} > {rules.max_error_rate:.1%} at {last.offered:g}"
    for bound in slo_bounds:
        limit = bound.value * rules.slo_multiple
        seen = observe(Threshold(expr=f"p99({bound.metric}) > {limit}s"), last)
        if seen is not None and seen > limit:
            return (
                f"p99({bound.metric}) {seen * 1000:,.0f} ms > {rules.slo_multiple:g} × SLO "
                f"({bound.value * 1000:g} ms) at {last.offered:g}"
            )
    for cond in rules.stop_when:
        seen = observe(cond, last)
        if seen is not None and cond.passes(seen):
            return f"{cond.expr!r} held at {last.offered:g}"
    n = rules.falling_levels
    if n and len(rows) > n:
        tail = [r.requests_per_s for r in rows[-(n + 1) :]]
        if all(b < a * (1 - rules.falling_tolerance) for a, b in zip(tail, tail[1:])):
            return f"throughput fell {n} levels in a row ({' → '.join(f'{t:.3g}' for t in tail)} req/s)"
    return None
