"""Running sequences that produce one token per step, kept in aggregate between steps.

While every running sequence decodes, a step's work is known without visiting any of them:
it decodes ``members`` sequences and reads ``kv_read(step)`` tokens of KV cache (each
sequence's context grows by one per step), a sequence needs a new KV block exactly at the
steps where its context is a multiple of the block size (``crossings``), and the next
sequence to finish is the top of a heap. A member's ``computed`` and ``generated`` are
those of the step it joined at (``synced``); it is one token further on for every step
since, and ``leave`` writes that back, with the KV blocks grown for it meanwhile.
"""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING

from surgelab.engine.kv import Allocation, KVCache

if TYPE_CHECKING:
    from surgelab.engine.core import _Sequence

__all__ = ["DecodeSet"]


class DecodeSet:
    """Aggregates over the decoding sequences; steps are counted as the engine counts them."""

    def __init__(self, block_size: int) -> None:
        self.block = block_size
        self.members = 0
        self.growth = Allocation()
        """KV blocks grown for members since they joined, handed to each as it leaves."""
        self._context = 0  # sum of (computed + 1 - synced): step t reads _context + members·t tokens
        self._phase = [0] * block_size  # members by (computed - synced) mod block: see crossings()
        self._ends: list[list] = []  # heap of [step of the last token, place, serial, sequence]
        self._serial = itertools.count()

    def join(self, seq: _Sequence, step: int) -> None:
        """``seq`` decodes from ``step`` on (it produced a token at the step before)."""
        seq.synced = step
        self.members += 1
        self._context += seq.computed + 1 - step
        self._phase[(seq.computed - step) % self.block] += 1
        entry = [step + seq.request.output_tokens - seq.generated - 1, seq.place, next(self._serial), seq]
        seq.entry = entry
        heapq.heappush(self._ends, entry)

    def leave(self, seq: _Sequence, step: int, kv: KVCache) -> None:
        """Write a member's progress as of ``step`` steps back into it, and drop it."""
        moved = step - seq.synced
        self.members -= 1
        self._context -= seq.computed + 1 - seq.synced
        self._phase[(seq.computed - seq.synced) % self.block] -= 1
        seq.computed += moved
        seq.generated += moved
        seq.last = step - 1
        seq.synced, seq.entry = -1, None
        blocks = kv.blocks_for(seq.computed) - seq.alloc.blocks  # a decoder holds exactly its context
        assert 0 <= blocks <= self.growth.private, "decode-set KV accounting out of step"
        self.growth.private -= blocks
        seq.alloc.private += blocks

    def kv_read(self, step: int) -> int:
        """KV tokens that step ``step`` reads for the members (each reads its context plus the new token)."""
        return self._context + self.members * step

    def crossings(self, step: int) -> int:
        """Members that need one more KV block at step ``step``."""
        return self._phase[-step % self.block]

    def growth_over(self, step: int, steps: int) -> int:
        """KV blocks the members need over ``steps`` steps from ``step``."""
        full, rest = divmod(steps, self.block)
        return full * self.members + sum(self._phase[-(step + j) % self.block] for j in range(rest))

    def next_end(self) -> int | None:
        """The step at which the first member produces its last token."""
        heap = self._ends
        while heap and heap[0][3].entry is not heap[0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_ends(self, step: int) -> list[_Sequence]:
        """Members whose last token comes at ``step``, in batch order; they stay members."""
        out = []
        while self.next_end() == step:
            out.append(heapq.heappop(self._ends)[3])
        return out

    def restore(self, seqs: list[_Sequence]) -> None:
        """Put back what ``pop_ends`` took (their run was cut short)."""
        for seq in seqs:
            heapq.heappush(self._ends, seq.entry)
