"""The files a scenario reads rows from (issue 29): a bad row was dropped without a word, a dataset
of unknown format was a traceback. Now every file's skipped rows are counted and said — before the
load, in run.json and summary.json — and a file that cannot be used is one line, exit 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.load.inputs import input_report
from surgelab.metrics.store import read_records

AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _trace(tmp_path, rows: int = 6):
    """An Azure excerpt, 0.1 s apart, with a 99,999,999-token row (line 3) and a negative one (line 5)."""
    lines = [f"2023-11-16 18:15:46.{k}000000,{20 + k},3" for k in range(rows)]
    lines[1] = "2023-11-16 18:15:46.1000000,99999999,3"
    lines[3] = "2023-11-16 18:15:46.3000000,-4,3"
    path = tmp_path / "azure.csv"
    path.write_text(AZURE_HEAD + "\n".join(lines) + "\n")
    return path


def _dataset(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "one two three"}\n{"prompt": ""}\n{"prompt": "four five"}\n')
    return path


def test_skipped_rows_are_counted_said_and_never_sent(zero_server, scenario_for, run, reconciled, tmp_path, capsys):
    trace, dataset = _trace(tmp_path), _dataset(tmp_path)
    s = scenario_for(
        zero_server.url,
        load={"rate": {"type": "replay", "trace": str(trace)}, "duration": None},
        workload={"mix": [{"name": "a", "dataset": {"path": str(dataset)}}, {"name": "b", "prompt_tokens": 8}]},
    )
    expected = [
        {"field": "load.rate", "file": str(trace), "format": "azure", "rows": 4, "skipped": 2, "skipped_lines": [3, 5],
         "first_skipped": {"line": 3, "why": "99,999,999 tokens for 'ContextTokens' is more than any model takes (at most 2,000,000)"}},
        {"field": "workload.mix[0].dataset", "file": str(dataset), "format": "jsonl", "rows": 2, "skipped": 1,
         "skipped_lines": [2], "first_skipped": {"line": 2, "why": "empty prompt"}},
    ]  # fmt: skip
    assert input_report(s) == expected
    result = run(s, tmp_path / "run")
    table = reconciled(result.summary, tmp_path / "run")
    assert table.num_rows == 4, "the trace's two bad rows are not requests"
    assert max(read_records(result.run_dir)["prompt_tokens"].to_pylist()) < 100
    assert json.loads((result.run_dir / "run.json").read_text())["inputs"] == expected
    assert result.summary["inputs"] == expected
    said = [w for w in result.summary["warnings"] if "rows skipped" in w]
    assert said == [
        "load.rate: azure.csv: 2 of 6 rows skipped as bad (lines 3, 5); the first, line 3: 99,999,999 tokens for "
        "'ContextTokens' is more than any model takes (at most 2,000,000)",
        "workload.mix[0].dataset: prompts.jsonl: 1 of 3 rows skipped as bad (line 2); the first, line 2: empty prompt",
    ]


def test_validate_and_run_say_skipped_rows_before_the_load(tmp_path):
    trace = _trace(tmp_path)
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ntarget: {url: 'http://127.0.0.1:1/v1', model: m}\n"
        f"load: {{rate: {{type: replay, trace: {trace.name}}}}}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "warning: load.rate: azure.csv: 2 of 6 rows skipped as bad (lines 3, 5); the first, line 3" in result.stdout
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "run")])
    assert result.exit_code == 4, result.output  # the target is down: the rows were said before the pre-flight
    assert "warning: load.rate: azure.csv: 2 of 6 rows skipped as bad" in result.stderr


def test_a_dataset_that_cannot_be_read_is_one_line_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("hello\nworld\n")
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ntarget: {url: 'http://127.0.0.1:1/v1', model: m}\nload: {rate: 1, duration: 1s}\n"
        "workload: {dataset: {path: data.txt}}\n"
    )
    for command in ("validate", "run", "preview", "sweep"):
        result = CliRunner().invoke(app, [command, str(path)])
        assert result.exit_code == 2, (command, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.stderr.splitlines() == [
            f"error: {path}: workload.dataset: {tmp_path / 'data.txt'}:1: cannot tell the format from the first line "
            "'hello'; give format (one of azure, burstgpt, mooncake, lengths, jsonl, sharegpt, csv) or columns"
        ], command
    assert not (tmp_path / "runs").exists()
