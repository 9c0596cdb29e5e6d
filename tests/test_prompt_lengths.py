"""Prompt lengths the server agrees with: learned from its /tokenize, checked against its usage.

The tokenizing server counts with a trained byte-level BPE and a ChatML template, as vLLM and
llama.cpp do: the built-in tokenizer's four-letter words are two tokens or more to it.
"""

from __future__ import annotations

import sys

import pyarrow.parquet as pq
import pytest
import yaml

from surgelab.process import ListeningChild

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module", params=["vllm", "llamacpp", "none"])
def server(request):
    cmd = [sys.executable, "-m", "surgelab.testing.tokenizing_server", "--port", "0", "--dialect", request.param]
    with ListeningChild(cmd, label=f"the tokenizing server ({request.param})", startup_timeout=30) as child:
        child.dialect = request.param
        yield child


def _scenario(scenario_for, server, **workload):
    return scenario_for(
        server.root_url + "/v1", model="m", load={"rate": 20, "duration": "1s", "arrival": "constant"},
        workload={"prompt_tokens": 128, "output_tokens": 4, **workload},
    )  # fmt: skip


def test_prompts_arrive_as_long_as_asked_for(server, scenario_for, run, reconciled, tmp_path):
    result = run(_scenario(scenario_for, server), tmp_path / "run")
    records = reconciled(result.summary, result.run_dir)
    lengths = result.summary["prompt_lengths"]
    assert lengths["compared"] == records.num_rows == 20
    saved = yaml.safe_load((result.run_dir / "scenario.yaml").read_text())
    if server.dialect == "none":  # nothing to learn from: the built-in tokenizer, and a loud warning
        assert saved["tokenizer"] == "builtin" and saved["tokenizer_calibration"] is None
        assert lengths["ratio"] > 1.5 and lengths["tokenizer"] == "builtin"
        [warning] = result.summary["warnings"]
        assert "prompts arrived" in warning and "no /tokenize" in warning
        return
    assert saved["tokenizer"] == "server" and len(saved["tokenizer_calibration"]["words"]) >= 16
    assert saved["tokenizer_calibration"]["template"]["chat"] > 0  # ChatML's roles and generation prompt
    assert set(records.column("prompt_tokens").to_pylist()) == {128}  # the server's own count, every request
    assert lengths["ratio"] == 1.0 and lengths["within_tolerance"] == 1.0
    assert result.summary["warnings"] == []


def test_a_system_prompt_and_its_template_are_counted_too(server, scenario_for, run, tmp_path):
    if server.dialect == "none":
        pytest.skip("nothing to learn from")
    result = run(_scenario(scenario_for, server, system_prompt_tokens=20), tmp_path / "run")
    table = pq.read_table(result.run_dir / "records.parquet", columns=["prompt_tokens", "intended_prompt_tokens"])
    assert set(table.column("intended_prompt_tokens").to_pylist()) == {148}
    assert table.column("prompt_tokens").to_pylist() == table.column("intended_prompt_tokens").to_pylist()


def test_tokenizer_server_is_an_error_when_the_target_cannot_tokenize(server, cli, tmp_path):
    if server.dialect != "none":
        pytest.skip("this target can tokenize")
    spec = tmp_path / "s.yaml"
    spec.write_text(f"tokenizer: server\ntarget: {{url: {server.root_url}/v1, model: m}}\nload: {{rate: 2, duration: 1s}}\n")
    out = cli("run", str(spec), "--out", str(tmp_path / "run"), "-q")
    assert out.returncode == 2
    assert "tokenizer: server, but the target cannot tokenize" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "pieces, costs",
    [
        (["Ġbaba", "Ġbe", "be", "Ġdo"], [1, 2, 1]),  # byte-level BPE spellings
        (["▁baba", "▁be", "be", "▁do"], [1, 2, 1]),  # SentencePiece
        (["▁", "▁baba", "▁bebe", "▁do"], [1, 1, 1]),  # SentencePiece's dummy prefix, doubled
        ([" baba", " be", "be", " do"], [1, 2, 1]),  # llama.cpp's decoded pieces
        (["baba", " bebe", " do"], [1, 1, 1]),  # the leading space dropped
        ([" baba", " bebe do"], [1, None, None]),  # a token across a space: those costs would not add up
    ],
)
def test_word_costs_are_read_off_the_servers_pieces(pieces, costs):
    from surgelab.workload.server_tokenizer import word_costs

    assert word_costs(["baba", "bebe", "do"], pieces) == costs


def test_pieces_that_do_not_spell_the_words_teach_nothing():
    from surgelab.workload.server_tokenizer import word_costs

    assert word_costs(["baba", "bebe"], ["Ġbaba", "Ġbobo"]) is None
