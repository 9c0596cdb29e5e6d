"""``surgelab summarize`` on a simulated run gives back its summary.json unchanged.

Measured and simulated runs share one finisher (``analysis.finish``), so summarising a
simulation's run directory again keeps its ``fleet`` block and adds no client or diagnosis
block a simulation never had (a measured run's case is ``tests/test_summarize.py``).
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.sim import simulate

from .helpers import fleet, scenario


def _summarize_again(run_dir) -> dict:
    before = json.loads((run_dir / "summary.json").read_text())
    result = CliRunner().invoke(app, ["summarize", str(run_dir)])
    assert result.exit_code == 0, result.output
    after = json.loads((run_dir / "summary.json").read_text())
    assert sorted(after) == sorted(before)
    assert after == before
    return after


def test_summarize_keeps_a_simulated_summary_as_it_was(tmp_path):
    scen = scenario({"rate": 10, "duration": "20s", "warmup": "2s"}, workload={"prompt_tokens": 200, "output_tokens": 50},
                    slo={"ttft": "1s"})  # fmt: skip
    flt = fleet(pools=[{"name": "a", "profile": "llama3-8b-h100", "replicas": 2, "cost_per_hour": 4.0}])
    result = simulate(scen, flt, tmp_path / "run")
    after = _summarize_again(result.run_dir)
    assert after["fleet"]["replica_hours"] > 0


def test_summarize_keeps_a_stopped_simulation_as_it_was(tmp_path):
    scen = scenario({"rate": 40, "duration": "60s"}, workload={"prompt_tokens": 500, "output_tokens": 200},
                    thresholds=[{"expr": "p99(e2e) < 2s", "abort_on_fail": True}])  # fmt: skip
    result = simulate(scen, fleet(pools=[{"name": "a", "profile": "llama3-8b-h100", "replicas": 1}]), tmp_path / "run")
    assert _summarize_again(result.run_dir)["stop_reason"].startswith("aborted: threshold")
