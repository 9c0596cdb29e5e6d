"""Request specs by index: deterministic for a seed, whichever worker or order asks.

Lengths are sampled in blocks keyed by (seed, block number), so ``spec(i)`` is the same in
a single process and in any split across workers. Prompt text is a slice of one long
pre-generated word pool (each pool word is exactly one token and five characters with its
space), which makes building a prompt a string slice rather than thousands of joins.
"""

from __future__ import annotations

import numpy as np

from surgelab.scenario.model import Workload
from surgelab.workload.request import RequestSpec
from surgelab.workload.tokenizer import VOCABULARY, BuiltinTokenizer

__all__ = ["PromptFactory"]

_BLOCK = 4096
_POOL_WORDS = 1 << 17
_PREFIX_WIDTH = 3


class PromptFactory:
    def __init__(self, workload: Workload, seed: int, tokenizer: BuiltinTokenizer | None = None) -> None:
        self.workload = workload
        self.seed = seed
        self.tokenizer = tokenizer or BuiltinTokenizer()
        pool_rng = np.random.default_rng([seed, 0])
        ids = pool_rng.integers(0, len(VOCABULARY), size=_POOL_WORDS)
        self._pool = " ".join(VOCABULARY[i] for i in ids.tolist()) + " "
        self.system_prompt = (
            self.tokenizer.synthesize(workload.system_prompt_tokens, np.random.default_rng([seed, 2]))
            if workload.system_prompt_tokens
            else ""
        )
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _lengths(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        cached = self._blocks.get(block)
        if cached is None:
            rng = np.random.default_rng([self.seed, 1, block])
            prompt = np.maximum(np.rint(self.workload.prompt_tokens.sample(rng, _BLOCK)), 1).astype(np.int64)
            output = np.maximum(np.rint(self.workload.output_tokens.sample(rng, _BLOCK)), 1).astype(np.int64)
            if len(self._blocks) > 64:
                self._blocks.clear()
            cached = self._blocks[block] = (prompt, output)
        return cached

    def spec(self, index: int) -> RequestSpec:
        block, offset = divmod(index, _BLOCK)
        prompts, outputs = self._lengths(block)
        n, max_tokens = int(prompts[offset]), int(outputs[offset])
        return RequestSpec(
            prompt=self.text(index, n),
            prompt_tokens=n + (self.tokenizer.count(self.system_prompt) if self.system_prompt else 0),
            max_tokens=max_tokens,
            system_prompt=self.system_prompt,
        )

    def text(self, index: int, n_tokens: int) -> str:
        """Prompt of exactly ``n_tokens`` tokens for request ``index``."""
        head: list[str] = []
        if self.workload.unique_prefix:
            head = [VOCABULARY[d] for d in self.tokenizer.unique_prefix(index + 1, _PREFIX_WIDTH)][:n_tokens]
        rest = n_tokens - len(head)
        body = ""
        if rest > 0:
            pool = self._pool
            while rest * 5 > len(pool):
                pool = pool + pool
            start = ((index * 7919) % _POOL_WORDS) * 5
            if start + rest * 5 > len(pool):
                start = 0
            body = pool[start : start + rest * 5 - 1]
        return " ".join([*head, body]) if body else " ".join(head)
