"""Bad input to ``surgelab sweep`` and ``surgelab plan``: one line on stderr, exit 2, no traceback.

In process (typer's runner) for speed; the end-to-end subprocess runs are in
``test_sweep_server.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from surgelab.cli import app


@pytest.fixture
def cli():
    def invoke(*args: str) -> SimpleNamespace:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)

    return invoke


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "s.yaml"
    path.write_text("target: {url: 'http://127.0.0.1:9/v1', model: m}\nload: {concurrency: 1}\n")
    return path


def _one_line_error(result, needle):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plan", "missing-sweep.json", "--peak", "100"], "sweep file not found"),
        (["plan", "--capacity", "100", "--peak", "-3"], "--peak must be a number > 0"),
        (["plan", "--capacity", "100", "--peak", "1000", "--safety", "1.5"], "safety must be in (0, 1]"),
        (["plan", "--capacity", "100"], "--peak is required"),
        (["plan", "--capacity", "100", "--peak", "10", "--hpa-metric", "cpu"], "--hpa-metric"),
        (["plan", "--capacity", "100", "--peak", "10", "--slo", "p99(ttft) < soon"], "--slo: 'p99(ttft) < soon'"),
        (["plan", "--peak", "100"], "give a sweep"),
        (["plan", "--capacity", "100", "--peak", "10", "--peak-window", "soon"], "--peak-window"),
        (
            ["plan", "--queueing", "mmc", "--rate", "10", "--service-time", "0.5s"],
            "exactly one of --servers or --target-wait",
        ),
        (["plan", "--queueing", "mmc", "--rate", "-1", "--service-time", "0.5s", "--servers", "2"], "arrival rate"),
        (["plan", "--queueing", "mg1", "--rate", "1", "--service-time", "1s", "--servers", "2"], "only mmc"),
    ],
)
def test_plan_bad_input(cli, args, needle):
    _one_line_error(cli(*args), needle)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--hold", "forever"], "--hold"),
        (["--levels", "1,two"], "--levels"),
        (["--start", "10", "--max", "5"], "must be >= start"),
        (["--max-error-rate", "lots"], "--max-error-rate"),
        (["--stop-when", "p99(ttft) >> 2s"], "stop_when"),
        (["--ramp-up", "20s", "--settle", "5s"], "ramp_up (20s) must not exceed settle (5s)"),
        (["--mode", "rate", "--ramp-up", "1s"], "it needs mode concurrency"),
    ],
)
def test_sweep_bad_input(cli, scenario, tmp_path, extra, needle):
    _one_line_error(cli("sweep", str(scenario), "--out", str(tmp_path / "s"), *extra), needle)


def test_sweep_missing_scenario_and_busy_out_dir(cli, scenario, tmp_path):
    result = cli("sweep", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and "cannot read scenario file" in result.stderr
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("")
    _one_line_error(cli("sweep", str(scenario), "--out", str(tmp_path / "busy")), "not an empty directory")


def test_mmc_shortcut_prints_erlang_c(cli):
    result = cli("plan", "--queueing", "mmc", "--rate", "10", "--service-time", "0.5s", "--servers", "8")
    assert result.returncode == 0, result.stderr
    assert "P(wait) = 0.1673" in result.stdout and "62.5%" in result.stdout
    # the old name (it read like an AI model) still works, with a note
    result = cli("plan", "--model", "mmc", "--rate", "10", "--service-time", "0.5s", "--target-wait", "10ms")
    assert result.returncode == 0 and "fewest servers with mean wait <= 0.01 s: 10" in result.stdout
    assert "plan --model is now --queueing" in result.stderr
