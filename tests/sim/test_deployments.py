"""Fleets of deployments: a model (catalogued or a config.json), GPUs, TP and precision, simulated and
sized with the engine model's measured error beside every figure."""

from __future__ import annotations

import json

import pytest

from surgelab.engine import GPUS, Deployment, find_model
from surgelab.sim import load_fleet

from .helpers import fleet, run, scenario

MIXTRAL = {"model": "mistralai/Mixtral-8x7B-v0.1", "gpu": "h100", "tp": 2, "max_num_seqs": 128,
           "max_num_batched_tokens": 2048, "max_model_len": 4096}  # fmt: skip


def test_a_fleet_names_a_config_json_beside_it(tmp_path):
    (tmp_path / "qwen").mkdir()
    (tmp_path / "qwen" / "config.json").write_text(json.dumps({
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "torch_dtype": "bfloat16",
        "max_position_embeddings": 32768}))  # fmt: skip
    (tmp_path / "fleet.yaml").write_text("name: mine\npools:\n  - profile: {model: qwen, gpu: h100, tp: 1}\n")
    fleet = load_fleet(tmp_path / "fleet.yaml")
    assert fleet.pools[0].profile["model"] == str(tmp_path / "qwen")  # anchored to the fleet file's folder
    result = run(tmp_path, scenario({"rate": 2, "duration": "5s"}), fleet)
    assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"] > 0
    bar = result.fleet["model_error"]["default"]
    assert bar["errors"]["e2e_mean"] > 0 and "dense models on H100 SXM" in bar["text"]


def test_bad_deployments_in_a_fleet_are_one_line_with_the_line_number(tmp_path):
    (tmp_path / "fleet.yaml").write_text("name: x\npools:\n  - profile: {model: mixtral-8x7b, gpu: h100}\n")
    with pytest.raises(Exception, match=r"fleet.yaml:3: pools\[0\]\.profile: .*needs at least 2 GPUs"):
        load_fleet(tmp_path / "fleet.yaml")
    (tmp_path / "fleet.yaml").write_text("name: x\npools:\n  - profile: {model: nope-7b, gpu: h100}\n")
    with pytest.raises(Exception, match=r"fleet.yaml:3: pools\[0\]\.profile: model: unknown model 'nope-7b'"):
        load_fleet(tmp_path / "fleet.yaml")


def test_mixtral_tp2_and_an_fp8_model_simulate(tmp_path):
    scen = scenario({"rate": 4, "arrival": "constant", "duration": "20s"},
                    workload={"prompt_tokens": 500, "output_tokens": 100})  # fmt: skip
    mixtral = run(tmp_path, scen, fleet(name="mixtral", pools=[{"profile": MIXTRAL}]), "mixtral")
    fp8 = run(
        tmp_path,
        scen,
        fleet(name="fp8", pools=[{"profile": {"model": "qwen3-14b", "gpu": "h100", "weights": "fp8"}}]),
        "fp8",
    )
    bf16 = run(tmp_path, scen, fleet(name="bf16", pools=[{"profile": {"model": "qwen3-14b", "gpu": "h100"}}]), "bf16")
    for result in (mixtral, fp8, bf16):
        assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"]
    # a decode step streams the dense part and at least the experts of one token: never faster than that
    d = Deployment(find_model("mixtral-8x7b"), GPUS["h100"], tp=2)
    floor = (d.streamed_dense_bytes + 2 * d.expert_bytes) / (2 * 3.35e12)
    assert mixtral.summary["latency_ms"]["tpot"]["p50"] / 1e3 > floor
    # fp8 weights stream half the bytes: its decode steps are shorter than bf16's
    assert fp8.summary["latency_ms"]["tpot"]["mean"] < 0.7 * bf16.summary["latency_ms"]["tpot"]["mean"]
    assert "mixture-of-experts" in mixtral.fleet["model_error"]["default"]["family"]


def test_plan_from_a_simulated_sweep_sizes_at_the_models_slow_end(tmp_path, cli):
    (tmp_path / "fleet.yaml").write_text("name: q\npools:\n  - profile: {model: qwen2.5-7b, gpu: h100}\n")
    (tmp_path / "s.yaml").write_text(
        "name: s\ntarget: {url: 'http://127.0.0.1:9/v1', model: m}\nload: {rate: 1, duration: 10s}\n"
        "workload: {prompt_tokens: 200, output_tokens: 50}\nslo: {ttft: 500ms}\n"
    )
    out = cli("sweep", str(tmp_path / "s.yaml"), "--fleet", str(tmp_path / "fleet.yaml"), "--start", "4", "--max", "16",
              "--hold", "10s", "--settle", "1s", "--out", str(tmp_path / "sweep"), timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    sweep = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    error = sweep["target"]["model_error"]["errors"]["e2e_mean"]
    plan = cli("plan", str(tmp_path / "sweep"), "--peak", "100", "--out", str(tmp_path / "plan"))
    assert plan.returncode == 0, plan.stderr
    assert "engine model: E2E ±" in plan.stdout
    written = json.loads((tmp_path / "plan" / "plan.json").read_text())
    simulated = written["capacity"] * (1 + error / 100)
    assert f"simulated {simulated:.4g} req/s" in written["capacity_source"]


def test_a_sweep_of_the_embedded_server_keeps_the_served_models_error(tmp_path, cli):
    """--serve PROFILE measures the engine model in wall time: its figures are the model's, and so is their error."""
    (tmp_path / "s.yaml").write_text(
        "name: s\ntarget: {url: 'http://127.0.0.1:9/v1', model: m}\nload: {rate: 1, duration: 3s}\n"
        "workload: {prompt_tokens: 50, output_tokens: 8}\nslo: {ttft: 2s}\n"
    )
    out = cli("sweep", str(tmp_path / "s.yaml"), "--serve", "llama3-8b-h100", "--start", "2", "--max", "2", "--hold", "3s",
              "--settle", "1s", "--warmup", "0", "--out", str(tmp_path / "sweep"), timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    sweep = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert "dense models on H100 SXM" in sweep["target"]["model_error"]["text"]
