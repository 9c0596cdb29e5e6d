"""Tool calls and agentic tasks as scenario data: the tools a request offers, and a task's DAG of steps."""

from __future__ import annotations

from pydantic import Field, model_validator

from surgelab.scenario.base import PositiveSeconds, ScenarioModel
from surgelab.scenario.distributions import Distribution, TokenCount

__all__ = ["Tools", "AgentStep", "Agent", "Node", "MAX_TASK_REQUESTS"]

MAX_TASK_REQUESTS = 255
"""Requests of one task (or session) at most: their turn numbers live in 8 bits of the request id."""


class Tools(ScenarioModel):
    """Synthetic tools offered with each request: a reply's tool calls are answered, after the tool's
    latency, by the next request of the session or step (docs/agents.md)."""

    names: list[str] = Field(
        ["search"], min_length=1, description="Function names offered; each takes one string argument, query."
    )
    result_tokens: TokenCount = Field(200, description="Length of each tool's result, sent back in the next request.")
    latency: Distribution = Field(
        0.5, description="Seconds a real tool would take: the agent waits this long before it sends the result."
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
    prompt_tokens: TokenCount = Field(64, description="The step's own instruction, sent after the shared context.")
    output_tokens: TokenCount = Field(128, description="max_tokens of the step's request.")
    tools: bool = Field(False, description="Offer the class's tools in this step (its tool rounds belong to the step).")


class Agent(ScenarioModel):
    """A task as a DAG of steps (plan, parallel subagents, tool calls, merge), each step's prompt the
    shared context so far: the task's opening prompt and every ancestor's exchange."""

    steps: list[AgentStep] = Field(
        min_length=1, description="The steps, each after the steps it names (written before it)."
    )
    think_time: Distribution = Field(0.0, description="Pause between a step's last parent ending and the step's start.")
    task_slo: PositiveSeconds | None = Field(
        None, description="Time to finish a whole task, first step sent to last step's end."
    )

    @model_validator(mode="after")
    def _dag(self) -> Agent:
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
        return sum(1 + n.rounds for n in self.nodes(tool_rounds))


class Node:
    """One request-making copy of a step: its place, its parents (node numbers), its first turn number."""

    __slots__ = ("number", "step", "branch", "parents", "turn", "rounds")

    def __init__(
        self, number: int, step: AgentStep, branch: int, parents: tuple[int, ...], turn: int, rounds: int
    ) -> None:
        self.number, self.step, self.branch, self.parents, self.turn, self.rounds = (
            number,
            step,
            branch,
            parents,
            turn,
            rounds,
        )

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
