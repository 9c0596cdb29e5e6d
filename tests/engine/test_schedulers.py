"""The engine's scheduling policy is a seam: FCFS by default, chosen by name, and any policy that
answers ``Scheduler`` orders the engine's admissions and preemptions on both of its paths."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import replace
from pathlib import Path

import pytest
from test_runs import CASES, _runs, _step_by_step, _workload

from surgelab.engine import Engine, EngineRequest, load_profile
from surgelab.engine.schedulers import SCHEDULERS

TINY = load_profile("tiny")
SRC = Path(__file__).resolve().parents[2] / "src" / "surgelab"
REGISTRY_LINE = re.compile(r"^SCHEDULERS: .*? = (\{.*\})$", flags=re.M)


@pytest.fixture
def shortest(tmp_path, monkeypatch, worked_example):
    """The page's policy, as if it were src/surgelab/engine/schedulers/shortest.py, registered by its line."""
    heading = "Adding an engine scheduler: a worked example"
    module, registry = worked_example(heading, "src/surgelab/engine/schedulers/shortest.py")
    path = tmp_path / "shortest.py"
    path.write_text(module, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("surgelab.engine.schedulers.shortest", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    source = (SRC / "engine" / "schedulers" / "__init__.py").read_text(encoding="utf-8")
    [listed] = REGISTRY_LINE.findall(source)
    [added] = REGISTRY_LINE.findall(registry)
    assert added == listed[:-1] + ', "shortest-first": ShortestFirst}', "the page's line: the source's, one more"
    monkeypatch.setitem(SCHEDULERS, "shortest-first", loaded.ShortestFirst)
    return "shortest-first"


def _finish_order(engine: Engine, requests: list[EngineRequest]) -> tuple[list[str], list[str]]:
    for request in requests:
        engine.add(request)
    finished, preempted = [], []
    for _ in range(10_000):
        result = engine.step()
        finished += result.finished
        preempted += result.preempted
        if not engine.has_work:
            return finished, preempted
    raise AssertionError("the engine never drained")


def test_the_default_is_first_come_first_served_by_name():
    assert Engine(TINY).scheduler.name == "fcfs"
    with pytest.raises(ValueError, match=f"unknown scheduler 'sjf': expected one of {', '.join(SCHEDULERS)}$"):
        Engine(TINY, scheduler="sjf")


def test_fcfs_preempts_the_latest_admitted_and_the_oldest_keeps_its_progress():
    # 6 blocks of 16 tokens: three 30-token prompts fill them; the first to grow takes another's
    engine = Engine(replace(TINY, kv_capacity_tokens=96, block_size=16))
    requests = [EngineRequest(r, 30, 40) for r in "abc"] + [EngineRequest("d", 10, 5)]
    finished, preempted = _finish_order(engine, requests)
    assert preempted == ["c", "b"]  # last in, first out
    assert finished[0] == "a" and sorted(finished) == ["a", "b", "c", "d"]


def test_another_policy_orders_the_same_requests_differently(shortest):
    one_at_a_time = replace(TINY, max_num_seqs=1)
    requests = [EngineRequest("long", 300, 5), EngineRequest("short", 20, 5), EngineRequest("mid", 100, 5)]
    assert _finish_order(Engine(one_at_a_time), requests)[0] == ["long", "short", "mid"]
    assert _finish_order(Engine(one_at_a_time, scheduler=shortest), requests)[0] == ["short", "mid", "long"]


def test_another_policy_chooses_whom_to_preempt(shortest):
    """Admitted in turn x, long, short, filling 7 blocks: x is the first to grow, and someone gives way."""
    results = {}
    for name, scheduler in (("fcfs", "fcfs"), ("shortest", shortest)):
        engine = Engine(replace(TINY, kv_capacity_tokens=112, block_size=16), scheduler=scheduler)
        engine.add(EngineRequest("x", 20, 40))
        engine.step()
        engine.add(EngineRequest("long", 33, 40))
        engine.step()
        results[name] = _finish_order(engine, [EngineRequest("short", 17, 40)])
    assert results["fcfs"] == (["x", "long", "short"], ["short", "long", "short"])  # the last admitted first
    assert results["shortest"] == (["x", "short", "long"], ["long", "short", "long"])  # the longest prompt first


@pytest.mark.parametrize("case", ["KV cache full: preemption and recompute", "slots full: requests wait for a finish"])
def test_runs_take_the_steps_of_step_under_another_policy(case, shortest):
    """The fast path asks the policy too: under it, run/plan/advance take exactly step()'s steps."""
    profile, shape = CASES[case]
    arrivals, aborts = _workload(7, 300, **shape)
    reference, fast = Engine(profile, scheduler=shortest), Engine(profile, scheduler=shortest)
    want = _step_by_step(reference, arrivals, aborts)
    got = _runs(fast, arrivals, aborts, 64)
    assert got.durations == want.durations and got.tokens == want.tokens and got.finished == want.finished
    assert len(want.finished) == len(arrivals)
    assert fast.num_preemptions == reference.num_preemptions
    fcfs = _step_by_step(Engine(profile), arrivals, aborts)
    assert fcfs.finished != want.finished, "the policy changed the order requests were served in"
