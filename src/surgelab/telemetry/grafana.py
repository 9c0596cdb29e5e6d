"""A Grafana dashboard for surgelab's exporter (``surgelab grafana``).

Plain dashboard JSON (schema version 39) with a ``datasource`` template variable, so it
imports into any Grafana with a Prometheus data source.
"""

from __future__ import annotations

from typing import Any

__all__ = ["dashboard"]

_PANELS = (
    ("Requests per second by state", "sum by (state) (rate(surgelab_requests_total{run=~\"$run\"}[1m]))", "reqps"),
    ("TTFT p50 / p99 (from intended send)", [
        "histogram_quantile(0.5, sum by (le) (rate(surgelab_ttft_seconds_bucket{run=~\"$run\"}[1m])))",
        "histogram_quantile(0.99, sum by (le) (rate(surgelab_ttft_seconds_bucket{run=~\"$run\"}[1m])))",
    ], "s"),
    ("E2E p50 / p99", [
        "histogram_quantile(0.5, sum by (le) (rate(surgelab_e2e_seconds_bucket{run=~\"$run\"}[1m])))",
        "histogram_quantile(0.99, sum by (le) (rate(surgelab_e2e_seconds_bucket{run=~\"$run\"}[1m])))",
    ], "s"),
    ("Inter-token latency p50 / p99", [
        "histogram_quantile(0.5, sum by (le) (rate(surgelab_itl_seconds_bucket{run=~\"$run\"}[1m])))",
        "histogram_quantile(0.99, sum by (le) (rate(surgelab_itl_seconds_bucket{run=~\"$run\"}[1m])))",
    ], "s"),
    ("Error rate", "sum(rate(surgelab_requests_total{run=~\"$run\",state!~\"ok|dropped|cancelled\"}[1m])) / "
     "sum(rate(surgelab_requests_total{run=~\"$run\",state!~\"dropped|cancelled\"}[1m]))", "percentunit"),
    ("Output tokens per second", "sum(rate(surgelab_output_tokens_total{run=~\"$run\"}[1m]))", "short"),
    ("In flight", "sum(surgelab_in_flight{run=~\"$run\"})", "short"),
    ("Schedule lag p99 (client health)",
     "histogram_quantile(0.99, sum by (le) (rate(surgelab_schedule_lag_seconds_bucket{run=~\"$run\"}[1m])))", "s"),
)  # fmt: skip


def dashboard(title: str = "surgelab") -> dict[str, Any]:
    panels = []
    for i, (name, exprs, unit) in enumerate(_PANELS):
        exprs = [exprs] if isinstance(exprs, str) else exprs
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": name,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + k), "expr": expr, "legendFormat": "__auto"} for k, expr in enumerate(exprs)
                ],
            }
        )
    return {
        "title": title,
        "uid": "surgelab",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "tags": ["surgelab", "load-test"],
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
                {
                    "name": "run", "type": "query", "label": "Run", "includeAll": True, "multi": True,
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": "label_values(surgelab_requests_total, run)", "refresh": 2,
                },
            ]
        },  # fmt: skip
        "panels": panels,
    }
