"""Tool-calling sessions against ``surgelab serve``: each call answered after the tool's latency, records per request."""

from __future__ import annotations

import pytest

from surgelab.client.kinds.responses import Responses
from surgelab.metrics.store import read_records
from surgelab.sim.loader import build_fleet
from surgelab.sim.run import simulate
from surgelab.tokenizer import BuiltinTokenizer

TOK = BuiltinTokenizer()

TOOLS = {"names": ["search", "fetch"], "result_tokens": 30, "latency": 0.2, "max_rounds": 2}


@pytest.mark.parametrize(
    ("kind", "server_state"), [("chat", False), ("responses", False), ("responses", True), ("messages", False)]
)
def test_a_session_answers_each_tool_call_and_goes_on(
    kind, server_state, embedded, scenario_for, run, tmp_path, monkeypatch
):
    """Two user turns, each answered by a call of the first tool (serve calls one when offered tools), its
    result sent 0.2 s later, then a text answer: four requests per session, each recorded with its calls.
    With the server's state, a result goes alone beside the calling answer's id."""
    bodies = []
    body = Responses.body
    monkeypatch.setattr(Responses, "body", lambda self, spec: bodies.append(body(self, spec)) or bodies[-1])
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 2, "duration": "1s", "arrival": "constant"},
        workload={"kind": kind, "prompt_tokens": 12, "output_tokens": 5, "tools": TOOLS,
                  "session": {"turns": 2, "think_time": 0.05, "previous_response_id": server_state}},
        preflight=False,
    )  # fmt: skip
    summary = run(scenario, tmp_path).summary
    records = read_records(tmp_path).to_pylist()
    assert summary["requests"]["failed"] == 0, [r["error"] for r in records if r["error"]][:3]
    sessions: dict[int, list] = {}
    for r in sorted(records, key=lambda r: r["turn"]):
        sessions.setdefault(r["session"], []).append(r)
    whole = [rows for rows in sessions.values() if len(rows) == 4]
    assert len(whole) >= 1 and len(sessions) == 2, "the second session's later turns may fall after the phase"
    for rows in sessions.values():
        assert [r["turn"] for r in rows] == [1, 2, 3, 4][: len(rows)]
        assert [r["tool_calls"] for r in rows] == [1, 0, 1, 0][: len(rows)], "a call, its result's answer; again"
        assert [r["tool_names"] for r in rows] == ["search", None, "search", None][: len(rows)]
        assert [r["intended_prompt_tokens"] for r in rows] == [r["prompt_tokens"] for r in rows], (
            "client and server agree"
        )
    if server_state:
        results = [b for b in bodies if isinstance(b["input"], list)]
        assert results and all(b["previous_response_id"].startswith("resp_") for b in results)
        assert all([i["type"] for i in b["input"]] == ["function_call_output"] for b in results)
    for rows in whole:
        call = rows[0]
        # the arguments are the 5 generated tokens in {"query": "..."}: 5 words of 4 letters and 4 spaces
        assert call["tool_args_bytes"] == len('{"query":""}') + 5 * 4 + 4
        assert call["sent_ns"] < call["first_tool_ns"] <= call["first_token_ns"] < call["end_ns"]
        assert call["output_tokens"] == 5 and len(call["itl_us"]) == 4, "each argument fragment is a token"
        gap = (rows[1]["intended_ns"] - call["end_ns"]) / 1e9
        assert 0.2 <= gap < 0.4, "the tool's latency is spent before its result is sent"
        # the result (30 tokens) and the call's arguments are in the next prompt
        assert rows[1]["prompt_tokens"] == call["prompt_tokens"] + 30 + TOK.count(
            '{"query":"abcd abcd abcd abcd abcd"}'
        )
        assert rows[2]["prompt_tokens"] > rows[1]["prompt_tokens"] + 5, "the next turn resends all of it"


def test_simulate_sends_the_same_tool_rounds(embedded, scenario_for, run, tmp_path):
    """In virtual time the simulated model calls a tool as serve does: the same requests, turns and prompts."""
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 2, "duration": "1s", "arrival": "constant"},
        workload={"kind": "chat", "prompt_tokens": 12, "output_tokens": 5, "tools": TOOLS,
                  "session": {"turns": 2, "think_time": 0.05}},
        preflight=False,
    )  # fmt: skip
    run(scenario, tmp_path / "real")
    simulate(scenario, build_fleet({"pools": [{"profile": "tiny"}]}), tmp_path / "sim")
    real, sim = read_records(tmp_path / "real").to_pylist(), read_records(tmp_path / "sim").to_pylist()
    fields = ("id", "session", "turn", "tool_calls", "tool_names", "tool_args_bytes")
    assert [[r[f] for f in fields] + [r["prompt_tokens"]] for r in sim] == [
        [r[f] for f in fields] + [r["intended_prompt_tokens"]] for r in real
    ]
    assert all(r["first_tool_ns"] == r["first_token_ns"] for r in sim if r["tool_calls"])
