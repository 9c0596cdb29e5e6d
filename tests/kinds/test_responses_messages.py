"""The responses and messages kinds against the embedded server: streamed and whole, sessions, figures."""

from __future__ import annotations

import pytest

from surgelab.client.kinds.responses import Responses
from surgelab.metrics.store import read_records

KINDS = ("responses", "messages")


@pytest.fixture(scope="module", params=[True, False], ids=["streamed", "whole"])
def both(request, embedded, scenario_for, run, reconciled, tmp_path_factory):
    """One short run with a class of each kind, streamed or not."""
    mix = [
        {"name": kind, "kind": kind, "prompt_tokens": 24, "output_tokens": 6, "system_prompt_tokens": 5}
        for kind in KINDS
    ]
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": request.param},
        load={"rate": 20, "duration": "1s", "arrival": "constant"}, workload={"mix": mix},
    )  # fmt: skip
    run_dir = tmp_path_factory.mktemp("typed")
    summary = run(scenario, run_dir).summary
    return request.param, summary, reconciled(summary, run_dir).to_pylist()


def test_every_request_ok_with_the_servers_token_counts(both):
    stream, summary, records = both
    assert summary["requests"]["failed"] == 0, [r["error"] for r in records if r["error"]][:3]
    assert {r["kind"] for r in records} == set(KINDS)
    for r in records:
        assert r["usage_source"] == "server", "usage from response.completed / message_start + message_delta"
        assert r["output_tokens"] == 6, "ignore_eos: exactly max_output_tokens / max_tokens"
        assert r["prompt_tokens"] == 24 + 5, "the server counts the prompt and the instructions / system prompt"
        if stream:
            assert len(r["itl_us"]) == 5, "one gap between each of the 6 text deltas"
            assert r["sent_ns"] < r["first_token_ns"] < r["end_ns"]


def test_by_kind_figures(both):
    stream, summary, _ = both
    for kind in KINDS:
        block = summary["by_kind"][kind]
        assert block["requests"]["ok"] == 10
        assert block["throughput"]["output_tokens_per_s"] == pytest.approx(6 * block["throughput"]["requests_per_s"])
        assert block["throughput"]["input_tokens_per_s"] == pytest.approx(29 * block["throughput"]["requests_per_s"])
        expected = {"e2e", "ttft", "itl", "tpot"} if stream else {"e2e"}
        assert set(block["latency_ms"]) == expected, kind


@pytest.mark.parametrize("server_state", [False, True], ids=["history", "previous_response_id"])
def test_sessions_grow_the_context(server_state, embedded, scenario_for, run, tmp_path, monkeypatch):
    """A 3-turn session: each turn's prompt (as the server counted it) holds every earlier turn, whether the
    client resends the history or names the previous response and the server keeps the conversation."""
    bodies = []
    body = Responses.body
    monkeypatch.setattr(Responses, "body", lambda self, spec: bodies.append(body(self, spec)) or bodies[-1])
    session = {"turns": 3, "previous_response_id": server_state}
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 4, "duration": "1s"},
        workload={"kind": "responses", "prompt_tokens": 10, "output_tokens": 4, "session": session},
        preflight=False,
    )  # fmt: skip
    summary = run(scenario, tmp_path).summary
    records = read_records(tmp_path).to_pylist()  # a session's turns have ids of their own (not 0..n-1)
    assert summary["requests"]["failed"] == 0, [r["error"] for r in records if r["error"]][:3]
    sessions = _sessions(records)
    for rows in sessions:  # a turn that would start after the run's end is not sent (a busy machine cuts one short)
        turns = len(rows)
        assert [r["turn"] for r in rows] == [1, 2, 3][:turns]
        assert [r["prompt_tokens"] for r in rows] == [10, 10 + 4 + 10, 10 + 4 + 10 + 4 + 10][:turns]
        assert [r["intended_prompt_tokens"] for r in rows] == [r["prompt_tokens"] for r in rows]
    assert any(len(rows) == 3 for rows in sessions), "the first session has the time for its three turns"
    later = [b for b in bodies if isinstance(b["input"], list) or "previous_response_id" in b]
    assert len(later) == sum(len(rows) - 1 for rows in sessions), "every turn after the first"
    if server_state:  # only the new message goes, beside the id of the answer before it
        assert all(isinstance(b["input"], str) and b["previous_response_id"].startswith("resp_") for b in later)
    else:
        assert all(len(b["input"]) in (3, 5) and "previous_response_id" not in b for b in later)


def _sessions(records):
    by_session = {}
    for r in sorted(records, key=lambda r: r["turn"]):
        by_session.setdefault(r["session"], []).append(r)
    assert by_session
    return list(by_session.values())
