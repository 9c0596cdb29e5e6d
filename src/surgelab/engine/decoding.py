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
        self.context = 0
        """Sum over members of ``computed + 1 - synced``: step t reads ``context + members·t`` KV tokens."""
        self.due = [0] * block_size
        """Members by ``(synced - computed) mod block``: those due a new KV block at step t are ``due[t % block]``."""
        self.ends: list[list] = []
        """Heap of ``[step of the last token, place, step joined, sequence]``; stale entries skipped."""

    def join(self, seq: _Sequence, step: int) -> None:
        """``seq`` decodes from ``step`` on (it produced a token at the step before)."""
        seq.synced = step
        self.members += 1
        self.context += seq.computed + 1 - step
        self.due[(step - seq.computed) % self.block] += 1
        entry = [
            step + seq.request.output_tokens - seq.generated - 1,
            seq.place,
            step,
            seq,
        ]  # (last, place, joined) unique
        seq.entry = entry
        heapq.heappush(self.ends, entry)

    def leave(self, seq: _Sequence, step: int, kv: KVCache) -> None:
        """Write a member's progress as of ``step`` steps back into it, and drop it."""
        synced, computed = seq.synced, seq.computed
        self.members -= 1
        self.context -= computed + 1 - synced
        self.due[(synced - computed) % self.block] -= 1
        seq.computed = computed = computed + step - synced
        seq.generated += step - synced
        seq.last = step - 1
        seq.synced, seq.entry = -1, None
        alloc = seq.alloc
        blocks = -(-computed // self.block) - alloc.blocks  # a decoder holds its context
        assert 0 <= blocks <= self.growth.private, "decode-set KV accounting out of step"
        self.growth.private -= blocks
        alloc.private += blocks

    def kv_read(self, step: int) -> int:
        """KV tokens that step ``step`` reads for the members (each reads its context plus the new token)."""
        return self.context + self.members * step

    def crossings(self, step: int) -> int:
        """Members that need one more KV block at step ``step``.

        A member needs one when the context it starts the step with is a multiple of the
        block size: at the steps ``t`` with ``t ≡ synced - computed`` (mod the block size).
        """
        return self.due[step % self.block]

    def growth_over(self, step: int, steps: int) -> int:
        """KV blocks the members need over ``steps`` steps from ``step``."""
        block, due = self.block, self.due
        full, rest = divmod(steps, block)
        first = step % block
        total = full * self.members + sum(due[first : first + rest])
        if first + rest > block:
            total += sum(due[: first + rest - block])
        return total

    def next_end(self) -> int | None:
        """The step at which the first member produces its last token."""
        heap = self.ends
        while heap and heap[0][3].entry is not heap[0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_ends(self, step: int) -> list[_Sequence]:
        """Members whose last token comes at ``step``, in batch order; they stay members."""
        heap, out = self.ends, []
        while heap:
            top = heap[0]
            if top[3].entry is top:
                if top[0] != step:
                    break
                out.append(top[3])
            heapq.heappop(heap)
        return out

    def restore(self, seqs: list[_Sequence]) -> None:
        """Put back what ``pop_ends`` took (their run was cut short)."""
        for seq in seqs:
            heapq.heappush(self.ends, seq.entry)  # type: ignore[misc]
