"""A simulated run stops where a measured one would: breakpoint steps, abort thresholds, the abort guard.

The rules are ``surgelab.load.stops.StopRules``, the runner's own, driven by the simulator's
virtual clock: the same stop reasons, the same ``stopped_at_s``, and after a stop no request is
sent, those under way get ``load.grace`` and the rest are recorded as cancelled.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.sim import simulate

from .helpers import TARGET, fleet, scenario

BREAKPOINT = {"type": "breakpoint", "start": 5, "step": 5, "hold": "10s", "max": 100, "stop_when": ["p99(e2e) > 3s"]}
HEAVY = {"prompt_tokens": 500, "output_tokens": 200}
ONE = {"pools": [{"name": "a", "profile": "llama3-8b-h100", "replicas": 1}]}


def _run(tmp_path, scen, flt):
    result = simulate(scen, fleet(**flt), tmp_path / "run")
    return result, json.loads((result.run_dir / "run.json").read_text())


def _reconciles(summary):
    req = summary["requests"]
    assert req["scheduled"] == req["ok"] + req["failed"] + req["dropped"] + req["cancelled"]


def test_a_breakpoint_stops_at_the_end_of_the_step_where_its_condition_held(tmp_path):
    result, info = _run(tmp_path, scenario({"rate": BREAKPOINT, "duration": "150s"}, workload=HEAVY), ONE)
    reason = info["stop_reason"]
    assert reason.startswith("breakpoint: 'p99(e2e) > 3s' held at "), reason
    stopped = info["stopped_at_s"]
    assert stopped < 150 and stopped % 10 == pytest.approx(0)  # at a step's end, long before the schedule's
    step = round(stopped / 10)
    assert reason.endswith(f"held at {5 + 5 * (step - 1):g} req/s (step {step})")
    assert result.summary["stop_reason"] == reason
    assert info["simulated_end_s"] <= stopped + 10  # the grace after the stop, no more
    records = result.run_dir / "records.parquet"
    intended = pq.read_table(records, columns=["intended_ns"])["intended_ns"].to_numpy()
    assert intended.max() <= stopped * 1e9  # nothing sent after the stop
    assert result.fleet["events"] > result.summary["requests"]["scheduled"]  # the events up to the stop are counted
    _reconciles(result.summary)


def test_surgelab_simulate_says_where_and_why_it_stopped(tmp_path):
    scenario_file, fleet_file = tmp_path / "bp.yaml", tmp_path / "fleet.yaml"
    scenario_file.write_text(yaml.safe_dump({
        "name": "bp", "seed": 1, "target": dict(TARGET), "load": {"rate": BREAKPOINT, "duration": "150s"}, "workload": HEAVY,
    }))  # fmt: skip
    fleet_file.write_text(yaml.safe_dump({"name": "one", **ONE}))
    out = CliRunner().invoke(
        app, ["simulate", str(scenario_file), "--fleet", str(fleet_file), "--out", str(tmp_path / "r")]
    )
    assert out.exit_code == 0, out.output
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["stop_reason"].startswith("breakpoint: ")
    assert f"stopped at {info['stopped_at_s']:g} s: {info['stop_reason']}" in out.output


def test_the_steps_before_the_breaking_one_did_not_hold(tmp_path):
    """The step the simulation stopped at is the first whose P99 E2E passed 3 s: one step fewer runs on."""
    result, info = _run(tmp_path, scenario({"rate": BREAKPOINT, "duration": "150s"}, workload=HEAVY), ONE)
    step = round(info["stopped_at_s"] / 10)
    earlier = {**BREAKPOINT, "max": 5 + 5 * (step - 2)}  # capped below the breaking level
    _, before = _run(
        tmp_path / "capped", scenario({"rate": earlier, "duration": f"{(step - 1) * 10}s"}, workload=HEAVY), ONE
    )
    assert before["stop_reason"] == "completed"


def test_an_abort_threshold_stops_the_simulation(tmp_path):
    scen = scenario({"rate": 40, "duration": "120s"}, workload=HEAVY,
                    thresholds=[{"expr": "p99(e2e) < 2s", "abort_on_fail": True}])  # fmt: skip
    result, info = _run(tmp_path, scen, ONE)
    assert info["stop_reason"] == "aborted: threshold 'p99(e2e) < 2s' failed"
    assert info["stopped_at_s"] < 60 and info["stopped_at_s"] == int(info["stopped_at_s"])  # checked once a second
    assert result.summary["thresholds_passed"] is False
    _reconciles(result.summary)


def test_the_abort_guard_stops_a_simulation_whose_every_request_fails(tmp_path):
    """Prompts longer than the engine's context: every answer is a 400, and the default guard ends it."""
    scen = scenario({"rate": 20, "duration": "120s"}, workload={"prompt_tokens": 200_000, "output_tokens": 1})
    result, info = _run(tmp_path, scen, ONE)
    reason = info["stop_reason"]
    assert reason.startswith("aborted: guard: the first 10 requests all failed (guards.abort.all_failed: 10)"), reason
    assert "context_length_exceeded" in reason
    assert info["stopped_at_s"] < 1  # 10 requests at 20 req/s
    assert result.summary["requests"]["scheduled"] == 10
    _reconciles(result.summary)


def test_requests_still_under_way_after_the_grace_are_cancelled(tmp_path):
    scen = scenario({"rate": 40, "duration": "120s", "grace": "1s"}, workload=HEAVY,
                    thresholds=[{"expr": "p99(e2e) < 2s", "abort_on_fail": True}])  # fmt: skip
    result, info = _run(tmp_path, scen, ONE)
    assert result.summary["requests"]["cancelled"] > 0
    assert info["simulated_end_s"] == pytest.approx(info["stopped_at_s"] + 1)
    _reconciles(result.summary)


def test_a_simulation_without_stop_rules_that_hold_runs_to_the_end(tmp_path):
    _, info = _run(tmp_path, scenario({"rate": 5, "duration": "30s"}), ONE)
    assert info["stop_reason"] == "completed" and info["stopped_at_s"] == 30
