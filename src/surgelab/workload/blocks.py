"""Prompts that reproduce Mooncake-style shared prefixes, block by block.

A Mooncake trace gives each request a list of ``hash_ids``, one per ``block_size`` prompt
tokens; equal ids at the same position mean the same prefix block. :class:`BlockPromptBuilder`
maps every block id to a fixed text of exactly ``block_size`` tokens of the built-in
tokenizer and concatenates them in order, so two requests whose first ``k`` ids agree share
exactly their first ``k * block_size`` tokens — which is what a prefix cache keys on.

The built-in tokenizer counts a word and its leading space as one token and synthesises
words separated by single spaces, so joining blocks with one space adds their counts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from surgelab.tokenizer import BuiltinTokenizer

__all__ = ["BlockPromptBuilder"]

_ID_SPACE = 1 << 64  # ids are seeded as unsigned 64-bit integers, so signed hashes work too


class BlockPromptBuilder:
    """Deterministic prompt text for Mooncake ``hash_ids``; one builder per seed.

    ``cache_blocks`` bounds the least-recently-used cache of block texts (a 512-token block
    is about 2.5 kB of text).
    """

    def __init__(self, seed: int, block_size: int = 512, cache_blocks: int = 4096) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
        if cache_blocks < 1:
            raise ValueError(f"cache_blocks must be >= 1, got {cache_blocks!r}")
        self.seed = seed
        self.block_size = block_size
        self.cache_blocks = cache_blocks
        self.tokenizer = BuiltinTokenizer()
        self._cache: OrderedDict[int, str] = OrderedDict()

    def block(self, block_id: int) -> str:
        """The text of one block: exactly ``block_size`` tokens, the same for every call."""
        key = int(block_id) % _ID_SPACE
        text = self._cache.get(key)
        if text is None:
            rng = np.random.default_rng([self.seed, 7, key])
            text = self.tokenizer.synthesize(self.block_size, rng)
            self._cache[key] = text
            if len(self._cache) > self.cache_blocks:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return text

    def text(self, hash_ids: Sequence[int], input_length: int, salt: int | None = None) -> str:
        """A prompt of exactly ``input_length`` tokens made of the blocks of ``hash_ids``, in order.

        When ``input_length`` is shorter than ``len(hash_ids) * block_size`` the text stops
        inside (or before) the last block it reaches; when longer, it continues with padding
        tokens drawn from ``salt`` (default: derived from the ids and length), which are
        shared by no block. Pass a request's row number as ``salt`` to make padding unique
        per request.
        """
        if isinstance(input_length, bool) or not isinstance(input_length, (int, np.integer)) or input_length < 0:
            raise ValueError(f"input_length must be an integer >= 0, got {input_length!r}")
        input_length = int(input_length)
        size = self.block_size
        parts: list[str] = []
        full, rest = divmod(input_length, size)
        for block_id in hash_ids[:full]:
            parts.append(self.block(block_id))
        used = min(full, len(hash_ids)) * size
        if rest and full < len(hash_ids):
            parts.append(" ".join(self.block(hash_ids[full]).split(" ")[:rest]))
            used += rest
        if used < input_length:
            if salt is None:
                entropy = [self.seed, 8, input_length, *(int(b) % _ID_SPACE for b in hash_ids)]
            else:
                entropy = [self.seed, 9, int(salt) % _ID_SPACE]
            parts.append(self.tokenizer.synthesize(input_length - used, np.random.default_rng(entropy)))
        return " ".join(parts)
