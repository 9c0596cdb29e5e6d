"""Response cache: how much work the workload itself lets a fleet skip.

*Exact match*: a request whose whole prompt (system prompt, history, prompt and
``max_tokens``) equals one answered within ``ttl`` is answered from the cache after
``hit_latency``, in one chunk, without touching a replica. The hit rate is whatever the
workload's prompts repeat: datasets read sequentially, traces with texts, sessions.

*Prefix reuse* (``prefix: true``): every prompt's KV blocks are hashed (``sim.prefix``), so
every engine's prefix cache sees which prompts share a system prompt or a shared prefix.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from typing import Any

from surgelab.engine import EngineProfile, sequences_that_fit
from surgelab.sim.fleet import Cache
from surgelab.sim.request import SECOND
from surgelab.workload.request import RequestSpec

__all__ = ["ResponseCache", "prompt_key", "memory_traded", "MATERIAL_SHARE"]

GB = 1e9
MATERIAL_SHARE = 0.05
"""Memory that would have held at least this share of one replica's sequences (and one whole
sequence) is material: a cache below its hit-rate threshold holding that much is flagged."""


def prompt_key(spec: RequestSpec) -> int:
    h = hashlib.blake2b(digest_size=8)
    for part in (spec.system_prompt, *(x for turn in spec.history for x in turn), spec.prompt, str(spec.max_tokens)):
        h.update(part.encode())
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "little")


class ResponseCache:
    """Exact-match answers with their expiry, and how many tokens the live ones hold (at most)."""

    def __init__(self, cfg: Cache) -> None:
        self.cfg = cfg
        self.ttl_ns = round(cfg.ttl * SECOND)
        self.hit_ns = round(cfg.hit_latency * SECOND)
        self._expiry: dict[int, int] = {}
        self.hits = self.misses = 0
        self._held: dict[int, int] = {}  # tokens of each live answer (prompt and output)
        self._expiries: list[tuple[int, int]] = []  # (expiry, key), soonest first
        self.tokens = self.peak_tokens = self.peak_entries = 0

    def lookup(self, key: int, now: int) -> bool:
        expiry = self._expiry.get(key)
        if expiry is not None and expiry > now:
            self.hits += 1
            return True
        self.misses += 1
        return False

    def store(self, key: int, now: int, tokens: int = 0) -> None:
        self._expiry[key] = now + self.ttl_ns
        self._hold(key, now, tokens)
        if len(self._expiry) > 1_000_000:  # bound memory: forget what has expired
            self._expiry = {k: v for k, v in self._expiry.items() if v > now}

    def _hold(self, key: int, now: int, tokens: int) -> None:
        """Count the answer's tokens while it lives; an answer stored again replaces the old one."""
        heap, held = self._expiries, self._held
        while heap and heap[0][0] <= now:
            expiry, gone = heapq.heappop(heap)
            if self._expiry.get(gone) == expiry and gone in held:
                self.tokens -= held.pop(gone)
        self.tokens += tokens - held.get(key, 0)
        held[key] = tokens
        heapq.heappush(heap, (self._expiry[key], key))
        self.peak_tokens = max(self.peak_tokens, self.tokens)
        self.peak_entries = max(self.peak_entries, len(held))


def memory_traded(
    name: str, cache: ResponseCache, profile: EngineProfile | None, mean_context: float | None
) -> dict[str, Any]:
    """What the cache's memory would have bought as KV cache for more concurrent sequences.

    Occupied memory: the configured ``memory_gb``, else the most tokens its live answers held
    at once × the profile's KV bytes per token (the answers kept as KV, as a KV-level result
    cache keeps them). Sequences it would have held: ``sequences_that_fit`` — whole blocks of
    the workload's mean context (prompt and output of the requests answered) — the engine's
    own block arithmetic, as ``surgelab memory`` uses it.
    """
    cfg = cache.cfg
    lookups = cache.hits + cache.misses
    hit_rate = cache.hits / lookups if lookups else None
    kv_bytes = profile.kv_bytes_per_token if profile is not None else None
    occupied: float | None
    if cfg.memory_gb is not None:
        basis, occupied = "configured", cfg.memory_gb * GB
    else:
        basis, occupied = "held as KV", cache.peak_tokens * kv_bytes if kv_bytes else None
    row: dict[str, Any] = {
        "cache": name, "hit_rate": hit_rate, "hits": cache.hits, "lookups": lookups,
        "peak_entries": cache.peak_entries, "peak_tokens": cache.peak_tokens,
        "memory_gb": occupied / GB if occupied is not None else None, "memory_basis": basis,
        "kv_bytes_per_token": kv_bytes, "mean_context_tokens": mean_context,
        "bytes_per_sequence": None, "sequences_traded": None, "replica_sequences": None,
        "min_hit_rate": cfg.min_hit_rate, "wasteful": False, "warning": None,
    }  # fmt: skip
    if occupied is None or not kv_bytes or profile is None or not mean_context:
        return row
    context = math.ceil(mean_context)
    block = profile.block_size
    traded = sequences_that_fit(int(occupied // kv_bytes), block, context)
    replica = sequences_that_fit(profile.kv_capacity_tokens, block, context)
    row.update(
        bytes_per_sequence=-(-context // block) * block * kv_bytes, sequences_traded=traded, replica_sequences=replica
    )
    material = traded >= 1 and traded >= MATERIAL_SHARE * replica
    if hit_rate is not None and hit_rate < cfg.min_hit_rate and material:
        row["wasteful"] = True
        row["warning"] = (
            f"{name} cache: hit rate {hit_rate:.1%} < {cfg.min_hit_rate:.0%} while it occupies "
            f"{occupied / GB:.2f} GB, which would hold {traded:,} more concurrent sequences of "
            f"{context:,} tokens ({traded / replica:.0%} of one replica's {replica:,})"
        )
    return row
