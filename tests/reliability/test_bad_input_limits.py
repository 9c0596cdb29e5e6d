"""Inputs that are well-formed but absurd get one clear line at once (issue 20): a huge scenario file,
a token count no model takes, a token count of the wrong type, a rate over the guard given by a flag."""

from __future__ import annotations

import time

import pytest

from surgelab.scenario.loader import ScenarioError, build_scenario, load_scenario
from surgelab.yamlfile import MAX_BYTES


def _errors(workload: dict, **overrides) -> list[str]:
    data = {"target": {"url": "http://127.0.0.1:1/v1", "model": "m"}, "load": {"rate": 1, "duration": "1s"},
            "workload": workload}  # fmt: skip
    try:
        build_scenario(data, source="s.yaml", overrides=overrides)
    except ScenarioError as exc:
        return exc.messages
    return []


def test_a_60_mb_scenario_is_refused_at_once(tmp_path) -> None:
    """Seen: a 60 MB YAML was read for 60 s and 230 MB before anything was said."""
    path = tmp_path / "huge.yaml"
    block = "".join(f"    k{i}: {'x' * 40}\n" for i in range(20_000))  # ~1 MB of distinct keys
    with path.open("w") as f:
        f.write("name: huge\nworkload:\n  sampling:\n")
        for k in range(62):
            f.write(block.replace("    k", f"    k{k}_"))
    assert path.stat().st_size > 60e6
    started = time.monotonic()
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path)
    assert time.monotonic() - started < 2
    assert refused.value.messages == [
        f"{path}: scenario file is larger than {MAX_BYTES >> 20} MiB; keep large data (prompts, traces) in a dataset or "
        "trace file and refer to it"
    ]


def test_token_counts_no_model_takes_are_refused() -> None:
    """Seen: prompt-tokens 1e8 was accepted, and every request timed out."""
    assert _errors({"prompt_tokens": "1e8"}) == [
        "s.yaml:1: workload.prompt_tokens: 100,000,000 tokens is more than any model takes (at most 2,000,000) (got '1e8')"
    ]
    assert _errors({}, **{"workload.output_tokens": ("--max-tokens", 50_000_000)}) == [
        "--max-tokens: workload.output_tokens: 50,000,000 tokens is more than any model takes (at most 2,000,000) "
        "(got 50000000)"
    ]
    assert _errors({"prompt_tokens": {"dist": "uniform", "min": 10, "max": 3e6}}) == [
        "s.yaml:1: workload.prompt_tokens: 3,000,000 tokens is more than any model takes (at most 2,000,000)"
    ]
    assert _errors({"prompt_tokens": 128_000, "output_tokens": "1e3"}) == []


def test_a_token_count_of_the_wrong_type_says_tokens_not_duration() -> None:
    """Seen: wrong-type errors for token counts said "expected a duration"."""
    for given, error in [
        ("lots", "expected a number of tokens, e.g. 256 (got 'lots')"),
        ("2s", "expected a number of tokens, e.g. 256 (got '2s')"),
        ([1, 2], "expected a number of tokens, e.g. 256, or a distribution such as {dist: uniform, min: 100, max: 500} (got [1, 2])"),
    ]:
        (message,) = _errors({"prompt_tokens": given})
        assert message == f"s.yaml:1: workload.prompt_tokens: {error}"
        assert "duration" not in message
    (message,) = _errors({"mix": [{"name": "a", "output_tokens": {"dist": "uniform", "min": "ten", "max": 20}}]})
    assert message == "s.yaml:1: workload.mix[0].output_tokens: expected a number of tokens, e.g. 256 (got 'ten')"


def test_a_rate_over_the_guard_is_blamed_on_the_flag_that_gave_it(tmp_path) -> None:
    """Seen: a rate above the guard was blamed on the scenario file's line even when it came from a flag."""
    path = tmp_path / "s.yaml"
    path.write_text("name: g\ntarget:\n  url: http://127.0.0.1:1/v1\n  model: m\nload:\n  rate: 5\n  duration: 10s\n")
    with pytest.raises(ScenarioError) as from_flag:
        load_scenario(path, {"load.rate": ("--rate", 5000.0), "load.concurrency": ("--rate", None)})
    assert from_flag.value.messages[0].startswith("--rate: ")
    assert "a peak of 5000 req/s is above guards.max_rate (2000)" in from_flag.value.messages[0]
    path.write_text(path.read_text().replace("rate: 5\n", "rate: 5000\n"))
    with pytest.raises(ScenarioError) as from_file:
        load_scenario(path)
    assert from_file.value.messages[0].startswith(f"{path}:6: "), "the line of load.rate, not line 1"
