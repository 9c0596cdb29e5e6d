"""``tools`` and ``agents`` in summary.json: the tool calls answers made, and agentic tasks per task and per step.

A task is the records of one ``session`` id whose ``step`` is set. It is **complete** when
none of its requests failed and every final step (one no other step waits for) has an answer
of text from each of its copies (fan-out) — a replayed task: each model call of its trace has
one; its **time** runs from its first request's intended send to its last answer's end, the
user's wait for the whole task. A task with a failed request has **failed**; one that neither
completed nor failed was **cut short** (the phase ended before its next step could start).
``task_slo`` is judged on the completed and failed tasks: a failed one misses it. A step's
**span** in a task runs from its first copy's intended send to its last copy's end, tool rounds
included.
Warm-up requests are left out, and so is any task that has one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from surgelab.analysis.columns import labels, plain
from surgelab.analysis.stats import distribution
from surgelab.load.phases import ID_STRIDE
from surgelab.scenario.model import Scenario

__all__ = ["tools_block", "agents_block"]

_NS = 1e9


def tools_block(c: Any) -> dict[str, Any] | None:
    """The requests that offered tools: how many answers called one, which, how big, how soon."""
    source = c.source
    if not source.has("tool_calls"):
        return None
    calls = source.floats("tool_calls")
    offered = ~np.isnan(calls) & ~c.warmup
    if not offered.any():
        return None
    called = offered & (calls > 0)
    first = source.floats("first_tool_ns") / _NS
    names = labels(source, "tool_names")
    by_name: dict[str, int] = {}
    for code in names.codes[called]:
        for name in names.values[code].split(","):
            by_name[name] = by_name.get(name, 0) + 1
    return {
        "requests_offering_tools": int(offered.sum()),
        "answers_with_calls": int(called.sum()),
        "tool_calls": int(np.nansum(calls[called])),
        "by_name": dict(sorted(by_name.items())),
        "arguments_bytes": distribution(source.floats("tool_args_bytes")[called]),
        "time_to_first_tool_call_ms": distribution(first[called] - c.sent[called], 1000),
    }


def agents_block(c: Any, scenario: Scenario) -> dict[str, Any] | None:
    """Per agent class: its tasks (completed, time, SLO) and each step's requests, latency and span."""
    agents = {
        cls.name: (cls, cls.agent)
        for phase in scenario.phase_list
        for cls in scenario.workload_of(phase).classes
        if cls.agent is not None
    }
    if not agents or not c.source.has("step"):
        return None
    step = labels(c.source, "step")
    session = c.source.numpy("session", plain)
    tool_calls = c.source.floats("tool_calls")
    failed = ~(c.state == "ok")
    out: dict[str, Any] = {}
    for cls, agent in agents.values():
        rows = np.flatnonzero((c.request_class == cls.name) & (step != "None"))
        tasks, order = np.unique(session[rows], return_inverse=True)
        warm = np.zeros(tasks.size, dtype=bool)
        np.logical_or.at(warm, order, c.warmup[rows])
        keep = ~warm[order]
        rows, order = rows[keep], order[keep]
        block = _tasks(c, cls, rows, order, tasks, step, tool_calls, failed, ~warm)
        block["steps"] = {name: _step(c, rows, order, step == name, tool_calls) for name in agent.step_names()}
        out[cls.name] = block
    return out


def _tasks(c, cls, rows, order, tasks, step, tool_calls, failed, counted) -> dict[str, Any]:
    n = tasks.size
    start = np.full(n, np.inf)
    end = np.full(n, -np.inf)
    np.minimum.at(start, order, c.intended[rows])
    np.maximum.at(end, order, np.nan_to_num(c.end[rows], nan=-np.inf))
    bad = np.zeros(n, dtype=bool)
    np.logical_or.at(bad, order, failed[rows])
    complete = ~bad & counted & _answered(cls.agent, rows, order, tasks, step, tool_calls)
    seconds = (end - start)[complete]
    judged = int((complete | (bad & counted)).sum())  # a task the phase's end cut short is neither
    block: dict[str, Any] = {
        "tasks": int(counted.sum()),
        "completed": int(complete.sum()),
        "failed": int((bad & counted).sum()),
        "cut_short": int(counted.sum()) - judged,
        "requests_per_task": float(rows.size / counted.sum()) if counted.any() else None,
        "task_s": distribution(seconds),
        "prompt_tokens_per_task": distribution(
            np.bincount(order, weights=np.nan_to_num(c.prompt[rows]), minlength=n)[complete]
        ),
    }
    slo = cls.agent.task_slo
    if slo is not None:
        met = int((seconds <= slo).sum())
        block["task_slo"] = {
            "seconds": slo,
            "met": met,
            "fraction": met / judged if judged else None,
        }
    return block


def _answered(agent: Any, rows, order, tasks, step, tool_calls) -> np.ndarray:
    """Per task: whether every final step (one no other step waits for) answered with text from each copy;
    a replayed task: whether each of its trace's model calls answered."""
    text = np.isnan(tool_calls[rows]) | (tool_calls[rows] == 0)
    n = tasks.size
    if agent.replay is not None:  # a session id is its first request's: phase base + the task's index
        expected = np.array([agent.trace_of(int(session) % ID_STRIDE).requests for session in tasks], dtype=np.int64)
        return np.bincount(order, weights=text, minlength=n) >= expected
    done = np.ones(n, dtype=bool)
    waited_for = {name for s in agent.steps for name in s.after}
    for final in (s for s in agent.steps if s.name not in waited_for):
        answers = np.zeros(n, dtype=np.int64)
        np.add.at(answers, order, (step[rows] == final.name) & text)
        done &= answers >= final.fanout
    return done


def _step(c, rows, order, of_step, tool_calls) -> dict[str, Any]:
    mine = of_step[rows]
    picked = rows[mine]
    ok = c.state[picked] == "ok"
    spans_start = np.full(order.max(initial=-1) + 1, np.inf)
    spans_end = np.full(spans_start.size, -np.inf)
    np.minimum.at(spans_start, order[mine], c.intended[picked])
    np.maximum.at(spans_end, order[mine], np.nan_to_num(c.end[picked], nan=-np.inf))
    had = np.isfinite(spans_start) & np.isfinite(spans_end)
    good = picked[ok]
    return {
        "requests": int(picked.size),
        "ok": int(ok.sum()),
        "tool_calls": int(np.nansum(tool_calls[picked])),
        "prompt_tokens": distribution(c.prompt[good]),
        "ttft_ms": distribution(c.first_token[good] - c.intended[good], 1000),
        "e2e_ms": distribution(c.end[good] - c.intended[good], 1000),
        "span_ms": distribution((spans_end - spans_start)[had], 1000),
    }
