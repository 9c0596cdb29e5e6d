"""`surgelab simulate` takes the responses and messages kinds, with sessions, and reports them as streamed text."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from surgelab.cli import app

SCENARIO = """
name: typed
target: {url: "http://127.0.0.1:9/v1", model: m, stream: true}
load: {rate: 5, duration: 10s, arrival: constant}
workload:
  prompt_tokens: 100
  output_tokens: 16
  mix:
    - {name: r, kind: responses, session: {turns: 2, previous_response_id: true}}
    - {name: m, kind: messages}
"""


def test_simulate_reports_both_kinds_as_streamed_text(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "f.yaml").write_text("pools: [{profile: tiny}]\n")
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["simulate", str(tmp_path / "s.yaml"), "--fleet", str(tmp_path / "f.yaml"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    by_kind = json.loads((out / "summary.json").read_text())["by_kind"]
    assert set(by_kind) == {"responses", "messages"}
    for kind, block in by_kind.items():
        assert block["requests"]["failed"] == 0 and block["requests"]["ok"] > 0, kind
        assert set(block["latency_ms"]) == {"e2e", "ttft", "itl", "tpot"}, kind
        rate = block["throughput"]["requests_per_s"]
        assert block["throughput"]["output_tokens_per_s"] == 16 * rate, kind
    responses, messages = by_kind["responses"]["throughput"], by_kind["messages"]["throughput"]
    assert messages["input_tokens_per_s"] == 100 * messages["requests_per_s"]
    # a session's second turn carries the first (100 + 16 tokens) before its own 100: more input per request
    assert responses["input_tokens_per_s"] > 100 * responses["requests_per_s"]
