"""Bad input to probe, score, monitor, history and cost: one line, exit 2, never a traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from surgelab.cli import app

from .fixtures import write_run


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "r.yaml").write_text("core_performance:\n  - require: p90(e2e) <= 3s\n")
    (tmp_path / "bad.yaml").write_text("core_performance:\n  - require: p90(e2e) <= soon\n")
    (tmp_path / "s.yaml").write_text(
        "target: {url: 'http://127.0.0.1:9/v1', model: m}\nload: {rate: 1, duration: 1s}\n"
    )
    write_run(tmp_path / "run")
    return tmp_path


CASES = [
    (["probe", "--url", "localhost:8000", "--model", "m"], "--url: expected an http(s) URL"),
    (
        ["probe", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--only", "context,telepathy"],
        "unknown probe(s) telepathy",
    ),
    (
        ["probe", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env", "SURGELAB_NO_SUCH_VAR"],
        "is not set",
    ),
    (["probe", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--idle", "a while"], "--idle:"),
    (["probe", "--model", "m"], "give --url and --model, or --scenario"),
    (["probe", "--scenario", "{d}/s.yaml", "--target", "nope"], "--target nope: not a target"),
    (["probe", "--scenario", "{d}/s.yaml", "--url", "http://127.0.0.1:9/v1"], "not both"),
    (
        ["probe", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", "2s"],
        "http://127.0.0.1:9/v1: no answer",
    ),
    (["score", "{d}/run", "--requirements", "{d}/missing.yaml"], "cannot read requirements"),
    (["score", "{d}/run", "--requirements", "{d}/bad.yaml"], "bad.yaml:2: core_performance.0"),
    (["score", "{d}/nowhere", "--requirements", "{d}/r.yaml"], "not a run directory"),
    (["score", "{d}/run", "--requirements", "{d}/r.yaml", "--history", "{d}/none.sqlite"], "no such history database"),
    (["score", "{d}/run", "--requirements", "{d}/r.yaml", "--peak", "11-9"], "--peak"),
    (["history", "--db", "{d}/none.sqlite"], "no such history database"),
    (["history", "--db", "{d}/r.yaml"], "not a surgelab history"),
    (["monitor", "{d}/missing.yaml", "--once"], "cannot read scenario"),
    (["monitor", "{d}/s.yaml", "--every", "soon"], "--every:"),
    (["cost", "{d}/run", "--scenario", "{d}/s.yaml"], "no target named run"),
    (["cost", "{d}/run", "--scenario", "{d}/s.yaml", "--plan", "{d}/r.yaml"], "no target named run"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(a[:1] + [m[:20]]) for a, m in CASES])
def test_bad_input_is_one_line_and_exit_2(files, args, message) -> None:
    result = CliRunner().invoke(app, [a.format(d=files) for a in args])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    text = result.output.replace("\n", " ")
    assert message in text, text
    assert "Traceback" not in result.output
