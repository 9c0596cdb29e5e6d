"""A simulation's fleet section: provisioned against ready, requests inside the replicas, utilisation,
scaling events, and the cards a capacity engineer reads first (average instances, replica-hours, cost).

From ``fleet.parquet`` (one row per pool per sample), ``fleet.json`` (the autoscalers' decisions, the
cost) and ``run.json`` (the simulated end, so the charts cover the whole run, not only up to the last
sample). The section's shape: ``{"t", "replicas", "ready", "in_flight", "engine_waiting", "queue",
"shed", "arrivals", "utilisation", "cost_per_hour", "events": [{"t", "pool", "from", "to"}],
"cold_start": {...} | None, "end_s"}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from surgelab.report.unreadable import Unreadable, why

__all__ = ["fleet_cards", "read_fleet"]

POOL_SUMS = ("replicas", "ready", "in_flight", "engine_waiting")
FLEET_WIDE = ("queue_depth", "shed", "arrivals")  # the same on every pool's row


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def read_fleet(run_dir: Path) -> dict[str, Any] | None:
    """The fleet timeline summed over pools; None when the run is no simulation."""
    path = run_dir / "fleet.parquet"
    if not path.exists():
        return None
    try:
        table = pq.read_table(path).to_pydict()
    except Exception as exc:  # an unreadable timeline never breaks a report: the page says it is missing
        raise Unreadable(f"fleet.parquet cannot be read ({why(exc)}): the fleet timeline is left out") from None
    by_t: dict[float, dict[str, float]] = {}
    n = len(table.get("t_s", []))
    # an older timeline lacks some columns
    columns = {key: table.get(key) or [0] * n for key in (*POOL_SUMS, *FLEET_WIDE, "busy")}
    column = columns.__getitem__
    for i, t in enumerate(table.get("t_s", [])):
        slot = by_t.setdefault(t, dict.fromkeys(POOL_SUMS, 0) | {"busy_ready": 0.0})
        for key in POOL_SUMS:
            slot[key] += column(key)[i] or 0
        slot["busy_ready"] += (column("busy")[i] or 0) * (column("ready")[i] or 0)
        for key in FLEET_WIDE:
            slot[key] = column(key)[i] or 0
    times = sorted(by_t)
    out: dict[str, Any] = {"t": times}
    for key in (*POOL_SUMS, *FLEET_WIDE):
        out[key] = [by_t[t][key] for t in times]
    out["queue"] = out["queue_depth"]
    # the share of the interval the ready replicas spent stepping (the simulated GPU utilisation)
    out["utilisation"] = [
        round(by_t[t]["busy_ready"] / by_t[t]["ready"], 4) if by_t[t]["ready"] else None for t in times
    ]
    report = _json(run_dir / "fleet.json")
    try:
        per_replica_hour = float(report["cost"]) / float(report["replica_hours"])
        out["cost_per_hour"] = [round(r * per_replica_hour, 4) for r in out["replicas"]]
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        pass
    out["events"] = _scaling_events(report)
    out["cold_start"] = _cold_start(out)
    end = _json(run_dir / "run.json").get("simulated_end_s")
    out["end_s"] = max(float(end or 0.0), times[-1] if times else 0.0)
    return out


def _scaling_events(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every autoscaler decision that changed a pool's size, in time order."""
    events = []
    for name, pool in (report.get("pools") or {}).items():
        for d in pool.get("autoscaler") or []:
            if d.get("desired") != d.get("current"):
                events.append(
                    {
                        "t": d["time_s"],
                        "pool": name,
                        "from": d["current"],
                        "to": d["desired"],
                        "metric": d.get("metric"),
                    }
                )
    return sorted(events, key=lambda e: e["t"])


def _cold_start(fleet: dict[str, Any]) -> dict[str, Any] | None:
    """How long provisioned replicas were not yet ready, and the widest gap: the cost of a cold start."""
    t, asked, ready = fleet["t"], fleet["replicas"], fleet["ready"]
    gaps = [i for i in range(len(t)) if asked[i] > ready[i]]
    if not gaps:
        return None
    worst = max(gaps, key=lambda i: asked[i] - ready[i])
    step = (t[1] - t[0]) if len(t) > 1 else 1.0
    return {"seconds": round(len(gaps) * step, 3), "first_s": t[gaps[0]], "worst_t": t[worst],
            "worst_replicas": asked[worst], "worst_ready": ready[worst]}  # fmt: skip


def fleet_cards(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Average instances, replica-hours and cost: ``summary.json``'s ``fleet`` block (fleet.json's figures)."""
    fleet = summary.get("fleet")
    if not fleet:
        return []
    return [
        {"id": "avg_instances", "label": "Average instances", "value": fleet["average_instances"], "unit": "",
         "detail": "replica-seconds alive ÷ the simulated span"},
        {"id": "replica_hours", "label": "Replica-hours", "value": fleet["replica_hours"], "unit": "h", "digits": 3,
         "detail": "starting, ready or restarting: what a cloud bills"},
        {"id": "cost", "label": "Cost", "value": fleet["cost"], "unit": "", "note": "replica-hours × each pool's cost_per_hour",
         "detail": "in the unit of the fleet file's cost_per_hour (its currency per replica-hour)"},
    ]  # fmt: skip
