"""Scenario files: valid ones load, malformed ones give one line per problem with file:line.

Each case is raw YAML with the line the error must point at, checked through the library and
through ``surgelab validate`` (exit code 2, no traceback).
"""

from __future__ import annotations

import re
import textwrap

import pytest
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.scenario import ScenarioError, load_scenario
from surgelab.scenario.load import Arrival

HEAD = """\
name: x
target:
  url: http://127.0.0.1:1/v1
  model: ok
"""

# (id, yaml text, expected line, a fragment the message must contain)
CASES = [
    ("yaml-syntax", HEAD.replace("model: ok", "model: ok: bad") + "load:\n  rate: 5\n", 4, "invalid YAML"),
    ("yaml-tab", HEAD + "load:\n\trate: 5\n", 6, "invalid YAML"),
    ("yaml-duplicate-indent", HEAD + "load:\n  rate: 5\n   duration: 2s\n", 7, "invalid YAML"),
    ("unknown-field", HEAD + "load:\n  rate: 5\n  durration: 5s\n", 7, "load.durration: unknown field"),
    ("unknown-nested", HEAD + "  timeouts:\n    frist_token: 2s\nload:\n  rate: 5\n", 6, "target.timeouts.frist_token: unknown field"),
    ("unknown-top", HEAD + "load:\n  rate: 5\nthreshold: []\n", 7, "threshold: unknown field"),
    ("wrong-type-bool", HEAD + "  stream: maybe\nload:\n  rate: 5\n", 5, "target.stream: Input should be a valid boolean"),
    ("wrong-type-number", HEAD + "load:\n  concurrency: two\n", 6, "load.concurrency: expected a number or a shape"),
    ("wrong-type-mapping", HEAD + "load: 5\n", 5, "load: Input should be"),
    ("negative-rate", HEAD + "load:\n  rate: -5\n", 6, "load.rate: Input should be greater than 0"),
    ("infinite-rate", HEAD + "load:\n  rate: .inf\n", 6, "load.rate: Input should be a finite number"),
    ("zero-concurrency", HEAD + "load:\n  concurrency: 0\n", 6, "load.concurrency: Input should be greater than 0"),
    ("both-rate-and-concurrency", HEAD + "load:\n  rate: 5\n  concurrency: 3\n", 6, "give exactly one of rate"),
    ("neither-rate-nor-concurrency", HEAD + "load:\n  duration: 5s\n", 6, "give exactly one of rate"),
    ("bad-duration", HEAD + "load:\n  rate: 5\n  duration: 5 parsecs\n", 7, "load.duration: expected a duration"),
    ("negative-duration", HEAD + "load:\n  rate: 5\n  duration: -3\n", 7, "load.duration"),
    ("warmup-too-long", HEAD + "load:\n  rate: 5\n  duration: 5s\n  warmup: 10s\n", 6, "warmup (10s) must be shorter"),
    ("bad-threshold", HEAD + "load:\n  rate: 5\nthresholds:\n  - p99(ttft) < 2s\n  - p99(latency) < 2s\n", 9, "thresholds[1]: unknown latency metric 'latency'"),
    ("bad-threshold-form", HEAD + "load:\n  rate: 5\nthresholds:\n  - ttft is fast\n", 8, "cannot read threshold"),
    ("bad-url", HEAD.replace("http://127.0.0.1:1/v1", "not a url") + "load:\n  rate: 5\n", 3, "target.url"),
    ("bad-endpoint", HEAD + "  endpoint: telepathy\nload:\n  rate: 5\n", 5, "target.endpoint"),
    ("bad-arrival", HEAD + "load:\n  rate: 5\n  arrival: bursty\n", 7, "load.arrival"),
    ("bad-distribution", HEAD + "load:\n  rate: 5\nworkload:\n  prompt_tokens: {dist: uniform, min: 10, max: 5}\n", 8, "workload.prompt_tokens: max must be >= min"),
    ("unknown-distribution", HEAD + "load:\n  rate: 5\nworkload:\n  prompt_tokens:\n    dist: zipf\n    mean: 3\n", 9, "workload.prompt_tokens"),
    ("missing-url", "target:\n  model: m\nload:\n  rate: 5\n", 2, "target.url: required field is missing"),
    ("top-level-list", "- target\n- load\n", 1, "expected a mapping of scenario fields"),
]  # fmt: skip


def _write(tmp_path, text):
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "line", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_file_names_the_line(tmp_path, text, line, fragment):
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    messages = info.value.messages
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"{path}:{line}: "), messages[0]
    assert fragment in messages[0]
    assert "\n" not in messages[0]


@pytest.mark.parametrize(("text", "line", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate_exits_2_with_one_line_and_no_traceback(tmp_path, text, line, fragment):
    path = _write(tmp_path, text)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}:{line}: ")
    assert fragment in lines[0]


def test_every_problem_is_reported_at_once(tmp_path):
    text = textwrap.dedent(
        """\
        target:
          url: not a url
          model: ok
        load:
          rate: 0
          duration: -1s
          grace: soon
        workload:
          prompt_tokens: {dist: uniform, min: 10, max: 5}
        """
    )
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    lines = [int(re.match(rf"{re.escape(str(path))}:(\d+): ", m)[1]) for m in info.value.messages]
    assert lines == [2, 5, 6, 7, 9]


def test_unreadable_file(tmp_path):
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert "cannot read scenario file" in result.stderr
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "latin1.yaml")])
    assert result.exit_code == 2 and "cannot read scenario file" in result.stderr


def test_good_file_validates(tmp_path):
    path = _write(tmp_path, HEAD + "load:\n  rate: 5\n  arrival: constant\n  duration: 30s\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{path}: ok") and "5 req/s" in result.stdout


def test_full_scenario_loads_with_units_and_defaults(tmp_path):
    text = HEAD + textwrap.dedent(
        """\
          endpoint: completions
          stream: false
          api_key_env: MY_KEY
          headers: {X-Trace: abc}
          connection: close
          timeouts: {connect: 2s, first_token: 500ms, total: 1m}
        load:
          rate: 12.5
          arrival: gamma
          cv: 2
          duration: 1m30s
          warmup: 10s
          max_in_flight: 64
          grace: 0s
        workload:
          prompt_tokens: {dist: lognormal, mean: 512, std: 128}
          output_tokens: 64
        slo: {ttft: 2s, tpot: 50ms}
        thresholds:
          - p99(ttft) < 2s
          - {expr: error_rate < 1%, abort_on_fail: true}
        seed: 7
        """
    )
    s = load_scenario(_write(tmp_path, text))
    assert s.target.endpoint == "completions" and s.target.stream is False
    assert s.target.timeouts.first_token == 0.5 and s.target.timeouts.total == 60.0
    assert s.load.mode == "open" and s.load.arrival is Arrival.GAMMA and s.load.cv == 2.0
    assert s.load.duration == 90.0 and s.load.warmup == 10.0 and s.load.grace == 0.0
    assert s.workload.prompt_tokens.mean == 512 and s.workload.output_tokens.mean == 64
    assert s.slo.tpot == pytest.approx(0.05)
    assert [t.key for t in s.thresholds] == ["p99(ttft)", "error_rate"]
    assert s.thresholds[1].abort_on_fail
    assert s.seed == 7


def test_flags_override_the_file_and_switch_loop_mode(tmp_path):
    path = _write(tmp_path, HEAD + "load:\n  rate: 5\n  duration: 30s\n")
    s = load_scenario(path, {"load.concurrency": ("--concurrency", 3), "load.rate": ("--concurrency", None),
                             "load.duration": ("--duration", "2s")})  # fmt: skip
    assert s.load.mode == "closed" and s.load.concurrency.peak == 3 and s.load.duration == 2.0


def test_set_picks_a_list_item_by_its_number(tmp_path):
    """``--set phases.1.start=5s`` changes the second phase only (it used to replace the list by a mapping)."""
    phases = "phases:\n  - {name: a, load: {rate: 1, duration: 10s}}\n  - {name: b, start: 20s, load: {rate: 2, duration: 10s}}\n"
    path = _write(tmp_path, HEAD + phases)
    s = load_scenario(path, {"phases.1.start": ("--set phases.1.start", "5s"), "phases.0.load.rate": ("--set", 3)})
    assert [(p.name, p.start, p.load.shape.peak) for p in s.phase_list] == [("a", 0.0, 3.0), ("b", 5.0, 2.0)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "-1"], "error: --rate: load.rate: Input should be greater than 0"),
        (["--rate", "1", "--duration", "forever"], "error: --duration: load.duration: expected a duration"),
        (["--rate", "1", "--threshold", "p99(x) < 1s"], "error: --threshold: thresholds[0]: unknown latency metric"),
        (["--concurrency", "0"], "error: --concurrency: load.concurrency"),
        (["--rate", "1", "--arrival", "bursty"], "error: --arrival: load.arrival: Input should be 'constant'"),
        (["--rate", "1", "--connection", "maybe"], "error: --connection: target.connection"),
        (["--rate", "1", "--think-time", "soon"], "error: --think-time: load.think_time: expected a duration"),
        (["--rate", "1", "--set", "load=5"], "error: --set load: load: Input should be a valid dictionary"),
        (["--rate", "1", "--set", "=1"], "error: --set '=1': expected path=value"),
        (
            ["--rate", "1", "--set", "target.timeouts.total=-1s"],
            "error: --set target.timeouts.total: target.timeouts.total",
        ),
        (
            ["--rate", "1", "--set", "thresholds=[a < 1s]", "--set", "thresholds.3=b < 1s"],
            "error: --set thresholds.3: thresholds is a list of 1: give an index from 0 to 0 after it",
        ),
    ],
)
def test_bad_flags_name_the_flag(args, message):
    result = CliRunner().invoke(app, ["run", "--url", "http://127.0.0.1:1/v1", "--model", "m", *args])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [result.stderr.splitlines()[0]]
    assert result.stderr.startswith(message), result.stderr


def test_schema_prints_json_schema():
    import json

    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert "target" in schema["required"]
    assert {"rate", "concurrency", "duration"} <= set(schema["$defs"]["Load"]["properties"])
