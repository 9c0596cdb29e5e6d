"""Every scenario snippet of docs/agents.md runs as written against ``surgelab serve`` and under ``simulate``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from surgelab.scenario.loader import build_scenario
from surgelab.sim.loader import build_fleet
from surgelab.sim.run import simulate

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
SNIPPETS = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_shows_tools_an_agent_and_a_replay():
    assert [("tools:" in s, "agent:" in s, "replay:" in s) for s in SNIPPETS] == [
        (True, False, False), (True, True, False), (False, True, True),
    ]  # fmt: skip


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_snippet_runs_and_simulates(snippet, embedded, run, tmp_path):
    data = yaml.safe_load(snippet)
    scenario = build_scenario(
        {"target": {"url": embedded, "model": "surgelab-tiny", "stream": True},
         "load": {"rate": 2, "duration": "1s", "arrival": "constant"}, **data}, source=str(DOC), base_dir=DOC.parent,
    )  # fmt: skip
    measured = run(scenario, tmp_path / "run").summary
    simulated = simulate(scenario, build_fleet({"pools": [{"profile": "tiny"}]}), tmp_path / "sim").summary
    for summary in (measured, simulated):
        assert summary["requests"]["ok"] > 0 and summary["requests"]["failed"] == 0, summary["requests"]["by_state"]
        if "tools:" in snippet:
            assert summary["tools"]["answers_with_calls"] > 0
        if "agent:" in snippet:
            assert summary["agents"]["default"]["completed"] >= 1
