"""Scenarios and fleets built in code for the simulator tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
