"""Alert conditions written the way an operator says them, turned into Prometheus rules.

Seed 004 writes its latency alert as "P90 > 1.5 s for 5 minutes"; here that is
``p90(e2e) > 1.5s for 5m``. Any percentile of a latency, its mean, the error rate, or a gauge
(the server's queue, requests running, KV-cache use, GPU utilisation from NVIDIA's DCGM
exporter) over any hold time. Latencies and errors read surgelab's own exporter (what users
feel, ``source="client"``) or the server's (``source="server"``); the server's series are its
engine's (``engine``, a telemetry preset: vLLM unless told), written by ``telemetry.promql``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from surgelab.conditions import LATENCY_METRICS, Threshold
from surgelab.telemetry.presets import PRESETS, Preset
from surgelab.telemetry.promql import CLIENT, Promql, rule
from surgelab.units import parse_duration, parse_ratio

__all__ = ["AlertCondition", "GAUGES", "parse_alert", "alert_rule"]

Source = Literal["client", "server"]

GAUGES: dict[str, tuple[str, float]] = {  # name → (role, what 100 % is in the series' unit)
    "queue": ("waiting", 1.0),
    "running": ("running", 1.0),
    "kv_usage": ("kv_usage", 1.0),
    "gpu_util": ("gpu_util", 100.0),  # DCGM reports percent
}
_RULE = re.compile(r"^\s*(?P<cond>.+?)\s+for\s+(?P<hold>\S+)\s*$")
_GAUGE = re.compile(r"^\s*(?P<name>\w+)\s*(?P<op><=|>=|<|>)\s*(?P<value>\S+)\s*$")
_FORMS = "forms: 'p90(e2e) > 1.5s for 5m', 'mean(ttft) > 800ms for 10m', 'error_rate > 1% for 5m', 'queue > 10 for 2m', 'gpu_util > 90% for 15m'"


@dataclass(frozen=True)
class AlertCondition:
    """One parsed condition: a metric, its aggregation, a bound and how long it must hold."""

    expr: str
    metric: str
    aggregation: str | None  # p90, mean … for latencies
    op: str
    value: float  # seconds for latencies, a fraction for the error rate, the gauge's own unit otherwise
    hold_s: float

    @property
    def key(self) -> str:
        return f"{self.aggregation}({self.metric})" if self.aggregation else self.metric


def parse_alert(expr: str) -> AlertCondition:
    """``p90(e2e) > 1.5s for 5m`` → an ``AlertCondition``; ValueError with the accepted forms otherwise."""
    m = _RULE.match(expr)
    if not m:
        raise ValueError(f"cannot read alert {expr!r}: it needs 'for DURATION' at the end; {_FORMS}")
    try:
        hold = parse_duration(m["hold"])
    except ValueError as exc:
        raise ValueError(f"alert {expr!r}: {exc}") from None
    cond = m["cond"]
    if (g := _GAUGE.match(cond)) and g["name"] in GAUGES:
        scale = GAUGES[g["name"]][1]
        raw = g["value"]
        try:
            value = parse_ratio(raw) * scale if raw.endswith("%") else float(raw)
        except ValueError as exc:
            raise ValueError(f"alert {expr!r}: {exc}") from None
        return AlertCondition(expr, g["name"], None, g["op"], value, hold)
    try:
        threshold = Threshold(expr=cond)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ValueError(f"alert {expr!r}: {message}; or a gauge: {', '.join(GAUGES)}") from None
    if threshold.aggregation is None and threshold.metric != "error_rate":
        raise ValueError(f"alert {expr!r}: {threshold.metric} cannot be alerted on; {_FORMS}")
    if threshold.aggregation is not None and not (
        threshold.aggregation == "mean" or threshold.aggregation.startswith("p")
    ):
        raise ValueError(f"alert {expr!r}: use a percentile (p50…p99.9) or mean for latencies")
    return AlertCondition(expr, threshold.metric, threshold.aggregation, threshold.op, threshold.value, hold)


def _hold(seconds: float) -> str:
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else f"{seconds:g}s"


def _expression(c: AlertCondition, source: Source, window: str, engine: Preset) -> str:
    server = Promql(engine)
    if c.metric in GAUGES:
        by = "gpu, Hostname" if c.metric == "gpu_util" else "pod"
        return f"{server.gauge(GAUGES[c.metric][0], by=by)} {c.op} {c.value:g}"
    side = server if source == "server" else Promql(CLIENT)
    if c.metric == "error_rate":
        return f"{side.error_ratio(window)} {c.op} {c.value:g}"
    if c.metric not in LATENCY_METRICS or not side.has(c.metric):
        known = ", ".join(m for m in side.preset.latency if m in LATENCY_METRICS)
        raise ValueError(f"alert {c.expr!r}: the {source}'s metrics have no {c.metric} histogram (have {known})")
    if c.aggregation == "mean":
        return f"{side.mean(c.metric, window)} {c.op} {c.value:g}"
    quantile = float(c.aggregation[1:]) / 100  # type: ignore[index]
    return f"{side.quantile(quantile, c.metric, window)} {c.op} {c.value:g}"


def _side(c: AlertCondition, source: Source) -> str:
    return "server" if source == "server" or c.metric in GAUGES else "client"


def _name(c: AlertCondition, source: Source) -> str:
    what = f"{(c.aggregation or '').capitalize()}{c.metric.replace('_', ' ').title().replace(' ', '')}"
    side = "Server" if _side(c, source) == "server" and c.metric not in GAUGES else ""
    direction = "Above" if c.op in (">", ">=") else "Below"
    return f"Inference{side}{what}{direction}{c.value:g}".replace(".", "_")


def alert_rule(
    c: AlertCondition, source: Source = "client", window: str = "5m", severity: str = "warning",
    engine: Preset = PRESETS["vllm"],
) -> dict[str, Any]:
    """One Prometheus alerting rule (``alert``, ``expr``, ``for``, ``labels``, ``annotations``)."""
    if c.metric in LATENCY_METRICS:
        shown = f"{c.value * 1000:g} ms" if c.value < 1 else f"{c.value:g} s"
    elif c.metric == "error_rate":
        shown = f"{c.value:.2%}"
    else:
        shown = f"{c.value:g}"
    return rule(
        _name(c, source), _expression(c, source, window, engine), _hold(c.hold_s), severity,
        summary=f"{c.expr} ({_side(c, source)} side)",
        description=f"{c.key} {c.op} {shown}, held for {_hold(c.hold_s)}: written by surgelab from '{c.expr}'.",
    )
