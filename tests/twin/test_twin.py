"""The digital twin on the embedded server, whose true profile is known: the fit recovers its
coefficients and the fitted twin predicts a held-out scenario."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from surgelab.engine.profile import EngineProfile
from surgelab.scenario.loader import build_scenario
from surgelab.server.process import ServerProcess
from surgelab.twin.fit import fit_profile, line_fit
from surgelab.twin.validate import compare_summaries, validate_twin

# A slow, strongly memory-bound replica: its step costs dwarf the embedded server's own Python
# time per request (HTTP, tokenising, hashing the prompt), which a wall-clock fit cannot tell apart.
TRUTH = {
    "prefill_s_per_token": 1e-4, "decode_base_s": 0.010, "s_per_kv_token": 1e-6, "step_overhead_s": 0.002,
    "kv_capacity_tokens": 200_000, "max_num_seqs": 6, "max_batched_tokens": 4096,
}  # fmt: skip


@pytest.fixture(scope="module")
def truth_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("truth") / "truth.yaml"
    path.write_text(yaml.safe_dump(TRUTH))
    with ServerProcess(["--model", "m"], profile=str(path)) as server:
        yield server.base_url


def _scenario(url: str, load: dict, workload: dict):
    return build_scenario({"target": {"url": url, "model": "m"}, "load": load, "workload": workload})


@pytest.fixture(scope="module")
def fitted(truth_server, tmp_path_factory, run) -> tuple:
    runs = tmp_path_factory.mktemp("sweep")
    low = _scenario(truth_server, {"rate": 3, "duration": "8s", "arrival": "constant"},
                    {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 3000}, "output_tokens": 8})  # fmt: skip
    high = _scenario(truth_server, {"concurrency": {"type": "step", "start": 1, "step": 3, "hold": "2s", "max": 10}},
                     {"prompt_tokens": {"dist": "uniform", "min": 200, "max": 3000}, "output_tokens": 40})  # fmt: skip
    run(low, runs / "level-01")
    run(high, runs / "level-02")
    return fit_profile(runs), runs


def test_fit_recovers_the_known_profile(fitted) -> None:
    result, _ = fitted
    c = result.coefficients
    assert c["prefill_s_per_token"].value == pytest.approx(TRUTH["prefill_s_per_token"], rel=0.10)
    assert c["s_per_kv_token"].value == pytest.approx(TRUTH["s_per_kv_token"], rel=0.10)
    step_base = TRUTH["decode_base_s"] + TRUTH["step_overhead_s"]
    assert c["decode_step_base_s"].value == pytest.approx(step_base, rel=0.10)
    assert result.profile.max_num_seqs == TRUTH["max_num_seqs"]
    assert all(v.stderr is not None and v.stderr >= 0 for v in c.values() if v.source == "fitted")
    assert result.residual["decode"] < 0.1


def test_the_fitted_twin_predicts_a_held_out_spike(fitted, truth_server, tmp_path) -> None:
    result, _ = fitted
    held_out = _scenario(
        truth_server,
        {"rate": {"type": "spike", "base": 1, "peak": 4, "at": "3s", "rise": "1s", "hold": "3s", "decay": "1s", "after": "3s"}},
        {"prompt_tokens": {"dist": "lognormal", "mean": 600, "std": 300, "max": 2500},
         "output_tokens": {"dist": "uniform", "min": 20, "max": 60}},
    )  # fmt: skip
    check = validate_twin(held_out, result.profile, tmp_path / "twin")
    assert check.passed, check.errors
    assert (tmp_path / "twin" / "twin-check.yaml").is_file()


def test_cli_fit_writes_a_profile_serve_accepts(fitted, cli, tmp_path) -> None:
    _, runs = fitted
    out = tmp_path / "fitted.yaml"
    result = cli("fit", str(runs), "--out", str(out))
    assert result.returncode == 0, result.stderr
    profile = EngineProfile.from_mapping(yaml.safe_load(out.read_text()))
    assert profile.validate() == []
    bad = cli("fit", str(tmp_path / "nothing"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_line_fit_and_the_twin_verdict_on_hand_made_numbers() -> None:
    import numpy as np

    x = np.linspace(0, 10_000, 400)  # a KV-read range like a sweep's: the slope moves y by 2 ms
    y = 0.007 + 2e-7 * x + np.random.default_rng(0).normal(0, 1e-4, x.size)
    a, b, rms = line_fit(x, y)
    assert a == pytest.approx(0.007, rel=0.02) and b == pytest.approx(2e-7, rel=0.05) and rms < 0.02
    base = {"throughput": {"requests_per_s": 10.0}, "latency_ms": {"ttft": {"p50": 100, "p99": 200}, "e2e": {"p50": 1000, "p99": 2000}}}
    close = {"throughput": {"requests_per_s": 10.5}, "latency_ms": {"ttft": {"p50": 110, "p99": 240}, "e2e": {"p50": 1050, "p99": 2400}}}
    far = {"throughput": {"requests_per_s": 10.0}, "latency_ms": {"ttft": {"p50": 130, "p99": 200}, "e2e": {"p50": 1000, "p99": 2000}}}
    assert compare_summaries(base, close).passed
    failed = compare_summaries(base, far)
    assert not failed.passed and failed.errors["ttft_p50"] == pytest.approx(0.3)


def test_the_fit_is_exact_on_simulated_records(tmp_path: Path) -> None:
    """In virtual time (no network, no scheduler jitter) the estimator recovers the truth exactly."""
    from surgelab.sim.loader import build_fleet
    from surgelab.sim.run import simulate

    (tmp_path / "truth.yaml").write_text(yaml.safe_dump(TRUTH))
    fleet = build_fleet({"pools": [{"replicas": 1, "profile": str(tmp_path / "truth.yaml"), "coalesce": 0}]})
    url = "http://127.0.0.1:1/v1"
    simulate(_scenario(url, {"rate": 3, "duration": "8s", "arrival": "constant"},
                       {"prompt_tokens": {"dist": "uniform", "min": 100, "max": 3000}, "output_tokens": 8}),
             fleet, tmp_path / "runs" / "l1")  # fmt: skip
    simulate(_scenario(url, {"concurrency": {"type": "step", "start": 1, "step": 3, "hold": "2s", "max": 10}},
                       {"prompt_tokens": {"dist": "uniform", "min": 200, "max": 3000}, "output_tokens": 40}),
             fleet, tmp_path / "runs" / "l2")  # fmt: skip
    result = fit_profile(tmp_path / "runs")
    c = result.coefficients
    for name in ("prefill_s_per_token", "s_per_kv_token", "step_overhead_s", "decode_base_s"):
        assert c[name].value == pytest.approx(TRUTH[name], rel=0.02), name
    assert result.structure == "max" and result.profile.combine == "max", result.reason  # the roofline, no extra terms


def test_too_little_data_is_a_clear_error(tmp_path: Path, zero_server, scenario_for, run) -> None:
    run(scenario_for(zero_server.url, load={"rate": 2, "duration": "1s"}, workload={"output_tokens": 2}), tmp_path / "r")
    with pytest.raises(ValueError, match="too few streamed token gaps"):
        fit_profile(tmp_path / "r")
