"""Write a plan's files: ``plan.json``, ``hpa.yaml`` and ``alerts.yaml``, from the plan and the SLOs it used.

The HPA's per-pod target is the value measured at the SLA-capacity level times the safety
factor: requests in flight when the plan came from a sweep (``inflight``), else requests/s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from surgelab.conditions import Threshold
from surgelab.files import located, write_atomic
from surgelab.plan.capacity import CapacityPlan
from surgelab.plan.k8s import HpaSpec, alert_rules, dump_yaml, hpa_manifest

__all__ = ["write_artefacts"]


def write_artefacts(
    out: Path,
    plan: CapacityPlan,
    slos: Sequence[Threshold],
    deployment: str = "inference",
    namespace: str | None = None,
    metric: str = "inflight",
    metric_name: str | None = None,
    min_replicas: int | None = None,
    force: bool = False,
) -> list[Path]:
    """Write the three files into ``out`` (created); ValueError for unusable settings or an earlier plan
    there (unless ``force``), before writing. Each file is whole or absent; an OSError names the file."""
    if metric not in ("inflight", "rps"):
        raise ValueError(f"--hpa-metric: expected inflight or rps, got {metric!r}")
    paths = [out / "plan.json", out / "hpa.yaml", out / "alerts.yaml"]
    earlier = [p.name for p in paths if p.exists()]
    if earlier and not force:
        raise ValueError(f"{out} already holds a plan ({', '.join(earlier)}): give --force to replace it, or another --out")
    fleet = plan.fleet
    if metric == "inflight" and not plan.capacity_in_flight:
        metric = "rps"  # no in-flight figure without a sweep
    per_pod = (plan.capacity_in_flight if metric == "inflight" else plan.capacity) or 0.0
    spec = HpaSpec(
        name=deployment,
        min_replicas=min_replicas if min_replicas is not None else 1 + fleet.inputs.spares,
        max_replicas=fleet.total,
        metric=metric,  # type: ignore[arg-type]
        target=per_pod * fleet.inputs.safety,
        metric_name=metric_name,
        namespace=namespace,
    )
    hpa = hpa_manifest(spec)
    ttft = next((t.value for t in slos if t.metric == "ttft" and t.op in ("<", "<=")), None)
    rules = alert_rules(fleet.per_instance_target, plan.capacity, ttft)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise located(exc, out) from None
    write_atomic(paths[0], json.dumps(plan.to_dict(), indent=2, default=str) + "\n")
    write_atomic(paths[1], dump_yaml(hpa))
    write_atomic(paths[2], dump_yaml(rules))
    return paths
