"""The seeds' stress method with no server: `surgelab sweep --fleet` runs every level on a
simulated fleet in virtual time, and `surgelab plan` reads the result like a measured sweep."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from surgelab.cli import app

FLEET = Path(__file__).parents[2] / "examples" / "fleets" / "gpu-16gb.yaml"


def test_a_simulated_sweep_finds_the_plateau_and_plans_from_it(tmp_path) -> None:
    scenario = tmp_path / "s.yaml"
    # The target is a closed port: a sweep that contacted it would fail at once.
    scenario.write_text("target: {url: 'http://127.0.0.1:9/v1', model: m}\nload: {concurrency: 1}\n"
                        "workload: {prompt_tokens: 192, output_tokens: 128}\n")  # fmt: skip
    out = CliRunner().invoke(app, ["sweep", str(scenario), "--fleet", str(FLEET), "--levels", "10,20,40,80,160",
                                   "--hold", "8s", "--settle", "2s", "--warmup", "0", "--out", str(tmp_path / "sw")])  # fmt: skip
    assert out.exit_code == 0, out.output
    sweep = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert sweep["target"]["simulated_fleet"] == "one-16gb" and "url" not in sweep["target"]
    rps = [row["requests_per_s"] for row in sorted(sweep["levels"], key=lambda r: r["offered"])]
    assert rps[1] > 1.5 * rps[0] and rps[-1] < 1.1 * rps[-2]  # it grows, then doubling the users adds little
    assert sweep["knee"]["level"] in (20, 40, 80)
    for row in sweep["levels"]:
        summary = json.loads((tmp_path / "sw" / row["run_dir"] / "summary.json").read_text())
        assert summary["requests"]["failed"] == 0 and "fleet" in summary  # each level is a simulated run
    plan = CliRunner().invoke(app, ["plan", str(tmp_path / "sw"), "--peak", "1000"])
    assert plan.exit_code == 0, plan.output
    assert "instances = ceil(peak" in plan.output
