"""Recorded agent traces replayed as tasks, against ``surgelab serve`` and under ``surgelab simulate``: the
same executor as a DAG of steps, with the trace's branches, lengths and waits."""

from __future__ import annotations

from pathlib import Path

import pytest

from surgelab.metrics.store import read_records
from surgelab.scenario.loader import load_scenario
from surgelab.sim.loader import build_fleet, load_fleet
from surgelab.sim.run import simulate
from surgelab.traces.otel_agents import read_agent_traces

from .spans import fanout_trace, otlp, tool_trace, write

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOAD = {"rate": 1, "duration": "2s", "arrival": "constant"}  # two tasks: traces 0 and 1 (or 0 twice)


def _scenario(scenario_for, url, spans, tmp_path, **agent):
    replay = write(tmp_path / "spans.json", otlp(spans))
    return scenario_for(url, model="surgelab-tiny", target={"stream": True}, load=LOAD, preflight=False,
                        workload={"kind": "chat", "agent": {"replay": replay, **agent}})  # fmt: skip


def _by_task(rows):
    tasks: dict[int, list] = {}
    for r in sorted(rows, key=lambda r: r["turn"]):
        tasks.setdefault(r["session"], []).append(r)
    return list(tasks.values())


def test_overlapping_subagents_are_in_flight_together_against_serve(embedded, scenario_for, run, tmp_path):
    scenario = _scenario(scenario_for, embedded, fanout_trace(), tmp_path)
    summary = run(scenario, tmp_path / "real").summary
    real = read_records(tmp_path / "real").to_pylist()
    assert summary["requests"]["failed"] == 0, [r["error"] for r in real if r["error"]][:3]
    for plan, a, b, merge in _by_task(real):
        assert [r["step"] for r in (plan, a, b, merge)] == ["orchestrator", "researcher", "researcher", "orchestrator"]
        assert [r["intended_prompt_tokens"] for r in (plan, a, b, merge)] == [40, 30, 32, 60], "as recorded"
        assert [r["output_tokens"] for r in (plan, a, b, merge)] == [6, 24, 24, 8]
        assert min(a["sent_ns"], b["sent_ns"]) >= plan["end_ns"], "the subagents wait for the plan"
        assert max(a["sent_ns"], b["sent_ns"]) < min(a["end_ns"], b["end_ns"]), "and are in flight together"
        assert merge["sent_ns"] >= max(a["end_ns"], b["end_ns"]), "the merge waits for both"
    block = summary["agents"]["default"]
    assert block["tasks"] == block["completed"] == 2 and block["requests_per_task"] == 4
    assert {name: s["requests"] for name, s in block["steps"].items()} == {"orchestrator": 4, "researcher": 4}
    # the simulator schedules the very same requests
    simulated = simulate(scenario, build_fleet({"pools": [{"profile": "tiny"}]}), tmp_path / "sim")
    sim = read_records(tmp_path / "sim").to_pylist()
    assert [(r["id"], r["step"], r["prompt_tokens"]) for r in sim] == [
        (r["id"], r["step"], r["intended_prompt_tokens"]) for r in real
    ]
    assert simulated.summary["agents"]["default"]["completed"] == 2


@pytest.mark.parametrize(("tool_time", "wait_s"), [("recorded", (0.02 + 0.3 + 0.03) / 2), (0, (0.02 + 0.03) / 2)])
def test_a_tool_span_is_waited_out(tool_time, wait_s, embedded, scenario_for, run, tmp_path):
    """The call after a tool is due the recorded think and tool time after the call before it ended (÷ speed)."""
    scenario = _scenario(scenario_for, embedded, tool_trace(), tmp_path, speed=2, tool_time=tool_time)
    simulate(scenario, build_fleet({"pools": [{"profile": "tiny"}]}), tmp_path / "sim")
    checks = [(read_records(tmp_path / "sim").to_pylist(), 1e-6)]
    if tool_time == "recorded":
        run(scenario, tmp_path / "real")
        checks.append((read_records(tmp_path / "real").to_pylist(), 0.01))  # the event loop's wake-up
    for rows, within in checks:
        tasks = _by_task(rows)
        assert len(tasks) == 2 and all(len(t) == 2 for t in tasks)
        for first, second in tasks:
            assert (second["intended_ns"] - first["end_ns"]) / 1e9 == pytest.approx(wait_s, abs=within)
            assert second["sent_ns"] >= second["intended_ns"] - 1e6


def test_the_example_simulated_gives_one_task_per_trace(tmp_path):
    scenario = load_scenario(EXAMPLES / "agent-replay.yaml")
    traces = read_agent_traces(EXAMPLES / "agent-traces.otlp.json").traces
    block = simulate(scenario, load_fleet(EXAMPLES / "fleets" / "agents-h100.yaml"), tmp_path).summary["agents"][
        "default"
    ]
    assert block["tasks"] == block["completed"] == len(traces) == 4
    assert block["task_slo"]["met"] == 4
    assert sum(s["requests"] for s in block["steps"].values()) == sum(t.requests for t in traces) == 13
    assert list(block["steps"]) == ["orchestrator", "researcher", "support", "travel", "gpt-4o-mini"]
    research = max(traces, key=lambda t: t.requests)
    assert block["task_s"]["max"] > sum(c.duration_s for c in research.calls if not c.model), "its tools were waited"


def test_a_replay_the_phase_cuts_is_not_complete(embedded, scenario_for, tmp_path):
    """A task whose tool would end after the phase sends nothing more: it was cut short, not completed."""
    scenario = _scenario(scenario_for, embedded, tool_trace(), tmp_path, tool_time=5)
    block = simulate(scenario, build_fleet({"pools": [{"profile": "tiny"}]}), tmp_path).summary["agents"]["default"]
    assert block["tasks"] == 2 and block["completed"] == 0 and block["cut_short"] == 2
    assert block["steps"]["support"]["requests"] == 2, "each task's first call only"
