"""The examples' what-ifs: cold start against pre-scaling, the noodle shop, the memory knee."""

from __future__ import annotations

from pathlib import Path

import pytest

from surgelab.scenario.loader import load_scenario
from surgelab.sim import load_fleet, simulate

from .helpers import fleet, run, scenario

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_noodle_shop_three_cooks_serve_everyone_within_300ms(tmp_path):
    scen = load_scenario(EXAMPLES / "noodle-shop.yaml")
    three = simulate(scen, load_fleet(EXAMPLES / "fleets" / "noodle-shop.yaml"), tmp_path / "three")
    two = simulate(scen, load_fleet(EXAMPLES / "fleets" / "noodle-shop-2-cooks.yaml"), tmp_path / "two")
    assert three.summary["requests"]["ok"] == two.summary["requests"]["ok"] == three.summary["requests"]["scheduled"]
    assert three.summary["goodput"]["fraction"] == 1.0
    assert two.summary["goodput"]["fraction"] < 1.0
    assert set(three.summary["by_phase"]) == {"spike", "wave"}


def _spike_fleet(cold_start: str, **autoscale) -> dict:
    auto = {"metric": "rps", "target": 20, "min": 1, "max": 8, **autoscale}
    return {
        "name": f"cold-{cold_start}",
        "pools": [{"replicas": 1, "profile": "llama3-8b-h100", "cold_start": cold_start, "autoscale": auto}],
    }


@pytest.mark.timeout(120)
def test_longer_cold_start_violates_the_slo_and_prescaling_removes_it(tmp_path):
    load = {
        "rate": {
            "type": "spike",
            "base": 5,
            "peak": 80,
            "at": "150s",
            "rise": "20s",
            "hold": "90s",
            "decay": "20s",
            "after": "20s",
        },
        "warmup": "30s",
    }
    workload = {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 800}, "output_tokens": 100}
    scen = scenario(load, workload=workload, slo={"ttft": "1s"})
    quick = run(tmp_path, scen, fleet(**_spike_fleet("20s")), "quick").fleet
    slow = run(tmp_path, scen, fleet(**_spike_fleet("120s")), "slow").fleet
    scheduled = run(
        tmp_path, scen, fleet(**_spike_fleet("120s", schedule=[{"at": "20s", "min": 5}])), "scheduled"
    ).fleet
    forecast = run(
        tmp_path, scen, fleet(**_spike_fleet("120s", forecast={"lead": "150s", "per_replica": 20})), "forecast"
    ).fleet
    assert slow["sla_violations"] > 3 * quick["sla_violations"]
    assert scheduled["sla_violations"] == 0
    assert forecast["sla_violations"] < 0.05 * slow["sla_violations"]
    assert scheduled["average_instances"] > slow["average_instances"]  # what it costs
