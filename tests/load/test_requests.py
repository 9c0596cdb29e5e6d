"""Request specs without sending: token lengths follow their distributions, prompt texts
have exactly the counted tokens, class shares follow the weights, and a seed fixes it all."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from surgelab.scenario.model import RequestClass, Workload
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.prompts import PromptFactory, WorkloadSampler

N = 6000
TOKENIZER = BuiltinTokenizer()


def rounded_ks(samples: np.ndarray, cdf) -> float:
    """KS distance between integer samples and X rounded to the nearest integer (P(rint X ≤ k) = F(k + ½)).

    The KS critical value is conservative for a discrete law, so passing is no weaker than
    for a continuous one; the tests also show it rejecting a slightly wrong law.
    """
    ks = np.arange(samples.min() - 1, samples.max() + 1)
    ecdf = np.searchsorted(np.sort(samples), ks, side="right") / samples.size
    return float(np.max(np.abs(ecdf - cdf(ks + 0.5))))


CRITICAL = stats.kstwo.ppf(1 - 1e-3, N)


def lognormal(mean: float, std: float):
    """The log-normal with this mean and standard deviation, solved independently of surgelab."""
    sigma = np.sqrt(np.log(1 + (std / mean) ** 2))
    return stats.lognorm(s=sigma, scale=mean * np.exp(-(sigma**2) / 2))


CASES: list[tuple[dict[str, Any], Any, Any]] = [
    ({"dist": "uniform", "min": 100, "max": 400}, stats.uniform(100, 300), stats.uniform(110, 300)),
    ({"dist": "normal", "mean": 200, "std": 50}, stats.norm(200, 50), stats.norm(205, 50)),
    ({"dist": "lognormal", "mean": 300, "std": 150}, lognormal(300, 150), lognormal(300, 180)),
]


def lengths(request_class: RequestClass, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    factory = PromptFactory(request_class, seed)
    specs = [factory.spec(i) for i in range(N)]  # crosses a sampling block boundary (4096)
    return np.array([s.prompt_tokens for s in specs]), np.array([s.max_tokens for s in specs])


@pytest.mark.parametrize(("dist", "law", "wrong"), CASES, ids=["uniform", "normal", "lognormal"])
def test_prompt_and_output_lengths_follow_their_distribution(dist, law, wrong):
    prompt, output = lengths(RequestClass(prompt_tokens=dist, output_tokens=dist, unique_prefix=False))
    for sample in (prompt, output):
        assert rounded_ks(sample, law.cdf) < CRITICAL
        assert rounded_ks(sample, wrong.cdf) > CRITICAL  # the test can tell a law from a near one
    assert not np.array_equal(prompt, output)  # independent draws, not one stream reused


def test_lognormal_is_given_by_its_own_mean_and_std():
    prompt, _ = lengths(RequestClass(prompt_tokens={"dist": "lognormal", "mean": 300, "std": 150}))
    assert abs(prompt.mean() - 300) < 5 * 150 / np.sqrt(N)
    assert abs(prompt.std() - 150) < 0.08 * 150


def test_normal_is_clipped_and_lengths_are_at_least_one():
    prompt, output = lengths(
        RequestClass(prompt_tokens={"dist": "normal", "mean": 5, "std": 10, "max": 12}, output_tokens=0)
    )
    assert prompt.min() == 1 and prompt.max() == 12
    assert set(output.tolist()) == {1}


@pytest.mark.parametrize("unique_prefix", [True, False])
def test_prompt_texts_have_exactly_the_counted_tokens(unique_prefix: bool):
    c = RequestClass(
        prompt_tokens={"dist": "uniform", "min": 1, "max": 60},
        system_prompt_tokens=17,
        shared_prefix={"fraction": 0.5, "tokens": 23},
        unique_prefix=unique_prefix,
    )
    factory = PromptFactory(c, 5)
    specs = [factory.spec(i) for i in range(2000)]
    assert {TOKENIZER.count(s.system_prompt) for s in specs} == {17}
    with_prefix = 0
    for s in specs:
        assert TOKENIZER.count(s.system_prompt) + TOKENIZER.count(s.prompt) == s.prompt_tokens
        # the chat body sends both as messages; the completions body joins them with a space
        assert TOKENIZER.count(s.system_prompt + " " + s.prompt) == s.prompt_tokens
        if s.prompt.startswith(factory.shared_prefix + " "):
            with_prefix += 1
            assert s.prompt_tokens - 17 - 23 >= 1
    assert TOKENIZER.count(factory.shared_prefix) == 23
    assert stats.binom.ppf(1e-4, 2000, 0.5) <= with_prefix <= stats.binom.ppf(1 - 1e-4, 2000, 0.5)
    firsts = {TOKENIZER.pieces(s.prompt.removeprefix(factory.shared_prefix + " "))[0] for s in specs}
    if unique_prefix:  # request i opens with i + 1 in base 4096: distinct first tokens below 4096 requests
        assert len({s.prompt for s in specs}) == len(specs)
        assert len(firsts) == len(specs)
    else:
        assert len(firsts) < len(specs)


def test_short_prompts_keep_their_exact_length():
    factory = PromptFactory(RequestClass(prompt_tokens={"dist": "uniform", "min": 1, "max": 4}), 1)
    for i in range(500):
        s = factory.spec(i)
        assert TOKENIZER.count(s.prompt) == s.prompt_tokens >= 1


def test_class_shares_follow_the_weights():
    weights = {"chat": 6, "batch": 3, "embed": 1}
    workload = Workload(mix=[{"name": n, "weight": w} for n, w in weights.items()], prompt_tokens=8)
    sampler = WorkloadSampler(workload, seed=11)
    n = 20_000
    names = [sampler.spec(i).request_class for i in range(n)]
    tail = 1e-4 / (2 * len(weights))
    for name, w in weights.items():
        p = w / sum(weights.values())
        assert stats.binom.ppf(tail, n, p) <= names.count(name) <= stats.binom.ppf(1 - tail, n, p), name
    # and class choice is independent of the lengths drawn inside a class (each class has its own stream)
    assert {sampler.spec(i).request_class for i in range(50)} == set(weights)


def test_classes_inherit_workload_defaults_and_keep_their_own():
    workload = Workload(
        prompt_tokens=40,
        output_tokens=7,
        tier="free",
        sampling={"temperature": 0.2},
        mix=[{"name": "a", "weight": 1}, {"name": "b", "weight": 1, "prompt_tokens": 90, "tier": "paid"}],
    )
    sampler = WorkloadSampler(workload, seed=2)
    seen = {}
    for i in range(100):
        s = sampler.spec(i)
        seen[s.request_class] = (s.prompt_tokens, s.max_tokens, s.tier, dict(s.extra))
    assert seen == {"a": (40, 7, "free", {"temperature": 0.2}), "b": (90, 7, "paid", {"temperature": 0.2})}


def _specs(seed: int, stream: int = 0, order=range(300)) -> dict[int, Any]:
    workload = Workload(
        mix=[{"name": "x", "weight": 2, "prompt_tokens": {"dist": "lognormal", "mean": 50, "std": 30}},
             {"name": "y", "weight": 1, "output_tokens": {"dist": "uniform", "min": 1, "max": 99}, "shared_prefix": {"fraction": 0.3, "tokens": 5}}],
    )  # fmt: skip
    sampler = WorkloadSampler(workload, seed=seed, stream=stream)
    return {i: sampler.spec(i) for i in order}


def test_same_seed_same_requests_in_any_order_other_seed_other_requests():
    one = _specs(4)
    assert one == _specs(4)
    assert one == _specs(4, order=reversed(range(300)))  # a worker asking for its own indices gets the same specs
    far = _specs(4, order=[5000, 3, 4097])
    assert far[3] == one[3] and far[5000] == _specs(4, order=[5000])[5000]
    other, stream = _specs(5), _specs(4, stream=1)
    assert all(one[i] != other[i] for i in range(300))
    assert all(one[i] != stream[i] for i in range(300))  # another phase, another stream


def test_specs_without_text_differ_only_in_the_prompt_text():
    """``spec(i, text=False)`` (what the simulator asks for when it only counts tokens) is ``spec(i)`` less its text."""
    from dataclasses import replace

    workload = Workload(
        mix=[{"name": "x", "weight": 2, "prompt_tokens": {"dist": "lognormal", "mean": 50, "std": 30}, "system_prompt_tokens": 12},
             {"name": "y", "weight": 1, "shared_prefix": {"fraction": 0.5, "tokens": 5}},
             {"name": "s", "weight": 1, "session": {"turns": 2}}],
    )  # fmt: skip
    sampler = WorkloadSampler(workload, seed=3)
    full, lean = [sampler.spec(i) for i in range(300)], [sampler.spec(i, text=False) for i in range(300)]
    assert [replace(s, prompt="") for s in full if s.request_class != "s"] == [
        s for s in lean if s.request_class != "s"
    ]
    assert all(s.prompt == "" for s in lean if s.request_class != "s")
    assert [s for s in full if s.request_class == "s"] == [
        s for s in lean if s.request_class == "s"
    ]  # a session resends its text
    assert {s.request_class for s in lean} == {"x", "y", "s"} and any(TOKENIZER.count(s.prompt) for s in full)


def test_synthetic_says_how_the_prompt_text_is_made():
    """``synthetic(i)`` (what the simulator hashes instead of the text) spells ``spec(i).prompt`` word for word;
    None where the text is not the pool's words behind a unique prefix."""
    workload = Workload(
        mix=[{"name": "x", "weight": 2, "prompt_tokens": {"dist": "uniform", "min": 1, "max": 60}, "system_prompt_tokens": 12},
             {"name": "y", "weight": 2, "shared_prefix": {"fraction": 0.5, "tokens": 5}, "prompt_tokens": 2},
             {"name": "s", "weight": 1, "session": {"turns": 2}},
             {"name": "u", "weight": 1, "unique_prefix": False}],
    )  # fmt: skip
    sampler = WorkloadSampler(workload, seed=3)
    made = {c: 0 for c in "xy"}
    for i in [*range(300), 4096**2 + 7, (1 << 17) - 1]:
        spec, how = sampler.spec(i), sampler.synthetic(i)
        if spec.request_class in "su":
            assert how is None
            continue
        words = " ".join(how.words(how.tokens))
        assert spec.prompt == (how.lead + " " + words if how.spaced else words)
        assert how.words(2) == words.split(" ")[:2] and TOKENIZER.count(words) == how.tokens
        made[spec.request_class] += 1
    assert min(made.values()) > 50
    last = -pow(7919, -1, 1 << 17) % (1 << 17)  # its words would start at the pool's last word: they start at its first
    for tokens in (60, 300_000):  # 300,000: more words than the pool has, which repeats
        factory = PromptFactory(RequestClass(prompt_tokens=tokens), 5)
        how, prompt = factory.synthetic(last), factory.spec(last).prompt
        assert " ".join(how.words(how.tokens)) == prompt and " ".join(how.words(20)) == prompt[: 20 * 5 - 1]
