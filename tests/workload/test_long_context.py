"""Long-context presets: their lengths, their prompts (fast, unique), the warnings, the server and the simulator."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.scenario.loader import build_scenario
from surgelab.scenario.model import Workload
from surgelab.server.process import ServerProcess
from surgelab.sim import build_fleet, simulate
from surgelab.sim.loader import fleet_context_warnings
from surgelab.sim.prefix import reference_hashes
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.prompts import PromptFactory, WorkloadSampler

LLAMA_31 = "meta-llama/Llama-3.1-8B-Instruct"  # catalogued: 131,072 positions
SCOUT = {"model": "meta-llama/Llama-4-Scout-17B-16E-Instruct", "gpu": "h100", "tp": 4, "max_model_len": 262144}


def _lengths(workload: dict) -> list[tuple[float, float]]:
    return [(c.prompt_tokens.value, c.output_tokens.value) for c in Workload.model_validate(workload).classes]


def test_presets_set_long_prompts_and_short_answers_unless_the_class_gives_its_own():
    assert _lengths({"preset": "long-8k"}) == [(8000, 128)]
    assert _lengths({"preset": "long-200k", "output_tokens": 16}) == [(200_000, 16)]
    # a mix class's own preset beats the lengths it would inherit; one without keeps the workload's
    mix = {"prompt_tokens": 50, "mix": [{"name": "long", "preset": "long-32k"}, {"name": "short"}]}
    assert _lengths(mix) == [(32_000, 128), (50, 128)]
    mix = {"preset": "long-100k", "mix": [{"name": "a"}, {"name": "b", "preset": "long-8k", "prompt_tokens": 7000}]}
    assert _lengths(mix) == [(100_000, 128), (7000, 128)]
    with pytest.raises(ValueError, match="long-8k"):
        Workload.model_validate({"preset": "long-1m"})
    # a preset that is no name at all is the field's error, not a TypeError (the fuzz test found `preset: []`)
    for wrong in ([], {"a": 1}, 8000):
        with pytest.raises(ValueError, match="preset"):
            Workload.model_validate({"mix": [{"name": "long", "preset": wrong}]})


def test_two_requests_of_a_preset_share_no_prefix_block_unless_one_is_asked_for():
    def shared_blocks(workload: dict) -> int:
        sampler = WorkloadSampler(Workload.model_validate(workload), seed=3)
        a, b = (reference_hashes(sampler.spec(i), 16) for i in (4, 5))
        assert len(a) == len(b) >= 32_000 // 16
        return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), len(a))

    assert shared_blocks({"preset": "long-32k"}) == 0
    assert shared_blocks({"preset": "long-32k", "shared_prefix": {"tokens": 2048}}) == 2048 // 16
    assert shared_blocks({"preset": "long-32k", "system_prompt_tokens": 1000}) == 1000 // 16


def test_a_500k_token_prompt_builds_in_milliseconds():
    factory = PromptFactory(Workload.model_validate({"prompt_tokens": 500_000, "output_tokens": 1}).classes[0], 0)
    factory.spec(0)
    started = time.perf_counter()
    specs = [factory.spec(i) for i in range(1, 11)]
    per_prompt_s = (time.perf_counter() - started) / 10
    assert per_prompt_s < 0.1, f"{per_prompt_s * 1e3:.1f} ms per 500k-token prompt"  # measured 0.3-8 ms
    assert BuiltinTokenizer().count(specs[-1].prompt) == specs[-1].prompt_tokens == 500_000


def _scenario_file(tmp_path, preset: str, model: str = LLAMA_31):
    path = tmp_path / f"{preset}.yaml"
    path.write_text(
        f"target: {{url: 'http://127.0.0.1:9/v1', model: {model}}}\nload: {{rate: 1, duration: 2s}}\n"
        f"workload: {{preset: {preset}}}\n"
    )
    return path


def test_validate_warns_when_a_preset_exceeds_the_target_models_context(tmp_path):
    result = CliRunner().invoke(app, ["validate", str(_scenario_file(tmp_path, "long-200k"))])
    assert result.exit_code == 0, result.output
    assert "warning: class default: preset long-200k asks for up to 200,128 tokens" in result.output
    assert f"more than the context of {LLAMA_31} (131,072)" in result.output
    for quiet in (_scenario_file(tmp_path, "long-100k"), _scenario_file(tmp_path, "long-200k", model="my-model")):
        result = CliRunner().invoke(app, ["validate", str(quiet)])  # fits, or the model is not known: nothing said
        assert result.exit_code == 0 and "warning" not in result.output, result.output


def test_simulate_warns_of_a_pool_whose_max_model_len_is_shorter():
    scen = build_scenario({"target": {"url": "http://127.0.0.1:9/v1", "model": "m"}, "load": {"rate": 1, "duration": "1s"},
                           "workload": {"preset": "long-32k"}})  # fmt: skip
    short = build_fleet({"name": "f", "pools": [{"name": "small", "profile": "llama3-8b-h100"}]})
    assert fleet_context_warnings(scen, short) == [
        "class default: preset long-32k asks for up to 32,128 tokens (32,000 prompt + 128 output), more than "
        "max_model_len of pool small in fleet f (8,192): those requests will fail (context_length_exceeded); "
        "choose a shorter preset or a longer-context model"
    ]
    assert fleet_context_warnings(scen, build_fleet({"pools": [{"name": "long", "profile": SCOUT}]})) == []


def _first_ttft_s(tmp_path, preset: str, budget: int = 8192) -> float:
    """TTFT of the first request of ``preset`` alone on one Llama-4-Scout replica (prefix cache on)."""
    scen = build_scenario({"target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
                           "load": {"concurrency": 1, "duration": "20s"}, "workload": {"preset": preset}})  # fmt: skip
    fleet = build_fleet({"pools": [{"name": "p", "profile": {**SCOUT, "max_num_batched_tokens": budget}}],
                         "cache": {"prefix": True}})  # fmt: skip
    run_dir = tmp_path / f"{preset}-{budget}"
    simulate(scen, fleet, run_dir)
    first = pq.read_table(run_dir / "records.parquet").to_pylist()[0]
    assert (first["state"], first["prompt_tokens"], first["output_tokens"]) == ("ok", int(preset[5:-1]) * 1000, 128)
    return (first["first_token_ns"] - first["sent_ns"]) / 1e9


def test_the_simulator_prefills_a_200k_prompt_in_chunks_with_a_plausible_ttft(tmp_path):
    ttft = _first_ttft_s(tmp_path, "long-200k")
    # 4 x H100 prefill a 17B-active model at 5k-100k tokens/s: 200k tokens take 2-40 s
    assert 2 < ttft < 40
    # attention makes prefill superlinear, at most quadratic: twice the prompt takes 2-4 times as long
    assert 2 < ttft / _first_ttft_s(tmp_path, "long-100k") < 4
    # chunked: a smaller step budget means more steps (25 of 8,192 tokens against 4 of 65,536), each with its overhead
    assert ttft > _first_ttft_s(tmp_path, "long-200k", budget=65536) + 0.02


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_embedded_server_serves_a_200k_prompt_when_its_max_model_len_allows():
    prompt = PromptFactory(Workload.model_validate({"preset": "long-200k"}).classes[0], 0).spec(0).prompt
    body = {"model": "surgelab-tiny", "prompt": prompt, "max_tokens": 4}
    with ServerProcess(["--max-model-len", "262144"]) as server:
        status, reply = _post(server.base_url + "/completions", body)
        assert status == 200, reply
        assert reply["usage"]["prompt_tokens"] == 200_000
    with ServerProcess() as server:  # tiny's own 32,768: the error a real server gives
        status, reply = _post(server.base_url + "/completions", body)
        assert status == 400 and reply["error"]["code"] == "context_length_exceeded", reply


def test_the_pre_flight_warns_when_a_preset_exceeds_the_served_max_model_len(tmp_path, run, capsys):
    with ServerProcess() as server:  # tiny serves 32,768 tokens; /models says so, as vLLM's does
        scen = build_scenario({"target": {"url": server.base_url}, "load": {"rate": 1, "duration": "1s"},
                               "workload": {"preset": "long-100k"}})  # fmt: skip
        result = run(scen, tmp_path / "run")
    said = capsys.readouterr().err
    assert (
        "pre-flight: warning: class default: preset long-100k asks for up to 100,128 tokens (100,000 prompt + 128 "
        f"output), more than the max_model_len {server.base_url} serves 'surgelab-tiny' with (32,768)"
    ) in said
    assert result.summary["requests"]["by_state"]["http_error"] == result.summary["requests"]["scheduled"] > 0
