"""The built-in tokenizer and prompt synthesis agree on token counts exactly."""

from __future__ import annotations

import numpy as np
import pytest

from surgelab.scenario.model import Workload
from surgelab.tokenizer import VOCABULARY, BuiltinTokenizer
from surgelab.workload.prompts import PromptFactory

TOK = BuiltinTokenizer()


def test_every_vocabulary_word_is_one_token_with_or_without_a_space():
    assert len(VOCABULARY) == len(set(VOCABULARY)) == 4096
    for word in VOCABULARY:
        assert TOK.count(word) == 1
        assert TOK.count(" " + word) == 1


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64, 255, 256, 1000, 4097, 20_000])
def test_synthesize_has_exactly_n_tokens(n):
    rng = np.random.default_rng(n)
    assert TOK.count(TOK.synthesize(n, rng)) == n


def test_synthesize_many_lengths_and_prefixes():
    rng = np.random.default_rng(1)
    for n in rng.integers(1, 3000, size=200).tolist():
        prefix = TOK.unique_prefix(n * 7919, 3)
        text = TOK.synthesize(n, rng, prefix=prefix)
        assert TOK.count(text) == n
        assert text.split(" ")[: min(3, n)] == [VOCABULARY[i] for i in prefix][:n]


def test_synthesize_is_seeded():
    a = TOK.synthesize(50, np.random.default_rng(3))
    assert a == TOK.synthesize(50, np.random.default_rng(3))
    assert a != TOK.synthesize(50, np.random.default_rng(4))


def test_unique_prefix_spells_the_number_in_base_4096():
    assert TOK.unique_prefix(0) == [0, 0, 0]
    assert TOK.unique_prefix(4097) == [1, 1, 0]
    prefixes = {tuple(TOK.unique_prefix(i)) for i in range(1, 20_000)}
    assert len(prefixes) == 20_000 - 1


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("hello", 1),
        ("hello world", 2),
        ("extraordinary", 3),  # pieces of at most six letters: extrao|rdinar|y
        ("12345", 2),  # numbers in pieces of three digits
        ("a, b.", 4),
        ("line\n\nnext", 4),  # as GPT-2 splits: the last whitespace char stands alone before a word
    ],
)
def test_count_of_ordinary_text(text, count):
    assert TOK.count(text) == count


@pytest.mark.parametrize(
    "workload",
    [
        Workload(prompt_tokens=256, output_tokens=128),
        Workload(prompt_tokens=1, output_tokens=1),
        Workload(prompt_tokens=2, output_tokens=5, unique_prefix=True),
        Workload(prompt_tokens=100, output_tokens=10, unique_prefix=False),
        Workload(
            prompt_tokens={"dist": "uniform", "min": 1, "max": 2000},
            output_tokens={"dist": "normal", "mean": 50, "std": 20},
        ),
        Workload(
            prompt_tokens={"dist": "lognormal", "mean": 300, "std": 200}, output_tokens=64, system_prompt_tokens=40
        ),
    ],
)
def test_prompt_factory_specs_are_exact(workload):
    factory = PromptFactory(workload, seed=5)
    system = TOK.count(factory.system_prompt)
    assert system == workload.system_prompt_tokens
    for i in [*range(50), 4095, 4096, 4097, 10_000, 123_456]:
        spec = factory.spec(i)
        assert spec.prompt_tokens == TOK.count(spec.prompt) + system
        assert spec.max_tokens >= 1
        assert TOK.count(spec.prompt) >= 1


def test_prompt_factory_is_deterministic_by_index_whatever_the_order():
    workload = Workload(
        prompt_tokens={"dist": "uniform", "min": 10, "max": 500}, output_tokens={"dist": "uniform", "min": 1, "max": 99}
    )
    forward = PromptFactory(workload, seed=9)
    backward = PromptFactory(workload, seed=9)
    ids = [0, 1, 2, 4095, 4096, 9000, 70_000]
    assert [forward.spec(i) for i in ids] == [backward.spec(i) for i in reversed(ids)][::-1]
    other = PromptFactory(workload, seed=10)
    assert [forward.spec(i).prompt for i in ids] != [other.spec(i).prompt for i in ids]


def test_unique_prefix_makes_prompts_distinct_and_can_be_turned_off():
    unique = PromptFactory(Workload(prompt_tokens=8, output_tokens=1), seed=0)
    assert len({unique.spec(i).prompt for i in range(2000)}) == 2000
    shared = PromptFactory(Workload(prompt_tokens=8, output_tokens=1, unique_prefix=False), seed=0)
    first = [shared.spec(i).prompt.split(" ")[:3] for i in range(20)]
    assert first != [unique.spec(i).prompt.split(" ")[:3] for i in range(20)]


def test_prompt_lengths_follow_the_distribution():
    factory = PromptFactory(
        Workload(prompt_tokens={"dist": "uniform", "min": 100, "max": 300}, output_tokens=8), seed=2
    )
    lengths = np.array([factory.spec(i).prompt_tokens for i in range(3000)])
    assert lengths.min() >= 100 and lengths.max() <= 300
    assert abs(lengths.mean() - 200) < 5


def test_long_prompts_beyond_the_pool_are_exact():
    factory = PromptFactory(Workload(prompt_tokens=200_000, output_tokens=1), seed=1)
    spec = factory.spec(3)
    assert TOK.count(spec.prompt) == spec.prompt_tokens == 200_000
