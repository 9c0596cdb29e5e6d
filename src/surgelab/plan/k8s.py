"""Ready-to-apply artefacts from a plan: a Kubernetes HPA and Prometheus alert rules near the knee.

The HPA (``autoscaling/v2``) scales a Deployment on a per-pod metric served through the
Prometheus adapter's custom metrics API: requests in flight (``vllm:num_requests_running``)
by default, a requests/s metric, the server's queue (``vllm:num_requests_waiting``) or GPU
utilisation from NVIDIA's DCGM exporter (``DCGM_FI_DEV_GPU_UTIL``) — the signals the seeds
name. ``adapter_rules`` writes the adapter's discovery rules that expose them (the adapter
replaces ``:`` with ``_``). An in-flight or rate target is the per-instance value measured at
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

__all__ = ["HpaSpec", "HPA_METRICS", "hpa_manifest", "adapter_rules", "alert_rules", "quantity", "dump_yaml"]

HpaMetric = Literal["inflight", "rps", "queue", "gpu"]
HPA_METRICS: dict[str, tuple[str, str, str]] = {  # metric → (adapter name, Prometheus series, adapter query)
    "inflight": ("vllm_num_requests_running", "vllm:num_requests_running", "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"),
    "rps": (
        "vllm_requests_per_second", "vllm:request_success_total",
        "sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)",
    ),
    "queue": ("vllm_num_requests_waiting", "vllm:num_requests_waiting", "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"),
    "gpu": ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL", "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"),
}  # fmt: skip


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

    @property
    def resolved_metric_name(self) -> str:
        return self.metric_name or HPA_METRICS[self.metric][0]


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

    It maps the series' ``namespace`` and ``pod`` labels to Kubernetes objects, which vLLM pods
    scraped by a ServiceMonitor carry, as does DCGM's exporter with its Kubernetes mode on.
    """
    name, series, query = HPA_METRICS[spec.metric]
    return {
        "rules": [
            {
                "seriesQuery": f'{series}{{namespace!="",pod!=""}}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                "name": {"matches": f"^{series}$", "as": spec.metric_name or name},
                "metricsQuery": query,
            }
        ]
    }


def alert_rules(
    target_rps: float,
    capacity_rps: float,
    ttft_slo_s: float | None = None,
    group: str = "surgelab-capacity",
) -> dict[str, Any]:
    """Prometheus alerting rules (the ``groups:`` file format) on vLLM's metric names."""
    per_pod = "sum by (pod) (rate(vllm:request_success_total[2m]))"
    rules: list[dict[str, Any]] = [
        {
            "alert": "InferenceNearKnee",
            "expr": f"{per_pod} > {target_rps:.4g}",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "An inference pod is past its planned share of the SLA capacity",
                "description": f"Above {target_rps:.4g} req/s per pod (SLA capacity {capacity_rps:.4g} × safety); scale out before the knee.",
            },
        },
        {
            "alert": "InferenceAboveSlaCapacity",
            "expr": f"{per_pod} > {capacity_rps:.4g}",
            "for": "2m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "An inference pod serves more than its measured SLA capacity",
                "description": f"Above {capacity_rps:.4g} req/s per pod the sweep saw the SLO broken.",
            },
        },
        {
            "alert": "InferenceQueueNotDraining",
            "expr": "sum by (pod) (vllm:num_requests_waiting) > 0",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "Requests have been waiting for a batch slot for 10 minutes"},
        },
    ]
    if ttft_slo_s is not None:
        rules.append({
            "alert": "InferenceTtftP99AboveSlo",
            "expr": (
                "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))"
                f" > {ttft_slo_s:g}"
            ),
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": f"P99 time to first token above the {ttft_slo_s:g}s SLO"},
        })  # fmt: skip
    return {"groups": [{"name": group, "rules": rules}]}


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
