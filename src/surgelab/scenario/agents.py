"""Tool calls and agentic tasks as scenario data: the tools a request offers, and a task's DAG of steps
(written as steps, or replayed from recorded traces)."""

from __future__ import annotations

import functools
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from surgelab.files import scenario_path
from surgelab.scenario.base import PositiveSeconds, ScenarioModel
from surgelab.scenario.distributions import Distribution, Fixed, TokenCount
from surgelab.traces.otel_agents import AgentTrace, AgentTraces, read_agent_traces_cached

__all__ = ["Tools", "AgentStep", "Agent", "Node", "MAX_TASK_REQUESTS", "recorded_nodes"]

MAX_TASK_REQUESTS = 255
"""Requests of one task (or session) at most: their turn numbers live in 8 bits of the request id."""


class Tools(ScenarioModel):
    """Synthetic tools offered with each request: a reply's tool calls are answered, after the tool's
    latency, by the next request of the session or step (docs/agents.md)."""

    names: list[str] = Field(
        ["search"], min_length=1, description="Function names offered; each takes one string argument, query."
    )
    result_tokens: TokenCount = Field(
        Fixed(value=200), description="Length of each tool's result, sent back in the next request."
    )
    latency: Distribution = Field(
        Fixed(value=0.5),
        description="Seconds a real tool would take: the agent waits this long before it sends the result.",
    )
    max_rounds: int = Field(
        2, ge=0, le=16, description="Tool rounds after one turn or step at most (a model may keep calling tools)."
    )


class AgentStep(ScenarioModel):
    """One step of an agentic task: a request on top of the context its ancestors built."""

    name: str = Field(description="Reported per step in the summary.")
    after: list[str] = Field(
        default_factory=list, description="Steps (written earlier) whose answers this step waits for."
    )
    fanout: int = Field(1, ge=1, le=64, description="Parallel copies of the step (subagents), each its own request.")
    prompt_tokens: TokenCount = Field(
        Fixed(value=64), description="The step's own instruction, sent after the shared context."
    )
    output_tokens: TokenCount = Field(Fixed(value=128), description="max_tokens of the step's request.")
    tools: bool = Field(False, description="Offer the class's tools in this step (its tool rounds belong to the step).")


Recorded = Literal["recorded"]


class Agent(ScenarioModel):
    """A task as a DAG of steps (plan, parallel subagents, tool calls, merge), each step's prompt the
    shared context so far: the task's opening prompt and every ancestor's exchange. The steps are
    written out, or each task replays one recorded trace (``replay``)."""

    steps: list[AgentStep] = Field(
        default_factory=list, description="The steps, each after the steps it names (written before it)."
    )
    replay: str | None = Field(
        None, description="Instead of steps: recorded agent traces, OpenTelemetry GenAI spans as JSON (docs/agents.md); "
        "task i replays trace i mod their number. Relative to the scenario file.",
    )  # fmt: skip
    think_time: Recorded | Distribution | None = Field(
        None, description="Pause between a step's last parent ending and the step's start (default 0; a replay's: "
        "recorded, what the trace shows between a call's parents ending and its start, ÷ speed).",
    )  # fmt: skip
    tool_time: Recorded | Distribution = Field(
        "recorded", description="A replay: how long each recorded tool call takes (recorded: its span's duration "
        "÷ speed; a number or distribution replaces it, 0 drops it).",
    )  # fmt: skip
    speed: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        1.0, description="A replay: recorded think and tool times are divided by this (2 halves them)."
    )
    task_slo: PositiveSeconds | None = Field(
        None, description="Time to finish a whole task, first step sent to last step's end."
    )

    @field_validator("replay")
    @classmethod
    def _resolve(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else scenario_path(value, info, "agent traces")

    @model_validator(mode="after")
    def _dag(self) -> Agent:
        if self.replay is not None:
            return self._replayable()
        if not self.steps:
            raise ValueError("an agent needs steps (its DAG) or replay (recorded traces)")
        replay_only = [name for name, given in (("think_time: recorded", self.think_time == "recorded"),
                       ("tool_time", self.tool_time != "recorded"), ("speed", self.speed != 1.0)) if given]  # fmt: skip
        if replay_only:  # judged by value: a scenario dumped and read again (workers) gives every field
            raise ValueError(f"{', '.join(replay_only)} applies to an agent replay, not to steps")
        seen: set[str] = set()
        for step in self.steps:
            if step.name in seen:
                raise ValueError(f"agent step names must be unique, {step.name!r} is given twice")
            unknown = [name for name in step.after if name not in seen]
            if unknown:
                raise ValueError(
                    f"agent step {step.name!r} comes after {unknown}, which are not steps written before it"
                )
            seen.add(step.name)
        return self

    def _replayable(self) -> Agent:
        if self.steps:
            raise ValueError("an agent has steps or a replay, not both")
        traces = self.recorded()
        for trace in traces.traces:
            if trace.requests > MAX_TASK_REQUESTS:
                raise ValueError(f"{traces.source}: trace {trace.trace_id} has {trace.requests} model calls; "
                                 f"a task makes at most {MAX_TASK_REQUESTS}")  # fmt: skip
        return self

    def recorded(self) -> AgentTraces:
        """The replay's traces (read once per process; a file that cannot be used is a ``TraceError``)."""
        assert self.replay is not None
        return read_agent_traces_cached(self.replay)

    def trace_of(self, index: int) -> AgentTrace:
        """The trace task ``index`` (the request that starts it) replays."""
        traces = self.recorded().traces
        return traces[index % len(traces)]

    def step_names(self) -> list[str]:
        """What the summary reports steps under: the steps', or the replay's agents (and unnamed calls' models)."""
        return self.recorded().step_names() if self.replay is not None else [step.name for step in self.steps]

    @property
    def think(self) -> Recorded | Distribution:
        """``think_time`` with its default: recorded for a replay, 0 for steps."""
        if self.think_time is not None:
            return self.think_time
        return "recorded" if self.replay is not None else Fixed(value=0.0)

    def nodes(self, tool_rounds: int) -> list[Node]:
        """The steps expanded by fan-out, in order, each with its parents and the turn numbers it may use."""
        nodes: list[Node] = []
        by_step: dict[str, list[int]] = {}
        turn = 1
        for step in self.steps:
            parents = tuple(k for name in step.after for k in by_step[name])
            rounds = tool_rounds if step.tools else 0
            for branch in range(step.fanout):
                by_step.setdefault(step.name, []).append(len(nodes))
                nodes.append(Node(len(nodes), step, branch, parents, turn, rounds))
                turn += 1 + rounds
        return nodes

    def requests(self, tool_rounds: int) -> int:
        """The most requests one task can make."""
        if self.replay is not None:
            return max(trace.requests for trace in self.recorded().traces)
        return sum(1 + n.rounds for n in self.nodes(tool_rounds))


class Node:
    """One request-making copy of a step: its place, its parents (node numbers), its first turn number.

    A replayed node also names its ``context`` (the nodes whose exchanges its prompt opens with;
    None: all its ancestors), and a recorded tool call ``sends`` nothing: it is time waited.
    """

    __slots__ = ("number", "step", "branch", "parents", "turn", "rounds", "context", "sends")

    def __init__(
        self, number: int, step: AgentStep, branch: int, parents: tuple[int, ...], turn: int, rounds: int,
        context: tuple[int, ...] | None = None, sends: bool = True,
    ) -> None:  # fmt: skip
        self.number, self.step, self.branch, self.parents, self.turn, self.rounds = (
            number,
            step,
            branch,
            parents,
            turn,
            rounds,
        )
        self.context, self.sends = context, sends

    def ancestors(self, nodes: list[Node]) -> list[int]:
        """Every node this one waits for, directly or not, in node order (whose exchanges its context holds)."""
        found: set[int] = set()
        todo = list(self.parents)
        while todo:
            k = todo.pop()
            if k not in found:
                found.add(k)
                todo.extend(nodes[k].parents)
        return sorted(found)


@functools.lru_cache(maxsize=256)
def recorded_nodes(trace: AgentTrace) -> list[Node]:
    """A recorded trace's calls as nodes: model calls numbered as turns, tool calls as waits (no turn)."""
    steps: dict[str, AgentStep] = {}
    nodes, turn = [], 1
    for number, call in enumerate(trace.calls):
        step = steps.setdefault(call.name, AgentStep(name=call.name))
        nodes.append(Node(number, step, 0, call.parents, turn if call.model else 0, 0, call.context, call.model))
        turn += call.model
    return nodes
