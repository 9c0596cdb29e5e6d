"""Response cache and prefix hashing: how much work the workload itself lets a fleet skip.

*Exact match*: a request whose whole prompt (system prompt, history, prompt and
``max_tokens``) equals one answered within ``ttl`` is answered from the cache after
``hit_latency``, in one chunk, without touching a replica. The hit rate is whatever the
workload's prompts repeat: datasets read sequentially, traces with texts, sessions.

*Prefix reuse*: with ``prefix: true`` each prompt is split into the built-in tokenizer's
pieces and hashed per KV block (as ``surgelab serve`` does), so every engine's prefix cache
sees which prompts share a system prompt or a shared prefix.
"""

from __future__ import annotations

import hashlib

from surgelab.engine import prefix_block_hashes
from surgelab.sim.fleet import Cache
from surgelab.sim.request import SECOND
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.request import RequestSpec

__all__ = ["ResponseCache", "prompt_key", "block_hashes"]

_TOKENIZER = BuiltinTokenizer()


def prompt_key(spec: RequestSpec) -> int:
    h = hashlib.blake2b(digest_size=8)
    for part in (spec.system_prompt, *(x for turn in spec.history for x in turn), spec.prompt, str(spec.max_tokens)):
        h.update(part.encode())
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "little")


def block_hashes(spec: RequestSpec, block_size: int) -> tuple[int, ...]:
    parts = [p for p in (spec.system_prompt, *(x for turn in spec.history for x in turn), spec.prompt) if p]
    pieces = [piece for part in parts for piece in _TOKENIZER.pieces(part)]
    return prefix_block_hashes(pieces, block_size)


class ResponseCache:
    def __init__(self, cfg: Cache) -> None:
        self.cfg = cfg
        self.ttl_ns = round(cfg.ttl * SECOND)
        self.hit_ns = round(cfg.hit_latency * SECOND)
        self._expiry: dict[int, int] = {}
        self.hits = self.misses = 0

    def lookup(self, key: int, now: int) -> bool:
        expiry = self._expiry.get(key)
        if expiry is not None and expiry > now:
            self.hits += 1
            return True
        self.misses += 1
        return False

    def store(self, key: int, now: int) -> None:
        self._expiry[key] = now + self.ttl_ns
        if len(self._expiry) > 1_000_000:  # bound memory: forget what has expired
            self._expiry = {k: v for k, v in self._expiry.items() if v > now}
