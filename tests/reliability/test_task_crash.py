"""A request's task that raises outside the request itself (building a session's next turn) never
passes quietly: the run is invalid, says why first, and the traceback reaches stderr.

Before, the exception stayed in the asyncio task: the turns it would have sent were simply not
there, the summary counted what was left, and the run passed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from surgelab.analysis.verdict import run_exit_code
from surgelab.server.process import serve_process
from surgelab.workload.prompts import WorkloadSampler

SESSION = {"prompt_tokens": 16, "output_tokens": 4, "session": {"turns": 3, "think_time": 0}}


@pytest.fixture(scope="module")
def embedded() -> Iterator[str]:
    with serve_process(profile="tiny") as url:
        yield url


@pytest.fixture
def broken_turns(monkeypatch):
    def next_turn(self, index, first, plan, turn, history):
        raise KeyError(f"turn {turn} of session {index}")

    monkeypatch.setattr(WorkloadSampler, "next_turn", next_turn)


def test_a_task_that_raises_makes_the_run_invalid_with_its_error(
    embedded, scenario_for, run, tmp_path, capfd, broken_turns
):
    scenario = scenario_for(embedded, model="surgelab-tiny", load={"rate": 4, "duration": "1s"}, workload=SESSION)
    run(scenario, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    sessions = summary["requests"]["scheduled"]
    assert sessions >= 2 and summary["requests"]["ok"] == sessions  # only the first turns were sent
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["client_crashes"] == {"count": sessions, "first": "KeyError: 'turn 2 of session 0'"}
    validity = summary["validity"]
    assert not validity["valid"] and validity["reasons"][0].startswith(
        f"{sessions} request task(s) raised inside surgelab"
    )
    assert run_exit_code(summary["thresholds_passed"], info["stop_reason"], validity["valid"]) == 3  # never a pass
    err = capfd.readouterr().err
    assert "Traceback" in err and "KeyError: 'turn 2 of session 0'" in err and err.count("Traceback") == 1
