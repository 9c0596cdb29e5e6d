"""Write a plan's files: ``plan.json``, ``hpa.yaml``, ``adapter.yaml`` and ``alerts.yaml``.

The HPA's per-pod target is the value measured at the SLA-capacity level times the safety
factor: requests in flight when the plan came from a sweep (``inflight``), else requests/s.
On the queue or GPU utilisation the target is given (``target``), or for the queue the
waiting requests the sweep scraped at that level; GPU utilisation defaults to 80 %, the
trigger seed 002 names. ``adapter.yaml`` is the Prometheus adapter rule that serves the metric.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from surgelab.conditions import Threshold
from surgelab.files import located, write_atomic
from surgelab.plan.capacity import CapacityPlan
from surgelab.plan.k8s import HPA_METRICS, HpaSpec, adapter_rules, capacity_alert_rules, dump_yaml, hpa_manifest
from surgelab.telemetry.promql import ROLE_WORDS, Promql
from surgelab.telemetry.promql import engine as engine_preset

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
    target: float | None = None,
    windows: tuple[int, int] = (0, 300),
    *,
    max_replicas: int | None = None,
    engine: str = "vllm",
) -> list[Path]:
    """Write the files into ``out`` (created); ValueError for unusable settings or an earlier plan
    there (unless ``force``), before writing. Each file is whole or absent; an OSError names the file.

    ``windows``: the scale-up and scale-down stabilisation windows, seconds. ``max_replicas``: the
    HPA's ceiling when it is not the planned fleet (a searched HPA's own max). ``engine``: the
    server's telemetry preset, whose metric names the files use (``ValueError`` when it lacks one they need).
    """
    if metric not in HPA_METRICS:
        raise ValueError(f"--hpa-metric: expected one of {', '.join(HPA_METRICS)}, got {metric!r}")
    server = Promql(engine_preset(engine))
    paths = [out / "plan.json", out / "hpa.yaml", out / "alerts.yaml", out / "adapter.yaml"]
    earlier = [p.name for p in paths if p.exists()]
    if earlier and not force:
        raise ValueError(f"{out} already holds a plan ({', '.join(earlier)}): give --force to replace it, or another --out")
    fleet = plan.fleet
    if metric == "inflight" and not plan.capacity_in_flight and target is None:
        metric = "rps"  # no in-flight figure without a sweep
    for role, why in ((HPA_METRICS[metric][0], f"--hpa-metric {metric}"), ("completed", "the alerts on requests/s per pod")):
        if not server.has(role):
            raise ValueError(f"--engine {engine}: {server.preset.name} exports no {ROLE_WORDS[role]}, which {why} reads")
    spec = HpaSpec(
        name=deployment,
        min_replicas=min_replicas if min_replicas is not None else 1 + fleet.inputs.spares,
        max_replicas=max(max_replicas or fleet.total, fleet.total),
        metric=metric,  # type: ignore[arg-type]
        target=target if target is not None else _measured_target(plan, metric),
        metric_name=metric_name,
        namespace=namespace,
        scale_up_window_s=windows[0],
        scale_down_window_s=windows[1],
        engine=engine,
    )
    hpa = hpa_manifest(spec)
    ttft = next((t.value for t in slos if t.metric == "ttft" and t.op in ("<", "<=")), None)
    rules = capacity_alert_rules(fleet.per_instance_target, plan.capacity, ttft, engine=engine)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise located(exc, out) from None
    write_atomic(paths[0], json.dumps(plan.to_dict(), indent=2, default=str) + "\n")
    write_atomic(paths[1], dump_yaml(hpa))
    write_atomic(paths[2], dump_yaml(rules))
    write_atomic(paths[3], dump_yaml(adapter_rules(spec)))
    return paths


def _measured_target(plan: CapacityPlan, metric: str) -> float:
    """The per-pod target from what the plan measured, times the safety factor (GPU: seed 002's 80 %)."""
    safety = plan.fleet.inputs.safety
    if metric == "gpu":
        return 80.0
    if metric == "inflight":
        return (plan.capacity_in_flight or 0.0) * safety
    if metric == "rps":
        return plan.capacity * safety
    waiting = plan.waiting_at_capacity
    if not waiting:
        raise ValueError(
            "--hpa-metric queue: the sweep scraped no waiting requests at the SLA level (run it with --scrape); "
            "give --hpa-target, e.g. 4 waiting per pod"
        )
    return waiting * safety
