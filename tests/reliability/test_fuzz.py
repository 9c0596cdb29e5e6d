"""Bad input, fuzzed: any scenario text, any field value, any command line gives a valid
scenario or a clear error naming the file (or flag), the line and the field — never a
traceback, never a hang. Budgets are bounded (examples and a per-example deadline)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from unittest import mock

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.proxy import Faults, ProxyConfigError, Schedule
from surgelab.scenario.loader import ScenarioError, build_scenario, load_scenario
from surgelab.scenario.model import Scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FUZZ = settings(max_examples=120, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])
FIELDS = [
    "target", "url", "model", "endpoint", "stream", "load", "rate", "concurrency", "duration", "warmup", "arrival",
    "workload", "prompt_tokens", "output_tokens", "mix", "weight", "name", "phases", "start", "slo", "ttft", "e2e",
    "thresholds", "guards", "max_rate", "abort", "retry", "on", "max_attempts", "budget", "backoff", "type", "dist",
    "mean", "level", "steps", "timeouts", "total", "headers", "tiers", "kinds", "seed", "output", "dir", "session",
    "turns", "dataset", "path", "images", "http", "flow", "max_response_bytes", "targets", "routing", "mode",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["10s", "-1s", "5%", "1e309", "poisson", "step", "chat", "nan", "∞", "0x1F", "1h30m", ""]),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=5),
    max_leaves=25,
)
WHERE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): \S")


def _check_error(error: ScenarioError, source: str) -> None:
    assert error.messages, "an error says something"
    for message in error.messages:
        assert message.startswith(source), message
        assert WHERE.match(message) or message.startswith(f"{source}: cannot read"), message
        assert "Traceback" not in message


def _load(tmp_path: Path, text: str) -> Scenario | None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        return load_scenario(path)
    except ScenarioError as exc:
        _check_error(exc, str(path))
        return None


@FUZZ
@given(text=st.text(max_size=300))
def test_any_text_is_a_scenario_or_a_located_error(tmp_path_factory, text: str) -> None:
    _load(tmp_path_factory.mktemp("t"), text)


@FUZZ
@given(data=st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=6))
def test_any_structure_is_a_scenario_or_a_located_error(tmp_path_factory, data: dict) -> None:
    _load(tmp_path_factory.mktemp("s"), yaml.safe_dump(data, allow_unicode=True))


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


@FUZZ
@given(
    example=st.sampled_from(sorted(p.name for p in EXAMPLES.glob("*.yaml"))),
    pick=st.integers(min_value=0),
    value=VALUES,
)
def test_a_real_scenario_with_one_field_broken_names_that_field(tmp_path_factory, example: str, pick: int, value) -> None:
    data = yaml.safe_load((EXAMPLES / example).read_text(encoding="utf-8"))
    paths = _paths(data)
    path = paths[pick % len(paths)]
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    folder = tmp_path_factory.mktemp("e")
    for extra in EXAMPLES.iterdir():  # the example's datasets and traces, relative to it
        if extra.is_dir():
            (folder / extra.name).symlink_to(extra)
    scenario = _load(folder, yaml.safe_dump(data, allow_unicode=True))
    if scenario is None:
        return
    assert isinstance(scenario, Scenario)


def test_an_alias_bomb_is_refused_at_once(tmp_path) -> None:
    levels = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 9):
        levels.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]")
    text = "x:\n" + "\n".join("  " + line for line in levels) + "\ntarget: {url: 'http://127.0.0.1:9/v1', model: m, extra_body: {z: *i}}\n"
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    try:
        load_scenario(path)
    except ScenarioError as exc:
        assert "aliases expand to more than" in str(exc)
    else:
        raise AssertionError("an alias bomb must not load")


def test_deep_nesting_is_an_error(tmp_path) -> None:
    assert _load(tmp_path, "target: " + "[" * 5000 + "]" * 5000) is None


@FUZZ
@given(overrides=st.dictionaries(st.sampled_from(["load.rate", "load.duration", "workload.prompt_tokens", "target.url",
                                                  "seed", "load.concurrency", "guards.max_rate", "target.retry"]), VALUES, max_size=3))  # fmt: skip
def test_flag_overrides_name_the_flag(overrides: dict) -> None:
    base = {"target": {"url": "http://127.0.0.1:9/v1", "model": "m"}, "load": {"rate": 1, "duration": "1s"}}
    flags = {path: (f"--set {path}", value) for path, value in overrides.items()}
    try:
        build_scenario(base, source="s.yaml", overrides=flags)
    except ScenarioError as exc:
        for message in exc.messages:
            assert message.startswith(("--set ", "s.yaml:")), message


RUNNER = CliRunner()
FLAG_VALUES = st.one_of(st.text(max_size=10), st.sampled_from(["-1", "0", "1e9", "nan", "inf", "10s", "5%", "", "--", "=", "a=b"]))
RUN_FLAGS = ["--rate", "--concurrency", "--duration", "--warmup", "--prompt-tokens", "--max-tokens", "--arrival", "--endpoint",
             "--think-time", "--threshold", "--set", "--seed", "--cv", "--grace", "--max-in-flight", "--connection", "--workers"]  # fmt: skip


@settings(max_examples=80, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])
@given(flags=st.lists(st.tuples(st.sampled_from(RUN_FLAGS), FLAG_VALUES), max_size=4))
def test_any_run_command_line_is_a_run_or_a_clear_error(flags: list[tuple[str, str]]) -> None:
    """``surgelab run`` with fuzzed flags, in-process; a scenario that validates is not run."""
    args = ["run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "-q"]
    for flag, value in flags:
        args += [flag, value]
    with mock.patch("surgelab.cli.commands_run.execute", return_value=0) as execute:
        result = RUNNER.invoke(app, args)
    assert result.exit_code in (0, 2), (args, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    if result.exit_code == 0:
        assert isinstance(execute.call_args.args[0], Scenario)
    else:
        assert "Traceback" not in result.output and result.output.strip(), args


@settings(max_examples=80, deadline=timedelta(seconds=5))
@given(text=st.text(max_size=200))
def test_validate_on_any_file(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("v") / "s.yaml"
    path.write_text(text, encoding="utf-8")
    result = RUNNER.invoke(app, ["validate", str(path)])
    assert result.exit_code in (0, 2) and (result.exception is None or isinstance(result.exception, SystemExit)), result.output


@FUZZ
@given(knobs=st.dictionaries(st.sampled_from(["latency", "jitter_per_chunk", "drop", "drop_point", "bandwidth", "error_rate",
                                              "error_status", "stall_mid_stream", "stall_for", "other"]), VALUES, max_size=4),
       windows=VALUES)  # fmt: skip
def test_proxy_knobs_and_schedules(knobs: dict, windows) -> None:
    try:
        faults = Faults.from_mapping(knobs)
        assert not faults.validate()
    except ProxyConfigError as exc:
        assert str(exc).startswith("faults")
    try:
        Schedule.from_list(windows)
    except ProxyConfigError as exc:
        assert str(exc).startswith("schedule")
