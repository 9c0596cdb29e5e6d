"""The KV cache as vLLM pages it: fixed-size blocks, some shared through a prefix cache.

Only counts matter to the model, so a block is either *private* to one request (counted)
or *cached* under the hash of the prompt prefix it holds (named). Cached blocks carry a
reference count; at zero they stay resident but evictable, least recently used first, so
a later request with the same system prompt can still reuse them.

With a CPU tier (vLLM's KV offload to host memory), an evicted cached block is kept in host
memory, least recently used out first; a request whose prefix continues there past the
GPU's hits has those blocks loaded over the host link instead of recomputed: they count as
cached, need GPU blocks like any other, and ``loaded`` counts them for the engine to charge
the transfer to the step that admits the request.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["Allocation", "KVCache", "sequences_that_fit"]


def sequences_that_fit(kv_tokens: int, block_size: int, context_tokens: int) -> int:
    """Sequences of ``context_tokens`` each that ``kv_tokens`` of KV cache hold, in whole blocks.

    ``⌊kv_tokens ÷ block⌋ ÷ ⌈context ÷ block⌉``: a sequence holds every block its context
    touches, a partial block included.
    """
    if context_tokens < 1:
        raise ValueError(f"context must be at least 1 token, got {context_tokens}")
    return (kv_tokens // block_size) // -(-context_tokens // block_size)


@dataclass(slots=True)
class Allocation:
    """The blocks one request holds: shared cached blocks by hash, plus a private count."""

    shared: list[int] = field(default_factory=list)
    private: int = 0

    @property
    def blocks(self) -> int:
        return len(self.shared) + self.private


class KVCache:
    """Block accounting with optional prefix caching; all sizes in blocks of ``block_size``."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True, cpu_blocks: int = 0) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("a KV cache needs at least one block of at least one token")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self._private = 0
        self._refs: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()
        self.cpu_blocks = cpu_blocks if prefix_caching else 0
        self._cpu: OrderedDict[int, None] = OrderedDict()
        self.loaded = 0
        """Blocks loaded from the CPU tier since the engine last took the count (``take_loaded``)."""

    @property
    def free_blocks(self) -> int:
        """Blocks available to allocate, counting evictable cached blocks as free."""
        return self.num_blocks - self._private - len(self._refs) + len(self._evictable)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests (vLLM's ``kv_cache_usage_perc``)."""
        held = self._private + len(self._refs) - len(self._evictable)
        return held / self.num_blocks

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def match(self, hashes: tuple[int, ...]) -> int:
        """Number of leading prompt blocks already resident in the cache."""
        if not self.prefix_caching:
            return 0
        hits = 0
        for h in hashes:
            if h not in self._refs:
                break
            hits += 1
        return hits

    def admit(self, alloc: Allocation, hashes: tuple[int, ...], tokens: int) -> int:
        """Hold blocks for ``tokens`` tokens, reusing cached prefix blocks; return the hit count.

        Returns -1 (holding nothing) when the request does not fit.
        """
        need = -(-tokens // self.block_size)
        hits = min(self.match(hashes), need) if hashes else 0
        if hits:
            for h in hashes[:hits]:
                self._ref(h)
            alloc.shared.extend(hashes[:hits])
        if not self._allocate(alloc, need - hits):
            self.release(alloc)
            return -1
        loaded = self._load(alloc, hashes[hits:need]) if self._cpu and hashes else 0
        return hits + loaded

    def admissible(self, hashes: tuple[int, ...], tokens: int) -> bool:
        """Whether ``admit`` would succeed now; changes nothing."""
        need = self.blocks_for(tokens)
        hits = min(self.match(hashes), need)
        revived = len({h for h in hashes[:hits] if h in self._evictable})  # held again: no longer free
        return self.free_blocks - revived >= need - hits

    def grow(self, alloc: Allocation, tokens: int) -> bool:
        """Make sure ``alloc`` covers ``tokens`` tokens; False when the cache is full."""
        return self._allocate(alloc, self.blocks_for(tokens) - alloc.blocks)

    def allocate(self, alloc: Allocation, blocks: int) -> bool:
        """Add ``blocks`` private blocks to ``alloc``; False (nothing added) when they do not fit.

        Evicts unreferenced cached blocks, least recently used first, as ``grow`` does: any
        number of one-block allocations evicts exactly what one allocation of their sum does.
        """
        if blocks <= 0:
            return True
        unused = self.num_blocks - self._private - len(self._refs)
        if unused < blocks:
            return self._allocate(alloc, blocks)
        self._private += blocks
        alloc.private += blocks
        return True

    def promote(self, alloc: Allocation, hashes: tuple[int, ...]) -> None:
        """Publish a request's computed prompt blocks in the prefix cache."""
        if not self.prefix_caching or not hashes:
            return
        held = set(alloc.shared)
        for h in hashes:
            if alloc.private == 0:
                break
            if h in held or h in self._refs:
                continue
            alloc.private -= 1
            self._private -= 1
            self._refs[h] = 1
            alloc.shared.append(h)

    def release(self, alloc: Allocation) -> None:
        """Give back everything ``alloc`` holds; cached blocks stay resident, evictable."""
        self._private -= alloc.private
        for h in alloc.shared:
            self._refs[h] -= 1
            if self._refs[h] == 0:
                self._evictable[h] = None
        alloc.shared.clear()
        alloc.private = 0

    def take_loaded(self) -> int:
        """Blocks loaded from the CPU tier since the last call."""
        loaded, self.loaded = self.loaded, 0
        return loaded

    def _load(self, alloc: Allocation, hashes: tuple[int, ...]) -> int:
        """Turn ``alloc``'s fresh blocks into the leading ``hashes`` found in the CPU tier (loaded, not computed)."""
        cpu, loaded = self._cpu, 0
        for h in hashes:
            if h not in cpu or h in self._refs or alloc.private == 0:
                break
            cpu.move_to_end(h)
            alloc.private -= 1
            self._private -= 1
            self._refs[h] = 1
            alloc.shared.append(h)
            loaded += 1
        self.loaded += loaded
        return loaded

    def _ref(self, h: int) -> None:
        self._refs[h] += 1
        self._evictable.pop(h, None)

    def _allocate(self, alloc: Allocation, blocks: int) -> bool:
        if blocks <= 0:
            return True
        unused = self.num_blocks - self._private - len(self._refs)
        if unused < blocks:
            if unused + len(self._evictable) < blocks:
                return False
            for _ in range(blocks - unused):
                victim, _ = self._evictable.popitem(last=False)
                del self._refs[victim]
                if self.cpu_blocks:  # offloaded, not lost
                    self._cpu[victim] = None
                    self._cpu.move_to_end(victim)
                    if len(self._cpu) > self.cpu_blocks:
                        self._cpu.popitem(last=False)
        self._private += blocks
        alloc.private += blocks
        return True
