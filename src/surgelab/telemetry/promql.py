"""PromQL on a server's metrics by role: the one builder of alert rules and autoscaler queries.

Each engine names its series differently (``vllm:num_requests_waiting``, ``sglang:num_queue_reqs``,
``tgi_queue_size``); ``telemetry.presets`` maps the roles to those names once, and every rule
surgelab writes (``surgelab alerts``, a plan's ``alerts.yaml``, ``hpa.yaml`` and ``adapter.yaml``)
asks this module for a role, never for a name. ``CLIENT`` is surgelab's own exporter, seen the
same way. A role an engine does not export is a ValueError that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surgelab.telemetry.presets import PRESETS, Preset

__all__ = ["CLIENT", "ENGINES", "ROLE_WORDS", "Promql", "engine", "rule"]

CLIENT = Preset(
    "surgelab",
    "surgelab_",
    (),
    title="Surgelab",
    latency={"ttft": "surgelab_ttft_seconds", "e2e": "surgelab_e2e_seconds", "itl": "surgelab_itl_seconds",
             "lag": "surgelab_schedule_lag_seconds"},
    completed='surgelab_requests_total{state="ok"}',
    errors=('surgelab_requests_total{state!~"ok|dropped|cancelled"}', 'surgelab_requests_total{state!~"dropped|cancelled"}'),
)  # fmt: skip
"""surgelab's own exporter (``run --prometheus-port``): what users feel, as a probe measures it."""

ENGINES = tuple(name for name, preset in PRESETS.items() if "waiting" in preset.roles)
"""The inference servers a rule can be written for (the presets with a queue)."""

ROLE_WORDS = {
    "running": "requests-running gauge", "waiting": "requests-waiting gauge", "kv_usage": "KV-cache usage gauge",
    "gpu_util": "GPU utilisation gauge", "ttft": "TTFT histogram", "e2e": "end-to-end latency histogram",
    "itl": "inter-token latency histogram", "tpot": "time-per-output-token histogram",
    "completed": "completed-requests counter", "errors": "failed-requests counter",
}  # fmt: skip


def engine(name: str) -> Preset:
    """The preset of an inference server by name; ValueError listing the known ones."""
    if name not in ENGINES:
        raise ValueError(f"--engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    return PRESETS[name]


@dataclass(frozen=True)
class Promql:
    """Expressions on one server's series (``preset``); GPU utilisation from NVIDIA's DCGM exporter."""

    preset: Preset

    def has(self, role: str) -> bool:
        try:
            self.series(role)
        except ValueError:
            return False
        return True

    def series(self, role: str) -> str:
        """The series a role is read from (its current name, where a preset lists older ones too)."""
        p = self.preset
        if role == "gpu_util" and role not in p.roles:
            return PRESETS["dcgm"].roles["gpu_util"]
        name = p.roles.get(role) or p.latency.get(role) or (p.completed if role == "completed" else "")
        if not name:
            raise ValueError(f"{p.name} exports no {ROLE_WORDS.get(role, role)}")
        return name.split("|")[0]

    def quantile(self, q: float, role: str, window: str) -> str:
        return f"histogram_quantile({q:g}, sum by (le) (rate({self.series(role)}_bucket[{window}])))"

    def mean(self, role: str, window: str) -> str:
        h = self.series(role)
        return f"sum(rate({h}_sum[{window}])) / sum(rate({h}_count[{window}]))"

    def rate(self, role: str, window: str, by: str | None = None) -> str:
        """A counter's rate, summed (per ``by`` when given)."""
        inner = f"rate({self.series(role)}[{window}])"
        return f"sum by ({by}) ({inner})" if by else f"sum({inner})"

    def count_rate(self, role: str, window: str) -> str:
        """Observations per second of a histogram: requests/s where the histogram has one per request."""
        return f"sum(rate({self.series(role)}_count[{window}]))"

    def gauge(self, role: str, aggregation: str = "max", by: str = "pod") -> str:
        return f"{aggregation} by ({by}) ({self.series(role)})"

    def error_ratio(self, window: str) -> str:
        if self.preset.errors is None:
            raise ValueError(f"{self.preset.name} exports no {ROLE_WORDS['errors']}")
        failed, total = self.preset.errors
        return f"sum(rate({failed}[{window}])) / sum(rate({total}[{window}]))"

    def adapter_name(self, role: str) -> str:
        """The name the Prometheus adapter serves a role as (``:`` becomes ``_``; a counter as its rate)."""
        if role == "completed":
            return f"{self.preset.prefix.rstrip(':_')}_requests_per_second"
        return self.series(role).replace(":", "_")


def rule(name: str, expr: str, for_: str, severity: str, **annotations: str) -> dict[str, Any]:
    """One Prometheus alerting rule, its keys in the order Prometheus documents them."""
    return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity}, "annotations": annotations}
