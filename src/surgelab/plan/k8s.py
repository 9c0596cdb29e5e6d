"""Ready-to-apply artefacts from a plan: a Kubernetes HPA and Prometheus alert rules near the knee.

The HPA (``autoscaling/v2``) scales a Deployment on a per-pod metric the inference server
already exports (vLLM's and ``surgelab serve``'s names, as exposed by a Prometheus adapter,
which replaces ``:`` with ``_``): requests in flight (``vllm:num_requests_running``) by
default, or a requests/s metric. Its target is the per-instance value measured at the SLA
capacity times the safety factor, so pods are added before the knee, not after. Scale-up is
fast and scale-down slow (cold starts of model servers take minutes); both are explicit.

The alert rules fire near the knee: throughput per instance above the safety target and
above the SLA capacity, P99 TTFT above its SLO, and a queue that does not drain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import yaml

__all__ = ["HpaSpec", "hpa_manifest", "alert_rules", "quantity", "dump_yaml"]


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
    metric: Literal["inflight", "rps"]
    target: float  # average per pod
    metric_name: str | None = None  # default: vllm_num_requests_running / vllm_requests_per_second
    namespace: str | None = None
    scale_down_window_s: int = 300

    @property
    def resolved_metric_name(self) -> str:
        if self.metric_name:
            return self.metric_name
        return "vllm_num_requests_running" if self.metric == "inflight" else "vllm_requests_per_second"


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
                    "stabilizationWindowSeconds": 0,
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
