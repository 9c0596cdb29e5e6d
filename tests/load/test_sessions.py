"""Multi-turn sessions against the embedded server: turn order, think times, and a context
that grows by exactly the previous answer and the new message (the server agrees)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from surgelab.load.phases import TURN_SHIFT, plan_phases
from surgelab.metrics.store import read_records
from surgelab.runner import execution
from surgelab.server.process import ServerProcess
from surgelab.units import SECOND

WORKLOAD = {
    "prompt_tokens": {"dist": "uniform", "min": 10, "max": 40},
    "output_tokens": {"dist": "uniform", "min": 2, "max": 6},
    "system_prompt_tokens": 7,
    "session": {"turns": {"dist": "uniform", "min": 2, "max": 4}, "think_time": {"dist": "uniform", "min": 0.05, "max": 0.15}},
}  # fmt: skip


@pytest.fixture
def predicted(monkeypatch) -> dict[int, int]:
    """The prompt tokens the client predicted for each request id, caught on the way out."""
    seen: dict[int, int] = {}
    original = execution.Execution.execute

    async def execute(self, meta, spec, out=None):
        seen[meta.id] = spec.prompt_tokens
        return await original(self, meta, spec, out)

    monkeypatch.setattr(execution.Execution, "execute", execute)
    return seen


def by_session(table) -> dict[int, list[dict[str, Any]]]:
    sessions = defaultdict(list)
    for row in table.to_pylist():
        sessions[row["session"]].append(row)
    return {k: sorted(v, key=lambda r: r["turn"]) for k, v in sessions.items()}


def test_turns_think_and_grow_the_context(embedded, scenario_for, run, predicted, tmp_path):
    s = scenario_for(embedded.base_url, load={"rate": 4, "arrival": "constant", "duration": "2.5s"}, workload=WORKLOAD)
    sampler = plan_phases(s)[0].sampler
    result = run(s, tmp_path / "run")
    table = read_records(result.run_dir)
    assert set(table["state"].to_pylist()) == {"ok"}
    sessions = by_session(table)
    assert len(sessions) == 10 and -1 not in sessions
    end_ns = int(2.5 * SECOND)
    full = 0
    for index, turns in sessions.items():
        plan, first = sampler.conversation(index), sampler.spec(index)
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
        assert [r["id"] for r in turns] == [index + (k << TURN_SHIFT) for k in range(len(turns))]
        last = turns[-1]
        if len(turns) < plan.turns:  # cut only because the next turn would start after the phase
            assert last["end_ns"] + plan.think_s[len(turns) - 1] * SECOND >= end_ns - 5e6
        else:
            full += 1
        assert turns[0]["prompt_tokens"] == first.prompt_tokens and turns[0]["output_tokens"] == first.max_tokens
        for k in range(1, len(turns)):
            before, now = turns[k - 1], turns[k]
            # the next turn is intended one think time after the previous answer ended
            gap = (now["intended_ns"] - before["end_ns"]) / SECOND - plan.think_s[k - 1]
            assert 0 <= gap < 5e-3, (index, k, gap)
            assert now["sent_ns"] >= now["intended_ns"] > before["end_ns"]
            # the context grows by the previous answer and the new user message
            assert now["prompt_tokens"] == before["prompt_tokens"] + before["output_tokens"] + plan.prompt_tokens[k - 1]
            assert now["output_tokens"] == plan.output_tokens[k - 1]
        for r in turns:  # the server counted what the client predicted, history included
            assert r["usage_source"] == "server" and r["prompt_tokens"] == predicted[r["id"]]
    assert full >= 7  # most conversations ran to their planned length
    assert {len(t) for t in sessions.values()} >= {2, 3} and max(len(t) for t in sessions.values()) <= 4


def test_think_times_are_the_drawn_ones_and_change_with_the_seed(scenario_for):
    def plans(seed: int):
        s = scenario_for("http://127.0.0.1:9/v1", seed=seed, workload=WORKLOAD)
        sampler = plan_phases(s)[0].sampler
        return [sampler.conversation(i) for i in range(300)]

    one = plans(1)
    assert one == plans(1) and one != plans(2)
    think = np.concatenate([p.think_s for p in one])
    turns = np.array([p.turns for p in one])
    assert think.min() >= 0.05 and think.max() <= 0.15 and abs(think.mean() - 0.1) < 0.01
    assert set(turns.tolist()) == {2, 3, 4} and all(len(p.think_s) == p.turns - 1 for p in one)


def test_a_failed_turn_ends_its_conversation(scenario_for, run, tmp_path):
    workload = {**WORKLOAD, "session": {"turns": 4, "think_time": 0.02}}
    with ServerProcess(["--seed", "5", "--error-rate", "30%", "--model", "ok"], profile="tiny") as server:
        s = scenario_for(
            server.base_url, load={"rate": 10, "arrival": "constant", "duration": "1.5s"}, workload=workload
        )
        table = read_records(run(s, tmp_path / "run").run_dir)
    sessions = by_session(table)
    assert len(sessions) == 15
    ended_early = 0
    for turns in sessions.values():
        states = [r["state"] for r in turns]
        assert all(state == "ok" for state in states[:-1]), states  # nothing follows a failure
        if states[-1] != "ok":
            assert states[-1] == "http_error"
            ended_early += len(states) > 1
        else:
            assert len(states) == 4
    assert ended_early >= 1 and sum(len(t) == 4 and t[-1]["state"] == "ok" for t in sessions.values()) >= 1
