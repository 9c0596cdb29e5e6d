"""Prometheus alert rules for a service under watch against its SLOs (``surgelab alerts``).

Rules on surgelab's own exporter (what users feel, as a probe measures it) and, given the
target's engine (``server``, a telemetry preset), on the server's own histograms and gauges too.
A sweep's knee gives the throughput alert its threshold: traffic near the knee is where
latency turns up. A rule on a series the engine does not export is left out; ``missing`` says which.
"""

from __future__ import annotations

from typing import Any

from surgelab.telemetry.presets import Preset
from surgelab.telemetry.promql import CLIENT, ROLE_WORDS, Promql, rule

__all__ = ["slo_alert_rules", "missing"]


def slo_alert_rules(
    ttft_p99_s: float | None = 2.0,
    e2e_p99_s: float | None = None,
    error_rate: float = 0.01,
    knee_rps: float | None = None,
    near_knee: float = 0.8,
    for_minutes: int = 5,
    server: Preset | None = None,
) -> dict[str, Any]:
    """A rule file: ``{"groups": [{"name": ..., "rules": [...]}]}``."""
    window, hold = "5m", f"{for_minutes}m"
    client, engine = Promql(CLIENT), Promql(server) if server is not None else None
    rules = []
    if ttft_p99_s is not None:
        rules.append(rule(
            "SurgelabTTFTP99AboveSLO", f"{client.quantile(0.99, 'ttft', window)} > {ttft_p99_s:g}",
            hold, "warning", summary=f"P99 time to first token above {ttft_p99_s:g}s for {hold}",
        ))  # fmt: skip
    if e2e_p99_s is not None:
        rules.append(rule(
            "SurgelabE2EP99AboveSLO", f"{client.quantile(0.99, 'e2e', window)} > {e2e_p99_s:g}",
            hold, "warning", summary=f"P99 end-to-end latency above {e2e_p99_s:g}s for {hold}",
        ))  # fmt: skip
    rules.append(rule(
        "SurgelabErrorRateHigh", f"{client.error_ratio(window)} > {error_rate:g}",
        hold, "critical", summary=f"error rate above {error_rate:.2%} for {hold}",
    ))  # fmt: skip
    rules.append(rule(
        "SurgelabClientFallingBehind", f"{client.quantile(0.99, 'lag', window)} > 0.05",
        hold, "info", summary="the load generator lags its schedule: its figures understate the load",
    ))  # fmt: skip
    if knee_rps is not None:
        limit = knee_rps * near_knee
        served = f" or {engine.count_rate('e2e', window)} > {limit:g}" if engine and engine.has("e2e") else ""
        rules.append(rule(
            "ThroughputNearKnee", f"{client.rate('completed', window)} > {limit:g}" + served, hold, "warning",
            summary=f"throughput above {near_knee:.0%} of the measured knee ({knee_rps:g} req/s): latency turns up beyond it",
        ))  # fmt: skip
    if engine is None:
        return {"groups": [{"name": "surgelab", "rules": rules}]}
    title = engine.preset.title
    if ttft_p99_s is not None and engine.has("ttft"):
        rules.append(rule(
            f"{title}ServerTTFTP99AboveSLO", f"{engine.quantile(0.99, 'ttft', window)} > {ttft_p99_s:g}",
            hold, "warning", summary=f"the server's own P99 TTFT above {ttft_p99_s:g}s",
        ))  # fmt: skip
    if ttft_p99_s is not None and engine.has("kv_usage"):
        waiting, kv = engine.series("waiting"), engine.series("kv_usage")
        rules.append(rule(
            f"{title}RequestsWaiting",
            f"avg_over_time({waiting}[{window}]) > 0 and max_over_time({kv}[{window}]) > 0.95",
            hold, "warning", summary="requests queue while the KV cache is full: memory-bound admission",
        ))  # fmt: skip
    return {"groups": [{"name": "surgelab", "rules": rules}]}


def missing(server: Preset, roles: tuple[str, ...] = ("ttft", "e2e", "kv_usage")) -> list[str]:
    """What the server's rules would read and its engine does not export, in words."""
    return [f"{server.name} exports no {ROLE_WORDS[r]}" for r in roles if not Promql(server).has(r)]
