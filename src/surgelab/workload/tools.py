"""Synthetic tools: a reply's tool calls answered with results of a drawn size, after a drawn latency.

The request that carries the results (``follow_up``) resends the request it follows, the calls
and a result for each; earlier tool exchanges stay in the history as plain text (``exchange``),
so each request's prompt is the one before it and more — the prefix a server's cache can reuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from surgelab.scenario.agents import Tools
from surgelab.workload.request import RequestSpec, ToolResult

__all__ = ["exchange", "added_history", "follow_up", "tool_latency_s", "stand_in_calls"]


def exchange(spec: RequestSpec, answer: str) -> tuple[tuple[str, str], ...]:
    """What ``spec`` and its answer add to the history of the requests after it."""
    if not spec.tool_results:
        return ((spec.prompt, answer),)
    calls = " ".join(r.arguments for r in spec.tool_results)
    return (spec.prompt, calls), (" ".join(r.output for r in spec.tool_results), answer)


def added_history(before: RequestSpec, last: RequestSpec, answer: str) -> tuple[tuple[str, str], ...]:
    """What a turn or step (``before``, then its tool rounds up to ``last``) adds to the history after it."""
    return (*last.history[len(before.history) :], *exchange(last, answer))


def follow_up(factory: Any, spec: RequestSpec, calls: Sequence[Any], seed: int) -> RequestSpec:
    """The request that sends ``calls``' results: ``spec`` again, the calls, and a synthetic result for each.

    ``factory`` is the class's ``PromptFactory`` (its tokenizer and text); ``seed`` fixes the results' sizes.
    """
    tools: Tools = factory.cls.tools
    rng = np.random.default_rng([*factory.key, 11, seed])
    sizes = np.maximum(np.rint(tools.result_tokens.sample(rng, len(calls))), 1).astype(int).tolist()
    results = tuple(
        ToolResult(call.call_id, call.name, call.arguments, factory.text(seed * 31 + k, size))
        for k, (call, size) in enumerate(zip(calls, sizes, strict=True))
    )
    count = factory.tokenizer.count
    added = sum(count(r.arguments) + count(r.output) for r in results)
    base = spec
    if spec.tool_results:  # the previous results join the history as plain text
        head = exchange(spec, "")[0]
        base = replace(spec, history=(*spec.history, head), prompt=" ".join(r.output for r in spec.tool_results))
    return replace(base, tool_results=results, prompt_tokens=spec.prompt_tokens + added, previous_response_id=None)


def tool_latency_s(tools: Tools, key: Sequence[int], seed: int) -> float:
    """How long the tools of one round take (the agent's think time before it sends their results)."""
    return max(float(tools.latency.sample(np.random.default_rng([*key, 12, seed]), 1)[0]), 0.0)


class _StandIn:
    __slots__ = ("call_id", "name", "arguments")

    def __init__(self, call_id: str, name: str, arguments: str) -> None:
        self.call_id, self.name, self.arguments = call_id, name, arguments


def stand_in_calls(spec: RequestSpec, words: str) -> list[Any]:
    """The call a simulated model makes when offered tools (as ``surgelab serve`` does): the first tool, once."""
    return [_StandIn("call_0", spec.tools[0], '{"query":"' + words.strip() + '"}')]
