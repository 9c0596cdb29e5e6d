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

A negative block hash is an id, not a content hash: a block no other request's prompt holds
(the simulator names a prompt's blocks after its unique prefix so, ``sim/prefix.py``). They
come last in a request's hashes, one run of consecutive ids, and only their owner ever
matches them, so they are kept as *runs*: the leading part of its own blocks the owner still
finds is one count, published, released and evicted at once, where the blocks one at a time
cost a dictionary entry each. Per block or in runs, every answer is the same (with a CPU tier
they go one at a time).
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


@dataclass(slots=True, eq=False)
class _Run:
    """Positions ``start``–``end`` of one request's own blocks (its key: the first own id), resident."""

    owner: int
    start: int
    end: int
    held: bool = True

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(slots=True)
class Allocation:
    """The blocks one request holds: shared cached blocks by hash, its own published runs, plus a private count."""

    shared: list[int] = field(default_factory=list)
    private: int = 0
    runs: list[_Run] = field(default_factory=list)
    run_blocks: int = 0

    @property
    def blocks(self) -> int:
        return len(self.shared) + self.run_blocks + self.private


def _own_from(hashes: tuple[int, ...]) -> int:
    """Where a request's own blocks (negative ids, last) begin: ``len(hashes)`` when it has none."""
    if not hashes or hashes[-1] >= 0:
        return len(hashes)
    low, high = 0, len(hashes) - 1
    while low < high:  # the first negative
        mid = (low + high) // 2
        if hashes[mid] < 0:
            high = mid
        else:
            low = mid + 1
    return low


class KVCache:
    """Block accounting with optional prefix caching; all sizes in blocks of ``block_size``."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True, cpu_blocks: int = 0,
                 own_runs: bool = True) -> None:  # fmt: skip
        if num_blocks < 1 or block_size < 1:
            raise ValueError("a KV cache needs at least one block of at least one token")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self._private = 0
        self._refs: dict[int, int] = {}
        self._evictable: OrderedDict[int | _Run, None] = OrderedDict()
        self._idle = 0  # evictable blocks: hashed ones and those of released runs
        self.cpu_blocks = cpu_blocks if prefix_caching else 0
        self._cpu: OrderedDict[int, None] = OrderedDict()
        self._own_runs = own_runs and not self.cpu_blocks  # offloaded blocks go to host memory one at a time
        self._runs: dict[int, list[_Run]] = {}  # owner → its resident runs
        self._run_blocks = 0
        self.loaded = 0
        """Blocks loaded from the CPU tier since the engine last took the count (``take_loaded``)."""
        self.queried_blocks = 0
        """Full prompt blocks of every admitted request (a preempted one counts again when it comes back)."""
        self.found_blocks = 0
        """Those found resident or in the CPU tier instead of computed (vLLM's prefix cache hits, in blocks)."""

    @property
    def free_blocks(self) -> int:
        """Blocks available to allocate, counting evictable cached blocks as free."""
        return self.num_blocks - self._private - len(self._refs) - self._run_blocks + self._idle

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests (vLLM's ``kv_cache_usage_perc``)."""
        held = self._private + len(self._refs) + self._run_blocks - self._idle
        return held / self.num_blocks

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def match(self, hashes: tuple[int, ...]) -> int:
        """Number of leading prompt blocks already resident in the cache."""
        if not self.prefix_caching:
            return 0
        return self._match(hashes, self._own(hashes))

    def _own(self, hashes: tuple[int, ...]) -> int:
        """Where ``hashes``' own blocks begin, as runs (``len(hashes)``: none, or kept one at a time)."""
        return _own_from(hashes) if self._own_runs else len(hashes)

    def _match(self, hashes: tuple[int, ...], own: int) -> int:
        refs, hits = self._refs, 0
        for h in hashes[:own] if own < len(hashes) else hashes:
            if h not in refs:
                return hits
            hits += 1
        if own < len(hashes) and hashes[own] in self._runs:
            hits += sum(run.size for run in self._found(hashes[own]))
        return hits

    def admit(self, alloc: Allocation, hashes: tuple[int, ...], tokens: int) -> int:
        """Hold blocks for ``tokens`` tokens, reusing cached prefix blocks; return the hit count.

        Returns -1 (holding nothing) when the request does not fit.
        """
        need = -(-tokens // self.block_size)
        own = self._own(hashes) if hashes else 0
        hits = self._match(hashes, own) if hashes and self.prefix_caching else 0
        hits = need if hits > need else hits
        if hits:
            shared = hashes[:hits] if hits <= own else hashes[:own]
            refs, evictable, revived = self._refs, self._evictable, 0
            for h in shared:  # held again (``_ref``, inline: a few for every request)
                refs[h] += 1
                if evictable.pop(h, 0) is None:
                    revived += 1
            self._idle -= revived
            alloc.shared.extend(shared)
            if hits > own:
                self._revive(alloc, hashes[own], hits - own)
        if not self._allocate(alloc, need - hits):
            self.release(alloc)
            return -1
        loaded = self._load(alloc, hashes[hits:need]) if self._cpu and hashes else 0
        self.queried_blocks += len(hashes)
        self.found_blocks += hits + loaded
        return hits + loaded

    def admissible(self, hashes: tuple[int, ...], tokens: int) -> bool:
        """Whether ``admit`` would succeed now; changes nothing."""
        need = self.blocks_for(tokens)
        own = self._own(hashes) if self.prefix_caching else 0
        hits = min(self._match(hashes, own), need) if self.prefix_caching else 0
        revived = len({h for h in hashes[: min(hits, own)] if h in self._evictable})  # held again: no longer free
        if hits > own:
            left = hits - own
            for run in self._found(hashes[own]):
                take = min(run.size, left)
                revived += 0 if run.held else take
                left -= take
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
        unused = self.num_blocks - self._private - len(self._refs) - self._run_blocks
        if unused < blocks:
            return self._allocate(alloc, blocks)
        self._private += blocks
        alloc.private += blocks
        return True

    def promote(self, alloc: Allocation, hashes: tuple[int, ...]) -> None:
        """Publish a request's computed prompt blocks in the prefix cache."""
        if not self.prefix_caching or not hashes:
            return
        own = self._own(hashes)
        if len(alloc.shared) < own:  # else it holds every hashed block already (they were all hits)
            held = set(alloc.shared)
            for h in hashes[:own] if own < len(hashes) else hashes:
                if alloc.private == 0:
                    return
                if h in held or h in self._refs:
                    continue
                alloc.private -= 1
                self._private -= 1
                self._refs[h] = 1
                alloc.shared.append(h)
        if own < len(hashes):
            self._publish(alloc, hashes[own], len(hashes) - own)

    def release(self, alloc: Allocation) -> None:
        """Give back everything ``alloc`` holds; cached blocks stay resident, evictable."""
        self._private -= alloc.private
        refs, evictable = self._refs, self._evictable
        for h in alloc.shared:
            refs[h] -= 1
            if refs[h] == 0:
                evictable[h] = None
                self._idle += 1
        for run in alloc.runs:  # after its hashed blocks, in order, as they were published
            run.held = False
            evictable[run] = None
        self._idle += alloc.run_blocks
        alloc.shared.clear()
        alloc.runs.clear()
        alloc.private = alloc.run_blocks = 0

    def take_loaded(self) -> int:
        """Blocks loaded from the CPU tier since the last call."""
        loaded, self.loaded = self.loaded, 0
        return loaded

    def _found(self, owner: int) -> list[_Run]:
        """The owner's runs its match walks: from its first own block on, while they are resident, in order."""
        runs = self._runs.get(owner)
        if not runs:
            return []
        found: list[_Run] = []
        at = 0
        while True:
            run = next((r for r in runs if r.start == at), None)
            if run is None:
                return found
            found.append(run)
            at = run.end

    def _revive(self, alloc: Allocation, owner: int, blocks: int) -> None:
        """The owner's first ``blocks`` own blocks, resident, held by ``alloc`` again (a run cut where they end)."""
        for run in self._found(owner):
            if blocks <= 0:
                return
            if run.held:  # pragma: no cover - ids are a request's own, and a request is admitted once at a time
                raise AssertionError("a request's own blocks matched while another allocation holds them")
            if run.size > blocks:  # the rest stays where it is in the LRU
                mine = _Run(owner, run.start, run.start + blocks)
                run.start += blocks
                self._runs[owner].append(mine)
                self._idle -= blocks
                run = mine
            else:
                del self._evictable[run]
                self._idle -= run.size
                run.held = True
            alloc.runs.append(run)
            alloc.run_blocks += run.size
            blocks -= run.size

    def _publish(self, alloc: Allocation, owner: int, count: int) -> None:
        """Publish the owner's own blocks not resident yet (each gap one run), from ``alloc``'s private ones."""
        runs = self._runs.setdefault(owner, [])
        resident = sorted((r.start, r.end) for r in runs) if runs else []  # usually none
        at = 0
        for start, end in [*resident, (count, count)]:
            if start > at:
                size = min(start - at, alloc.private)
                if size > 0:
                    run = _Run(owner, at, at + size)
                    runs.append(run)
                    alloc.runs.append(run)
                    alloc.run_blocks += size
                    alloc.private -= size
                    self._private -= size
                    self._run_blocks += size
                if size < start - at:
                    break
            at = max(at, end)
        if not runs:
            del self._runs[owner]

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

    def _allocate(self, alloc: Allocation, blocks: int) -> bool:
        if blocks <= 0:
            return True
        unused = self.num_blocks - self._private - len(self._refs) - self._run_blocks
        if unused < blocks:
            if unused + self._idle < blocks:
                return False
            self._evict(blocks - unused)
        self._private += blocks
        alloc.private += blocks
        return True

    def _evict(self, blocks: int) -> None:
        """Free ``blocks`` evictable blocks, least recently used first (a run from its first block on)."""
        evictable = self._evictable
        while blocks > 0:
            victim = next(iter(evictable))
            if isinstance(victim, _Run):
                take = min(victim.size, blocks)
                victim.start += take
                self._run_blocks -= take
                self._idle -= take
                blocks -= take
                if victim.size == 0:
                    del evictable[victim]
                    runs = self._runs[victim.owner]
                    runs.remove(victim)
                    if not runs:
                        del self._runs[victim.owner]
                continue
            del evictable[victim]
            del self._refs[victim]
            self._idle -= 1
            blocks -= 1
            if self.cpu_blocks:  # offloaded, not lost
                self._cpu[victim] = None
                self._cpu.move_to_end(victim)
                if len(self._cpu) > self.cpu_blocks:
                    self._cpu.popitem(last=False)
