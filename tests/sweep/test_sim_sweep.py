"""The seeds' stress method with no server: `surgelab sweep --fleet` runs every level on a
simulated fleet in virtual time, and `surgelab plan` reads the result like a measured sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.sweep.result import completion_rate

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


TOY = Path(__file__).parents[2] / "examples" / "fleets" / "seed002-toy.yaml"
STRESS = Path(__file__).parents[2] / "examples" / "memory-stress.yaml"


def _seed_qps(c: int) -> float:
    """Seed 002's run_stress_test row for level c: c / latency(c) × (1 − error_rate(c)), as the seed computes it."""
    cap = int(16.0 / 0.2)
    lat = max(0.05 / math.log2(c + 1), 0.005) if c <= cap else 0.05 * (1 + 3 * (c / cap - 1) ** 2)
    err = 0.0 if c <= cap * 1.2 else min((c - cap * 1.2) / cap, 0.5)
    return c / lat * (1 - err)


def test_seed_002_worked_example_end_to_end_on_the_toy_service(tmp_path) -> None:
    # docs/seed002.md with short levels: the seed's step test on its own toy service, then its plan
    levels = [10, 40, 70, 80, 90, 100, 120]
    out = CliRunner().invoke(app, ["sweep", str(STRESS), "--fleet", str(TOY), "--levels", ",".join(map(str, levels)),
                                   "--hold", "0.4s", "--settle", "0.1s", "--warmup", "0", "--falling-levels", "0",
                                   "--max-error-rate", "60%", "--out", str(tmp_path / "toy")])  # fmt: skip
    assert out.exit_code == 0, out.output
    sweep = json.loads((tmp_path / "toy" / "sweep.json").read_text())
    measured = {int(r["offered"]): r["requests_per_s"] for r in sweep["levels"]}
    assert {c: f"{q:.1f}" for c, q in measured.items()} == {c: f"{_seed_qps(c):.1f}" for c in levels}
    assert f"{measured[80]:.1f}" == "10143.8" and sweep["knee"]["level"] == 80  # best concurrency, peak QPS
    assert "knee: throughput bends at 80 users: 10,143.8 req/s" in out.output
    plan = CliRunner().invoke(app, ["plan", str(tmp_path / "toy"), "--peak", "1000", "--safety", "0.7",
                                    "--slo", "p99(e2e) <= 50ms"])  # fmt: skip
    assert plan.exit_code == 0, plan.output
    assert "per-instance SLA capacity: 10,143.8 req/s (sweep level 80 users" in plan.output
    assert "ceil(1000 ÷ 7100.63) = ceil(0.1408) = 1" in plan.output and "1 instances" in plan.output


def _answers(ends_by_user: dict[int, list[float]]) -> pa.Table:
    rows = [(u, round(t * 1e9)) for u, ends in ends_by_user.items() for t in ends]
    return pa.table({"user": [u for u, _ in rows], "intended_ns": [0] * len(rows), "end_ns": [e for _, e in rows],
                     "state": ["ok"] * len(rows), "output_tokens": [4] * len(rows)})  # fmt: skip


def test_a_closed_loop_level_is_measured_over_each_users_whole_cycles() -> None:
    # 3 users answered together every 0.3 s: 3 ÷ 0.3 = 10/s over any window; counting the answers
    # that end inside 1.0-2.0 s gives 9 (rounds at 1.2, 1.5, 1.8), inside 0.95-2.05 s 12
    rounds = _answers({u: [0.3 * k for k in range(1, 11)] for u in range(3)})
    for start, end in ((1.0, 2.0), (0.95, 2.05), (0.1, 2.7)):
        assert completion_rate(rounds, start, end) == pytest.approx((10.0, 40.0), rel=1e-12)
    # one user a little ahead of the others (answers in clusters): still 10/s
    clusters = _answers({0: [0.3 * k - 0.01 for k in range(1, 11)], 1: [0.3 * k for k in range(1, 11)],
                         2: [0.3 * k for k in range(1, 11)]})  # fmt: skip
    assert completion_rate(clusters, 1.0, 2.0) == pytest.approx((10.0, 40.0), rel=1e-12)
    # a slow last cycle counts whole (0.9-2.5 s: 4 answers); with no answer after the window it ends there
    six = [0.3 * k for k in range(1, 7)]
    assert completion_rate(_answers({0: [*six, 2.5]}), 1.0, 2.0)[0] == pytest.approx(4 / 1.6)
    assert completion_rate(_answers({0: six}), 1.0, 2.0)[0] == pytest.approx(3 / 1.1)


def test_an_open_loop_level_counts_the_answers_inside_the_window() -> None:
    open_loop = _answers({-1: [0.3 * k for k in range(1, 11)]})
    assert completion_rate(open_loop, 1.0, 2.0) == pytest.approx((3.0, 12.0))
