"""Tools and agents in scenarios: what does not fit is one clear error naming the field, before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from surgelab.scenario.loader import ScenarioError, build_scenario
from surgelab.scenario.model import Scenario

HEAD = "target: {url: 'http://127.0.0.1:9/v1', model: m}\nload: {rate: 1, duration: 1s}\n"
STEPS = "steps: [{name: plan}, {name: merge, after: [plan]}]"
REPLAY = Path(__file__).resolve().parents[2] / "examples" / "agent-traces.otlp.json"

ERRORS = [
    ("workload: {kind: embeddings, tools: {}}", "tools applies to kind chat, responses or messages, not embeddings"),
    (
        f"workload: {{kind: completions, agent: {{{STEPS}}}}}",
        "agent applies to kind chat, responses or messages, not completions",
    ),
    (f"workload: {{agent: {{{STEPS}}}, session: {{turns: 2}}}}", "a class is an agent or a session, not both"),
    (
        "workload: {agent: {steps: [{name: a}, {name: b, after: [c]}]}}",
        "agent step 'b' comes after ['c'], which are not steps written before it",
    ),
    ("workload: {agent: {steps: [{name: b, after: [b]}]}}", "agent step 'b' comes after ['b']"),
    ("workload: {agent: {steps: [{name: a}, {name: a}]}}", "agent step names must be unique, 'a' is given twice"),
    ("workload: {agent: {steps: [{name: a, tools: true}]}}", "an agent step with tools: true needs the class's tools"),
    (
        "workload: {tools: {max_rounds: 16}, agent: {steps: [{name: a}, {name: b, fanout: 64, tools: true, after: [a]}]}}",
        "an agent task may make 1089 requests (steps × fanout × tool rounds); at most 255",
    ),
    (
        f"workload: {{kind: flow, flow: [{{name: a, agent: {{{STEPS}}}}}]}}",
        "flow step 'a' cannot be a flow, a session or an agent",
    ),
    (f"workload: {{tools: {{}}, agent: {{replay: {REPLAY}}}}}", "an agent replay waits out its recorded tool calls"),
    (f"workload: {{agent: {{replay: {REPLAY}, {STEPS}}}}}", "an agent has steps or a replay, not both"),
    ("workload: {agent: {steps: [{name: a}], speed: 2}}", "speed applies to an agent replay, not to steps"),
    ("workload: {agent: {steps: [{name: a}], think_time: recorded}}", "think_time: recorded applies to an agent replay"),
    ("workload: {agent: {}}", "an agent needs steps (its DAG) or replay (recorded traces)"),
]


@pytest.mark.parametrize(("snippet", "message"), ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_invalid_agent_fields(snippet, message):
    with pytest.raises(ScenarioError) as info:
        build_scenario(yaml.safe_load(HEAD + snippet), source="s.yaml")
    assert message in str(info.value)


def test_a_dag_expands_its_fanout_in_order():
    scenario = build_scenario(yaml.safe_load(HEAD + "workload: {tools: {max_rounds: 2}, agent: {steps: [{name: p}, "
                                                    "{name: r, after: [p], fanout: 2, tools: true}, {name: m, after: [r]}]}}"),
                              source="s.yaml")  # fmt: skip
    nodes = scenario.workload.agent.nodes(2)
    assert [(n.step.name, n.branch, n.parents, n.turn) for n in nodes] == [
        ("p", 0, (), 1), ("r", 0, (0,), 2), ("r", 1, (0,), 5), ("m", 0, (1, 2), 8),
    ]  # fmt: skip
    assert nodes[3].ancestors(nodes) == [0, 1, 2]


@pytest.mark.parametrize("agent", [STEPS, f"replay: {REPLAY}, speed: 2, tool_time: 0"], ids=["steps", "replay"])
def test_an_agent_reads_back_as_dumped(agent):
    """Worker processes get the scenario as ``model_dump`` wrote it: every field given, defaults included."""
    scenario = build_scenario(yaml.safe_load(HEAD + f"workload: {{agent: {{{agent}}}}}"), source="s.yaml")
    again = Scenario.model_validate(scenario.model_dump(mode="json", by_alias=True))
    assert again.workload.agent == scenario.workload.agent
