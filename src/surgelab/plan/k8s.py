"""Ready-to-apply artefacts from a plan: a Kubernetes HPA and Prometheus alert rules near the knee.

The HPA (``autoscaling/v2``) scales a Deployment on a per-pod metric served through the
Prometheus adapter's custom metrics API: requests in flight (vLLM's ``vllm:num_requests_running``)
by default, a requests/s metric, the server's queue (``vllm:num_requests_waiting``) or GPU
utilisation from NVIDIA's DCGM exporter (``DCGM_FI_DEV_GPU_UTIL``) — the signals the seeds
name. Each is a role of the server's engine (``engine``: a telemetry preset, vLLM unless told),
so an SGLang or TGI fleet scales on its own names (``telemetry.promql``). ``adapter_rules``
writes the adapter's discovery rules that expose them (the adapter replaces ``:`` with ``_``). An in-flight or rate target is the per-instance value measured at
the SLA capacity times the safety factor, so pods are added before the knee, not after.
Scale-up is fast and scale-down slow (cold starts of model servers take minutes); both
stabilisation windows are explicit, against the scaling jitter seed 000 warns of.

The alert rules fire near the knee: throughput per instance above the safety target and
above the SLA capacity, P99 TTFT above its SLO, and a queue that does not drain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from surgelab.telemetry.presets import PRESETS
from surgelab.telemetry.promql import Promql, rule

__all__ = ["HpaSpec", "HPA_METRICS", "hpa_manifest", "adapter_rules", "capacity_alert_rules", "quantity", "dump_yaml"]

HpaMetric = Literal["inflight", "rps", "queue", "gpu"]
HPA_METRICS: dict[str, tuple[str, str]] = {  # metric → (the engine's role, adapter query)
    "inflight": ("running", "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"),
    "rps": ("completed", "sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)"),
    "queue": ("waiting", "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"),
    "gpu": ("gpu_util", "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"),
}


def quantity(value: float) -> str:
    """A Kubernetes quantity: ``12`` or ``12500m``."""
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"a metric target must be a finite number > 0, got {value!r}")
    milli = round(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


@dataclass(frozen=True)
class HpaSpec:
    name: str  # the Deployment to scale (and the HPA's name)
    min_replicas: int
    max_replicas: int
    metric: HpaMetric
    target: float  # average per pod: requests, requests/s, waiting requests or GPU utilisation in percent
    metric_name: str | None = None  # default: HPA_METRICS' adapter name
    namespace: str | None = None
    scale_down_window_s: int = 300
    scale_up_window_s: int = 0
    engine: str = "vllm"  # the server's telemetry preset: whose series the metric is

    @property
    def promql(self) -> Promql:
        return Promql(PRESETS[self.engine])

    @property
    def resolved_metric_name(self) -> str:
        return self.metric_name or self.promql.adapter_name(HPA_METRICS[self.metric][0])


def hpa_manifest(spec: HpaSpec) -> dict[str, Any]:
    """An ``autoscaling/v2`` HorizontalPodAutoscaler (required: ``scaleTargetRef``, ``maxReplicas``)."""
    if not 1 <= spec.min_replicas <= spec.max_replicas:
        raise ValueError(f"need 1 <= minReplicas ({spec.min_replicas}) <= maxReplicas ({spec.max_replicas})")
    metadata: dict[str, Any] = {"name": spec.name, "labels": {"app.kubernetes.io/managed-by": "surgelab"}}
    if spec.namespace:
        metadata["namespace"] = spec.namespace
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.name},
            "minReplicas": spec.min_replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": spec.resolved_metric_name},
                        "target": {"type": "AverageValue", "averageValue": quantity(spec.target)},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {
                    "stabilizationWindowSeconds": spec.scale_up_window_s,
                    "selectPolicy": "Max",
                    "policies": [
                        {"type": "Percent", "value": 100, "periodSeconds": 60},
                        {"type": "Pods", "value": 4, "periodSeconds": 60},
                    ],
                },
                "scaleDown": {
                    "stabilizationWindowSeconds": spec.scale_down_window_s,
                    "selectPolicy": "Min",
                    "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}],
                },
            },
        },
    }


def adapter_rules(spec: HpaSpec) -> dict[str, Any]:
    """The Prometheus adapter's rule (its ``config.yaml``) that serves ``spec``'s metric per pod.

    It maps the series' ``namespace`` and ``pod`` labels to Kubernetes objects, which the server's
    pods scraped by a ServiceMonitor carry, as does DCGM's exporter with its Kubernetes mode on.
    """
    role, query = HPA_METRICS[spec.metric]
    series = spec.promql.series(role)
    return {
        "rules": [
            {
                "seriesQuery": f'{series}{{namespace!="",pod!=""}}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                "name": {"matches": f"^{series}$", "as": spec.resolved_metric_name},
                "metricsQuery": query,
            }
        ]
    }


def capacity_alert_rules(
    target_rps: float,
    capacity_rps: float,
    ttft_slo_s: float | None = None,
    group: str = "surgelab-capacity",
    engine: str = "vllm",
) -> dict[str, Any]:
    """Prometheus alerting rules (the ``groups:`` file format) on each pod's share of the planned
    capacity, on the engine's metric names; no TTFT rule where the engine has no TTFT histogram."""
    server = Promql(PRESETS[engine])
    per_pod = server.rate("completed", "2m", by="pod")
    rules: list[dict[str, Any]] = [
        rule(
            "InferenceNearKnee", f"{per_pod} > {target_rps:.4g}", "5m", "warning",
            summary="An inference pod is past its planned share of the SLA capacity",
            description=f"Above {target_rps:.4g} req/s per pod (SLA capacity {capacity_rps:.4g} × safety); scale out before the knee.",
        ),
        rule(
            "InferenceAboveSlaCapacity", f"{per_pod} > {capacity_rps:.4g}", "2m", "critical",
            summary="An inference pod serves more than its measured SLA capacity",
            description=f"Above {capacity_rps:.4g} req/s per pod the sweep saw the SLO broken.",
        ),
        rule(
            "InferenceQueueNotDraining", f"{server.gauge('waiting', 'sum')} > 0", "10m", "warning",
            summary="Requests have been waiting for a batch slot for 10 minutes",
        ),
    ]  # fmt: skip
    if ttft_slo_s is not None and server.has("ttft"):
        rules.append(rule(
            "InferenceTtftP99AboveSlo", f"{server.quantile(0.99, 'ttft', '5m')} > {ttft_slo_s:g}", "5m", "critical",
            summary=f"P99 time to first token above the {ttft_slo_s:g}s SLO",
        ))  # fmt: skip
    return {"groups": [{"name": group, "rules": rules}]}


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
