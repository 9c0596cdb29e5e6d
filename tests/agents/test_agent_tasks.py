"""Agentic tasks (a DAG of steps on a shared context) against ``surgelab serve`` and ``surgelab simulate``."""

from __future__ import annotations

import pytest

from surgelab.metrics.store import read_records
from surgelab.sim.loader import build_fleet
from surgelab.sim.run import simulate

AGENT = {
    "think_time": 0.02,
    "task_slo": 5,
    "steps": [
        {"name": "plan", "prompt_tokens": 10, "output_tokens": 6},
        {"name": "research", "after": ["plan"], "fanout": 3, "prompt_tokens": 8, "output_tokens": 5, "tools": True},
        {"name": "merge", "after": ["research"], "prompt_tokens": 6, "output_tokens": 8},
    ],
}
WORKLOAD = {"kind": "chat", "prompt_tokens": 40, "output_tokens": 4, "system_prompt_tokens": 16, "agent": AGENT,
            "tools": {"result_tokens": 20, "latency": 0.1, "max_rounds": 1}}  # fmt: skip


def _tasks(records):
    tasks: dict[int, list] = {}
    for r in sorted(records, key=lambda r: r["turn"]):
        tasks.setdefault(r["session"], []).append(r)
    return tasks


def check_dag(records):
    """Every step starts only after each of its parents ended; fan-out copies overlap; the context grows."""
    for rows in _tasks(records).values():
        by_step: dict[str, list] = {}
        for r in rows:
            by_step.setdefault(r["step"], []).append(r)
        assert len(by_step["plan"]) == 1 and len(by_step["merge"]) == 1
        assert len(by_step["research"]) == 6, "3 subagents, each a call and the answer to its result"
        plan_end = by_step["plan"][0]["end_ns"]
        assert all(r["sent_ns"] >= plan_end for r in by_step["research"]), "no subagent before the plan ended"
        merge = by_step["merge"][0]
        assert merge["sent_ns"] >= max(r["end_ns"] for r in by_step["research"]), "the merge waits for every branch"
        calls = [r for r in by_step["research"] if r["tool_calls"]]
        assert len(calls) == 3 and max(r["sent_ns"] for r in calls) < min(r["end_ns"] for r in calls), "in parallel"
        # the merge's context: the plan's exchange, then each branch's (instruction, call, result, answer), then its own
        plan = by_step["plan"][0]
        shared = plan["prompt_tokens"] + plan["output_tokens"]
        answers = [r for r in by_step["research"] if not r["tool_calls"]]
        branches = sum(r["prompt_tokens"] - shared + r["output_tokens"] for r in answers)
        assert merge["prompt_tokens"] == shared + branches + 6
        assert all(r["prompt_tokens"] > shared for r in by_step["research"]), (
            "each subagent's prompt starts with the plan's"
        )


def test_a_dag_against_serve(embedded, scenario_for, run, tmp_path):
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 2, "duration": "1s", "arrival": "constant"},
        workload=WORKLOAD, preflight=False,
    )  # fmt: skip
    summary = run(scenario, tmp_path).summary
    records = read_records(tmp_path).to_pylist()
    assert summary["requests"]["failed"] == 0, [r["error"] for r in records if r["error"]][:3]
    assert len(_tasks(records)) == 2
    check_dag(records)


def test_the_same_dag_simulated(embedded, scenario_for, run, tmp_path):
    """``simulate`` schedules the very requests of a measured run in virtual time: the same ids, steps and
    prompt lengths, each step after its parents, the tool rounds after the tool's latency."""
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 2, "duration": "1s", "arrival": "constant"},
        workload=WORKLOAD, preflight=False,
    )  # fmt: skip
    run(scenario, tmp_path / "real")
    simulate(scenario, build_fleet({"pools": [{"profile": "tiny"}]}), tmp_path / "sim")
    real, sim = read_records(tmp_path / "real").to_pylist(), read_records(tmp_path / "sim").to_pylist()
    assert all(r["state"] == "ok" for r in sim)
    check_dag(sim)
    assert [(r["id"], r["step"], r["tool_calls"] or 0, r["prompt_tokens"]) for r in sim] == [
        (r["id"], r["step"], r["tool_calls"] or 0, r["intended_prompt_tokens"]) for r in real
    ]
    calls = [r for r in sim if r["tool_calls"]]
    by_id = {r["id"]: r for r in sim}
    for call in calls:  # its result is the next turn (load/phases.py's TURN_SHIFT)
        assert by_id[call["id"] + (1 << 32)]["intended_ns"] - call["end_ns"] == pytest.approx(0.1e9, abs=1), (
            "the tool's latency"
        )


def test_per_task_and_per_step_figures(embedded, scenario_for, run, tmp_path):
    """summary.json's agents block, from the records: tasks completed, their time and SLO, each step's figures."""
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 2, "duration": "1s", "arrival": "constant"},
        workload=WORKLOAD, preflight=False,
    )  # fmt: skip
    summary = run(scenario, tmp_path / "real").summary
    sim = simulate(scenario, build_fleet({"pools": [{"profile": "tiny"}]}), tmp_path / "sim").summary
    for figures, records in ((summary, read_records(tmp_path / "real")), (sim, read_records(tmp_path / "sim"))):
        rows = records.to_pylist()
        block = figures["agents"]["default"]
        assert block["tasks"] == block["completed"] == 2 and block["requests_per_task"] == 8
        assert block["failed"] == block["cut_short"] == 0
        times = sorted(
            (max(r["end_ns"] for r in t) - min(r["intended_ns"] for r in t)) / 1e9 for t in _tasks(rows).values()
        )
        assert block["task_s"]["min"] == pytest.approx(times[0]) and block["task_s"]["max"] == pytest.approx(times[1])
        assert block["task_slo"] == {"seconds": 5, "met": 2, "fraction": 1.0}
        steps = block["steps"]
        assert [steps[s]["requests"] for s in ("plan", "research", "merge")] == [2, 12, 2]
        assert steps["research"]["tool_calls"] == 6 and steps["plan"]["tool_calls"] == 0
        assert (
            steps["merge"]["prompt_tokens"]["mean"]
            > steps["research"]["prompt_tokens"]["max"]
            > steps["plan"]["prompt_tokens"]["max"]
        )
        research = [r for r in rows if r["step"] == "research" and r["session"] == rows[0]["session"]]
        span = (max(r["end_ns"] for r in research) - min(r["intended_ns"] for r in research)) / 1e6
        assert span in [
            pytest.approx(v) for v in (steps["research"]["span_ms"]["min"], steps["research"]["span_ms"]["max"])
        ]
        assert span > 100, "the research step holds its tool's 0.1 s"
        tools = figures["tools"]
        assert (
            tools["requests_offering_tools"] == 12
            and tools["answers_with_calls"] == 6
            and tools["by_name"] == {"search": 6}
        )


def test_a_task_with_a_failed_step_is_not_complete(embedded, scenario_for, run, tmp_path):
    """An error in any request ends its branch: the merge is never sent, and the task counts as not completed."""
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 2, "duration": "1s", "arrival": "constant"},
        workload={**WORKLOAD, "agent": {**AGENT, "steps": [*AGENT["steps"][:2],
                                                         {"name": "merge", "after": ["research"], "output_tokens": 10**6}]}},
        preflight=False,
    )  # fmt: skip
    summary = run(scenario, tmp_path).summary
    block = summary["agents"]["default"]
    assert block["tasks"] == 2 and block["completed"] == 0 and block["failed"] == 2 and block["cut_short"] == 0
    assert block["task_slo"] == {"seconds": 5, "met": 0, "fraction": 0.0}
    assert block["steps"]["merge"]["requests"] == 2 and block["steps"]["merge"]["ok"] == 0, "the too-long merge failed"


def test_the_simulators_prefix_cache_reuses_the_shared_context(embedded, scenario_for, tmp_path):
    """With ``cache.prefix`` the engines see each step's prompt start with its ancestors' exchanges: the later
    steps' first tokens come sooner than when every prompt is prefilled whole."""
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True}, load={"rate": 2, "duration": "1s", "arrival": "constant"},
        workload={**WORKLOAD, "system_prompt_tokens": 2000, "prompt_tokens": 1000}, preflight=False,
    )  # fmt: skip
    ttft = {}
    for prefix in (False, True):
        fleet = build_fleet({"pools": [{"profile": "llama3-8b-h100"}], "cache": {"prefix": prefix}})
        steps = simulate(scenario, fleet, tmp_path / str(prefix)).summary["agents"]["default"]["steps"]
        ttft[prefix] = {name: block["ttft_ms"]["mean"] for name, block in steps.items()}
    for step in ("research", "merge"):
        assert ttft[True][step] < 0.8 * ttft[False][step], (step, ttft)
