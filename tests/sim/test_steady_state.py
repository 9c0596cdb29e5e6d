"""The steady-state analysis (``surgelab.engine.steady``) agrees with the simulator on the means it claims."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from surgelab.engine import GPUS, Deployment, find_model
from surgelab.engine.steady import steady_state

from .helpers import fleet, run, scenario


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    path = tmp_path_factory.mktemp("profile") / "qwen.yaml"
    path.write_text("model: qwen2.5-7b\ngpu: h100\nmax_num_seqs: 128\nmax_num_batched_tokens: 2048\nmax_model_len: 4096\n")
    return path


@pytest.mark.parametrize("rate", [2.0, 8.0])
def test_means_match_a_simulation_of_the_same_load(qwen, tmp_path, rate):
    scen = scenario({"rate": rate, "arrival": "constant", "duration": "120s", "grace": "60s"},
                    workload={"system_prompt_tokens": 96, "prompt_tokens": 450, "output_tokens": 200})  # fmt: skip
    result = run(tmp_path, scen, fleet(pools=[{"replicas": 1, "profile": str(qwen)}], cache={"prefix": True}))
    summary = result.summary
    profile = Deployment(find_model("qwen2.5-7b"), GPUS["h100"], max_num_seqs=128, max_num_batched_tokens=2048,
                         max_model_len=4096).profile()  # fmt: skip
    prompts = pq.read_table(result.run_dir / "records.parquet", columns=["prompt_tokens"])["prompt_tokens"].to_pylist()
    assert len(set(prompts)) == 1  # fixed lengths, the template's tokens included
    state = steady_state(profile, rate, prompts[0], 200, cached=96)
    latency = summary["latency_ms"]
    assert not state.overloaded
    assert state.e2e * 1e3 == pytest.approx(latency["e2e"]["mean"], rel=0.04)
    assert state.ttft * 1e3 == pytest.approx(latency["ttft"]["mean"], rel=0.15)
    assert state.running == pytest.approx(summary["concurrency"]["mean_in_flight"], rel=0.06)


def test_a_load_beyond_the_engine_is_overloaded():
    profile = Deployment(find_model("qwen2.5-7b"), GPUS["h100"], max_num_seqs=128).profile()
    assert not steady_state(profile, 10, 1000, 200).overloaded
    assert steady_state(profile, 400, 1000, 200).overloaded  # prefills alone would fill more than every second
