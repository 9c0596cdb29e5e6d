"""Requests shaped by a trace: each replayed arrival takes its row's lengths, blocks or text.

The scenario's workload still decides everything a trace does not record: the class (and so
the tier, endpoint, sampling and system prompt), and the output length where the trace has
none. Mooncake ``hash_ids`` become prompts that share exactly the recorded prefix blocks.
"""

from __future__ import annotations

from dataclasses import replace

from surgelab.scenario.model import Workload
from surgelab.tokenizer import Tokenizer
from surgelab.traces import ReplayPlan
from surgelab.workload.blocks import BlockPromptBuilder
from surgelab.workload.prompts import Conversation, WorkloadSampler
from surgelab.workload.request import RequestSpec

__all__ = ["TraceSampler"]


class TraceSampler:
    def __init__(
        self, plan: ReplayPlan, workload: Workload, seed: int, stream: int = 0, block_size: int = 512,
        tokenizer: Tokenizer | None = None, salt: int = 0,
    ) -> None:  # fmt: skip
        self.trace, self.rows = plan.trace, plan.rows
        self.base = WorkloadSampler(workload, seed, stream, tokenizer, salt)
        self.tokenizer = self.base.tokenizer
        self.blocks = BlockPromptBuilder(seed, block_size) if self.trace.prefix_blocks is not None else None

    def spec(self, index: int, text: bool = True, media: bool = True) -> RequestSpec:
        """Request ``index``: the trace row's lengths (and text); ``text`` and ``media`` as ``PromptFactory.spec``'s."""
        row = int(self.rows[index])
        factory = self.base.factory(index)
        base = factory.spec(index, text=False, media=media)  # its prompt is replaced below
        trace = self.trace
        output = int(trace.output_tokens[row])
        if trace.texts is not None:
            prompt = trace.texts[row]
            n = self.tokenizer.count(prompt)
        else:
            n = int(trace.prompt_tokens[row])
            if self.blocks is not None and trace.prefix_blocks is not None:  # one is made for the other
                prompt = self.blocks.text(trace.prefix_blocks[row], n)
            else:
                prompt = factory.text(index, n)
        system = self.tokenizer.count(base.system_prompt) if base.system_prompt else 0
        return replace(
            base,
            prompt=prompt,
            prompt_tokens=n + system,
            max_tokens=output if output >= 1 else base.max_tokens,
            keep_text=False,
        )

    def factory(self, index: int):
        """The class request ``index`` belongs to (its tools, its agent), as the scenario's workload draws it."""
        return self.base.factory(index)

    def synthetic(self, index: int) -> None:
        return None  # a row's prompt is its own: hashed from its text

    def conversation(self, index: int) -> Conversation | None:
        return None  # a trace row is one request; recorded conversations are already flattened

    def next_turn(self, *args: object) -> RequestSpec:  # pragma: no cover - never called without a conversation
        raise NotImplementedError
