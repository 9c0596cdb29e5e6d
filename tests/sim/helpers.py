"""Scenarios and fleets built in code for the simulator tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from surgelab.scenario.loader import build_scenario
from surgelab.sim import build_fleet, simulate

TARGET = {"url": "http://127.0.0.1:9/v1", "model": "m"}


def scenario(load: dict[str, Any], **fields: Any):
    data = {"name": "sim", "seed": fields.pop("seed", 1), "target": dict(TARGET), "load": load}
    data["workload"] = fields.pop("workload", {"prompt_tokens": 8, "output_tokens": 1})
    data.update(fields)
    return build_scenario(data)


def fleet(**fields: Any):
    return build_fleet(fields)


def run(tmp_path: Path, scen, flt, name: str = "run"):
    return simulate(scen, flt, tmp_path / name)


def outputs(run_dir: Path):
    """A run directory's records, summary, fleet report and timeline, less how fast the machine ran it."""
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ("started_at", "wall_s"):  # the machine's clock, not the simulation's
        summary.pop(key, None)
    report = json.loads((run_dir / "fleet.json").read_text())
    for key in ("wall_s", "requests_per_wall_s", "events"):  # how fast it ran, not what it simulated
        report.pop(key)
    return pq.read_table(run_dir / "records.parquet"), summary, report, pq.read_table(run_dir / "fleet.parquet")
