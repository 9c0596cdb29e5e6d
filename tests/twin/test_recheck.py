"""A twin checked again against a run measured earlier: only the simulation runs, from the run's
own saved scenario (same seed and salt, so the same requests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from surgelab.scenario.loader import build_scenario
from surgelab.sim.loader import build_fleet
from surgelab.sim.run import simulate
from surgelab.twin.validate import check_measured

PROFILE = {
    "prefill_s_per_token": 2e-4, "decode_base_s": 0.008, "s_per_kv_token": 1e-6, "step_overhead_s": 0.002,
    "kv_capacity_tokens": 100_000, "max_num_seqs": 4, "max_batched_tokens": 4096,
}  # fmt: skip


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, Path]:
    """A "measured" run: produced by the simulator from PROFILE, so the truth is known."""
    tmp = tmp_path_factory.mktemp("recheck")
    (tmp / "truth.yaml").write_text(yaml.safe_dump(PROFILE))
    scenario = build_scenario({
        "target": {"url": "http://127.0.0.1:1/v1", "model": "m"}, "prompt_salt": 99,
        "load": {"rate": 6, "duration": "4s"},
        "workload": {"prompt_tokens": {"dist": "uniform", "min": 50, "max": 1500}, "output_tokens": 12},
    })  # fmt: skip
    fleet = build_fleet({"pools": [{"replicas": 1, "profile": str(tmp / "truth.yaml")}]})
    simulate(scenario, fleet, tmp / "run")
    return tmp / "run", tmp / "truth.yaml"


def test_the_profile_that_made_the_run_predicts_it_exactly(measured, tmp_path: Path) -> None:
    from surgelab.engine import load_profile

    run, truth = measured
    check = check_measured(run, load_profile(str(truth)), tmp_path / "again", p50_tolerance=0.001, p99_tolerance=0.001)
    assert check.passed and all(e == 0 for e in check.errors.values()), check.errors
    saved = yaml.safe_load((tmp_path / "again" / "twin-check.yaml").read_text())
    assert saved["measured"]["ttft_p50"] == json.loads((run / "summary.json").read_text())["latency_ms"]["ttft"]["p50"]


def test_a_slower_prefill_shows_in_ttft_and_the_cli_says_so(measured, tmp_path: Path, cli) -> None:
    run, _ = measured
    slow = tmp_path / "slow.yaml"
    slow.write_text(yaml.safe_dump({**PROFILE, "prefill_s_per_token": 6e-4}))
    result = cli("validate-twin", "--measured", str(run), "--profile", str(slow), "--out", str(tmp_path / "slow"))
    assert result.returncode == 1, result.stdout + result.stderr  # the twin no longer matches
    check = yaml.safe_load((tmp_path / "slow" / "twin-check.yaml").read_text())
    assert check["errors"]["ttft_p50"] > 0.5 and not check["passed"]
    assert "ttft_p50" in result.stdout and "FAIL" in result.stdout
    assert check["status"]["ttft_p50"] == "outside" and check["verdict"] == "fail"


def test_measured_run_and_scenario_are_one_or_the_other(tmp_path: Path, cli) -> None:
    neither = cli("validate-twin", "--profile", "llama3-8b-h100")
    assert neither.returncode != 0 and "--measured RUN" in neither.stderr and "Traceback" not in neither.stderr
    from surgelab.engine import load_profile

    with pytest.raises(ValueError, match="not a finished run directory"):  # the CLI prints it as one line
        check_measured(tmp_path, load_profile("llama3-8b-h100"), tmp_path / "out")


def test_a_miss_the_short_run_cannot_resolve_is_undecided_exit_3(measured, tmp_path: Path, cli) -> None:
    """24 requests: TTFT P50's own 95 % interval is about 300–700 ms, so a prefill 5 % slow (+26 % at
    TTFT P50, the queue amplifying it) is a miss this run cannot tell from chance."""
    run, _ = measured
    near = tmp_path / "near.yaml"
    near.write_text(yaml.safe_dump({**PROFILE, "prefill_s_per_token": 2.1e-4}))
    result = cli("validate-twin", "--measured", str(run), "--profile", str(near), "--out", str(tmp_path / "near"))
    assert result.returncode == 3, result.stdout + result.stderr
    check = yaml.safe_load((tmp_path / "near" / "twin-check.yaml").read_text())
    assert check["errors"]["ttft_p50"] > 0.15 and check["status"]["ttft_p50"] == "undecided"
    low, high = check["intervals"]["ttft_p50"]
    assert low < check["predicted"]["ttft_p50"] < high and low < check["measured"]["ttft_p50"] < high
    assert check["verdict"] == "undecided" and "UNDECIDED" in result.stdout and "measure a longer" in result.stdout


def test_the_steps_table_names_the_term_that_is_off(measured, tmp_path: Path) -> None:
    """Against the profile that made the run its decode steps and idle prefills agree; with the
    per-step decode cost doubled, every decode group is far off and the prefill is not."""
    from surgelab.engine import load_profile
    from surgelab.twin.steps import step_checks

    run, truth = measured
    exact = step_checks(run, load_profile(str(truth)), min_samples=5)
    decode = [s for s in exact if s.kind == "decode"]
    assert decode and sum(s.samples for s in decode) > 100
    assert all(abs(s.error) < 0.05 for s in exact), exact
    slow = tmp_path / "slow-decode.yaml"
    slow.write_text(yaml.safe_dump({**PROFILE, "decode_base_s": 0.016}))
    off = step_checks(run, load_profile(str(slow)), min_samples=5)
    assert all(s.error > 0.5 for s in off if s.kind == "decode")


def test_idle_prefills_against_the_profiles_first_token(tmp_path: Path) -> None:
    """One request every 2 s finds the engine idle: its TTFT is the profile's prefill, chunks and all."""
    from surgelab.engine import load_profile
    from surgelab.twin.steps import step_checks

    (tmp_path / "truth.yaml").write_text(yaml.safe_dump({**PROFILE, "max_batched_tokens": 512}))
    scenario = build_scenario({
        "target": {"url": "http://127.0.0.1:1/v1", "model": "m"}, "load": {"rate": 0.5, "duration": "20s", "arrival": "constant"},
        "workload": {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 1500}, "output_tokens": 4},
    })  # fmt: skip
    simulate(scenario, build_fleet({"pools": [{"replicas": 1, "profile": str(tmp_path / "truth.yaml")}]}), tmp_path / "run")
    (prefill,) = [s for s in step_checks(tmp_path / "run", load_profile(str(tmp_path / "truth.yaml"))) if s.kind == "idle prefill"]
    assert prefill.samples >= 8 and abs(prefill.error) < 0.01, prefill
    (tmp_path / "half.yaml").write_text(yaml.safe_dump({**PROFILE, "max_batched_tokens": 512, "prefill_s_per_token": 1e-4}))
    (half,) = [s for s in step_checks(tmp_path / "run", load_profile(str(tmp_path / "half.yaml"))) if s.kind == "idle prefill"]
    assert -0.5 < half.error < -0.3  # half the per-token cost, the step overheads unchanged
