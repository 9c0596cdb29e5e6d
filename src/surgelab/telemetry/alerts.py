"""Prometheus alert rules for a service under watch (``surgelab alerts``).

Rules on surgelab's own exporter (what users feel, as a probe measures it) and, when the
target is a vLLM-compatible server, on its histograms too. A sweep's knee gives the
throughput alert its threshold: traffic near the knee is where latency turns up.
"""

from __future__ import annotations

from typing import Any

__all__ = ["alert_rules"]


def _rule(name: str, expr: str, for_: str, severity: str, summary: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity}, "annotations": {"summary": summary}}


def alert_rules(
    ttft_p99_s: float | None = 2.0,
    e2e_p99_s: float | None = None,
    error_rate: float = 0.01,
    knee_rps: float | None = None,
    near_knee: float = 0.8,
    for_minutes: int = 5,
    vllm: bool = False,
) -> dict[str, Any]:
    """A rule file: ``{"groups": [{"name": ..., "rules": [...]}]}``."""
    window, hold = "5m", f"{for_minutes}m"
    rules = []
    if ttft_p99_s is not None:
        rules.append(_rule(
            "SurgelabTTFTP99AboveSLO",
            f"histogram_quantile(0.99, sum by (le) (rate(surgelab_ttft_seconds_bucket[{window}]))) > {ttft_p99_s:g}",
            hold, "warning", f"P99 time to first token above {ttft_p99_s:g}s for {hold}",
        ))  # fmt: skip
    if e2e_p99_s is not None:
        rules.append(_rule(
            "SurgelabE2EP99AboveSLO",
            f"histogram_quantile(0.99, sum by (le) (rate(surgelab_e2e_seconds_bucket[{window}]))) > {e2e_p99_s:g}",
            hold, "warning", f"P99 end-to-end latency above {e2e_p99_s:g}s for {hold}",
        ))  # fmt: skip
    rules.append(_rule(
        "SurgelabErrorRateHigh",
        f'sum(rate(surgelab_requests_total{{state!~"ok|dropped|cancelled"}}[{window}])) / '
        f'sum(rate(surgelab_requests_total{{state!~"dropped|cancelled"}}[{window}])) > {error_rate:g}',
        hold, "critical", f"error rate above {error_rate:.2%} for {hold}",
    ))  # fmt: skip
    rules.append(_rule(
        "SurgelabClientFallingBehind",
        f"histogram_quantile(0.99, sum by (le) (rate(surgelab_schedule_lag_seconds_bucket[{window}]))) > 0.05",
        hold, "info", "the load generator lags its schedule: its figures understate the load",
    ))  # fmt: skip
    if knee_rps is not None:
        limit = knee_rps * near_knee
        rules.append(_rule(
            "ThroughputNearKnee",
            f'sum(rate(surgelab_requests_total{{state="ok"}}[{window}])) > {limit:g}'
            + (f" or sum(rate(vllm:e2e_request_latency_seconds_count[{window}])) > {limit:g}" if vllm else ""),
            hold, "warning",
            f"throughput above {near_knee:.0%} of the measured knee ({knee_rps:g} req/s): latency turns up beyond it",
        ))  # fmt: skip
    if vllm and ttft_p99_s is not None:
        rules.append(_rule(
            "VLLMServerTTFTP99AboveSLO",
            f"histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[{window}]))) > {ttft_p99_s:g}",
            hold, "warning", f"the server's own P99 TTFT above {ttft_p99_s:g}s",
        ))  # fmt: skip
        rules.append(_rule(
            "VLLMRequestsWaiting",
            f"avg_over_time(vllm:num_requests_waiting[{window}]) > 0 and max_over_time(vllm:kv_cache_usage_perc[{window}]) > 0.95",
            hold, "warning", "requests queue while the KV cache is full: memory-bound admission",
        ))  # fmt: skip
    return {"groups": [{"name": "surgelab", "rules": rules}]}
