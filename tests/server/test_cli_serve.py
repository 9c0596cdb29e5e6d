"""``surgelab serve`` flags: bad input is one clear line and exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from http_helpers import Http
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.server.process import ServerProcess


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "h9000"], "unknown profile 'h9000'"),
        (["--profile", "missing.yaml"], "cannot read profile file"),
        (["--faults", "missing.yaml"], "cannot read fault file"),
        (["--error-rate", "lots"], "error_rate: expected a ratio"),
        (["--error-rate", "150%"], "error_rate: must be between 0 and 1"),
        (["--error-status", "200"], "error_status: must be an HTTP error status"),
        (["--max-inflight", "0"], "max_inflight: must be >= 1"),
        (["--cold-start", "soon"], "cold_start: expected a duration"),
        (["--kv-capacity", "8"], "kv_capacity_tokens: must hold at least one block"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = CliRunner().invoke(app, ["serve", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_bad_fault_file_contents(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_text("error_rate: 5%\nexplode: yes\n")
    result = CliRunner().invoke(app, ["serve", "--faults", str(path)])
    assert result.exit_code == 2 and "unknown fault 'explode'" in result.stderr
    path.write_text("error_rate: [")
    result = CliRunner().invoke(app, ["serve", "--faults", str(path)])
    assert result.exit_code == 2 and "not valid YAML" in result.stderr


def test_the_real_process_exits_2_on_a_bad_profile():
    done = subprocess.run(
        [sys.executable, "-m", "surgelab", "serve", "--profile", "h9000"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("surgelab serve: error: unknown profile")
    assert len(done.stderr.strip().splitlines()) == 1


def test_serving_an_explicit_coefficients_file(tmp_path):
    path = tmp_path / "fitted.yaml"
    path.write_text(
        "model: my-fitted-model\nprefill_s_per_token: 1.0e-7\ndecode_base_s: 0.0001\n"
        "s_per_kv_token: 0\nstep_overhead_s: 0\nkv_capacity_tokens: 100000\n"
        "max_num_seqs: 64\nmax_batched_tokens: 4096\nmax_model_len: 4096\n"
    )
    with ServerProcess(profile=str(path)) as server:
        models = Http(server.root_url).get("/v1/models").json()
    assert models["data"][0]["id"] == "my-fitted-model"
    assert models["data"][0]["max_model_len"] == 4096


def test_a_front_end_time_delays_each_request_once(tmp_path):
    path = tmp_path / "front.yaml"
    path.write_text(
        "prefill_s_per_token: 1.0e-7\ndecode_base_s: 0.02\ns_per_kv_token: 0\nstep_overhead_s: 0\n"
        "request_overhead_s: 0.4\nkv_capacity_tokens: 100000\nmax_num_seqs: 64\nmax_batched_tokens: 4096\n"
    )
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "ignore_eos": True}
    with ServerProcess(profile=str(path)) as server:
        reply = Http(server.root_url).post("/v1/chat/completions", body)
    assert reply.status == 200
    # 0.4 s of front end, then 20 steps of 20 ms: once per request, not once per step (which would be 8 s)
    assert 0.7 <= reply.seconds < 2.0  # without the front end: 0.4 s
