"""Bad input that ``validate`` called ok (issue 29): each case now ends in one line naming the field,
file and line, exit 2, before anything is sent — from ``validate`` and from ``run`` alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from surgelab.cli import app

HEAD = """\
name: bad
target:
  url: http://127.0.0.1:1/v1
  model: m
"""
TAIL = "load: {rate: 1, duration: 1s}\n"
RULE = "a header value is one line of ASCII text (percent-encode or base64 anything else)"

# (id, scenario text, the one line expected after "error: " with FILE for the scenario's path)
CASES = [
    ("name-is-a-path", HEAD.replace("name: bad", 'name: "../../../../tmp/x"') + TAIL,
     "FILE:1: name: expected a slug (letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 "
     "characters): it names the run directory; e.g. 'tmp-x' (got '../../../../tmp/x')"),
    ("name-has-a-nul", HEAD.replace("name: bad", 'name: "a\\0b"') + TAIL,
     "FILE:1: name: expected a slug (letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 "
     "characters): it names the run directory; e.g. 'a-b' (got 'a\\x00b')"),
    ("header-not-ascii", HEAD + '  headers: {X-Team: "日本"}\n' + TAIL,
     f"FILE:5: target.headers.X-Team: the value holds U+65E5 at character 1, which is not ASCII: {RULE}"),
    ("header-crlf", HEAD + '  headers:\n    X-Team: "a\\r\\nX-Evil: 1"\n' + TAIL,
     f"FILE:6: target.headers.X-Team: the value holds a line break (CR or LF) at character 2: {RULE}"),
    ("header-name", HEAD + '  headers: {"X Team": a}\n' + TAIL,
     "FILE:5: target.headers.X Team: the name is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)"),
    ("http-kind-header", HEAD + TAIL + 'workload:\n  kind: http\n  http:\n    path: /x\n    headers: {X-A: "\\0"}\n',
     f"FILE:10: workload.http.headers.X-A: the value holds a control character (U+0000) at character 1: {RULE}"),
]  # fmt: skip


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, command, text, expected):
    monkeypatch.chdir(tmp_path)
    path = _scenario(tmp_path, text)
    result = CliRunner().invoke(app, [command, str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == ["error: " + expected.replace("FILE", str(path))]
    assert not (tmp_path / "runs").exists(), "nothing is written for a scenario that cannot run"


def test_a_name_flag_that_is_a_path_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _scenario(tmp_path, HEAD + TAIL)
    result = CliRunner().invoke(app, ["run", str(path), "--name", "../escape"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith("error: --name: name: expected a slug")
    assert not (tmp_path.parent / "escape").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("abc\r\nX-Evil: 1", "holds a line break (CR or LF) at character 4"),
        ("sk-\u00e9t\u00e9", "holds U+00E9 at character 4, which is not ASCII"),
    ],
)
def test_an_api_key_that_cannot_be_a_header_names_the_variable_not_the_key(tmp_path, monkeypatch, key, why):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BAD_KEY", key)
    path = _scenario(tmp_path, HEAD + "  api_key_env: BAD_KEY\n" + TAIL)
    probe = ["--url", "http://127.0.0.1:1/v1", "--model", "m", "--api-key-env", "BAD_KEY"]
    for command, args in (("validate", [str(path)]), ("run", [str(path)]), ("probe", probe)):
        result = CliRunner().invoke(app, [command, *args])
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            f"error: $BAD_KEY (target.api_key_env): the API key {why}: set the variable to the key alone, one line of ASCII"
        ]
        assert "Evil" not in result.output and "t\u00e9" not in result.output


def test_compare_given_a_sweep_directory_says_what_to_compare(tmp_path):
    """Seen: ``KeyError: 'schedule_lag_ms'`` (a sweep directory has sweep.json, its runs are its levels)."""
    sweep = tmp_path / "sweep"
    for level in ("level-00", "level-01"):
        (sweep / level).mkdir(parents=True)
        (sweep / level / "summary.json").write_text("{}")
    (sweep / "sweep.json").write_text("{}")
    result = CliRunner().invoke(app, ["compare", str(sweep), str(sweep / "level-00")])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"error: {sweep}: a sweep directory, not a run: compare its levels (surgelab compare {sweep / 'level-00'} "
        f"{sweep / 'level-01'}), or see the sweep with surgelab report {sweep}"
    ]


PHASED = (
    HEAD
    + """\
phases:
  - {name: warm, load: {rate: 1, duration: 2s}}
  - {name: peak, start: 2s, load: {rate: 4, duration: 2s}}
"""
)


def test_a_load_flag_on_a_phased_scenario_says_what_to_do_instead(tmp_path):
    """Seen: ``--duration 10s`` on a phased scenario said "load: give exactly one of rate or concurrency"."""
    path = _scenario(tmp_path, PHASED)
    for flags, leaf in ((["--duration", "10s"], "duration"), (["--rate", "5"], "rate"), (["--warmup", "1s"], "warmup")):
        result = CliRunner().invoke(app, ["run", str(path), *flags])
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            f"error: {flags[0]}: {path} has phases, each with its own load, so there is no load.{leaf} to set: "
            f"set a phase's with --set phases.N.load.{leaf}=VALUE (N: 0 = warm, 1 = peak)"
        ]


def test_the_way_out_named_works(tmp_path):
    path = _scenario(tmp_path, PHASED)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert "peak: open loop, steady at 4 req/s for 2s" in result.stdout
    from surgelab.scenario import load_scenario

    scenario = load_scenario(path, {"phases.1.load.duration": ("--set phases.1.load.duration", "7s")})
    assert [p.load.planned_duration for p in scenario.phase_list] == [2.0, 7.0]
    with pytest.raises(Exception) as info:
        load_scenario(path, {"phases.1.load.duration": ("--set phases.1.load.duration", "-7s")})
    assert str(info.value).startswith("--set phases.1.load.duration: phases[1].load.duration")
    with pytest.raises(
        Exception, match=r"^--set phases\.5\.load\.duration: phases is a list of 2: give an index from 0 to 1"
    ):
        load_scenario(path, {"phases.5.load.duration": ("--set phases.5.load.duration", "7s")})
