"""A real tokenizer.json on disk gives prompts of exact length for that tokenizer."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from surgelab.load.phases import plan_phases
from surgelab.scenario import ScenarioError, load_scenario
from surgelab.workload.hf_tokenizer import HFTokenizer, TokenizerError

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory) -> Path:
    """A byte-level BPE trained here on random words: a genuine tokenizer.json, made offline."""
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8))) for _ in range(3000)]
    corpus = [" ".join(rng.choices(words, k=50)) for _ in range(400)]
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=2000, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_synthesised_text_has_the_exact_count(tokenizer_file: Path) -> None:
    hf = HFTokenizer(tokenizer_file)
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 17, 256, 2048):
        text = hf.synthesize(n, rng, hf.unique_prefix(12345))
        assert hf.count(text) == n


def test_a_folder_holding_tokenizer_json_works(tokenizer_file: Path) -> None:
    assert HFTokenizer(tokenizer_file.parent).count(" hello") >= 1


def test_scenario_prompts_are_exact_for_the_named_tokenizer(tokenizer_file: Path, tmp_path: Path) -> None:
    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text(
        f"tokenizer: {tokenizer_file}\n"
        "target: {url: http://127.0.0.1:1/v1, model: m}\n"
        "load: {rate: 1, duration: 5s}\n"
        "workload: {prompt_tokens: {dist: uniform, min: 5, max: 300}, system_prompt_tokens: 40,"
        " shared_prefix: {fraction: 0.5, tokens: 20}}\n"
    )
    scenario = load_scenario(scenario_file)
    sampler = plan_phases(scenario)[0].sampler
    hf = HFTokenizer(tokenizer_file)
    for i in range(60):
        spec = sampler.spec(i)
        assert hf.count(spec.prompt) + hf.count(spec.system_prompt) == spec.prompt_tokens
    assert len({sampler.spec(i).prompt for i in range(60)}) == 60  # every prompt its own


def test_missing_or_broken_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="tokenizer not found"):
        load_scenario(None, {"target.url": ("", "http://x/v1"), "target.model": ("", "m"), "load.rate": ("", 1),
                             "tokenizer": ("--set tokenizer", str(tmp_path / "nope.json"))})  # fmt: skip
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    with pytest.raises(TokenizerError, match="cannot load tokenizer"):
        HFTokenizer(broken)
