"""Prefix block hashes of each prompt: what lets the engines' prefix caches see shared prompts.

*The definition* (``reference_hashes``): the system prompt, every turn of the history and the
prompt, each split into the built-in tokenizer's pieces, then one chained hash per full KV
block (``prefix_block_hashes``), as ``surgelab serve`` hashes what it receives.

*What the simulator uses* (``PrefixHasher``): the same hashes, value for value, for every
block that another prompt could share, computed without tokenising anything twice: the chain
after a system prompt, a shared prefix or a session's history is kept and carried on. A
synthetic prompt (``Synthetic``: the pool's words behind the request's unique prefix) is not
even built: its words are known. An engine compares hashes only for equality, so a block
nothing else can share needs no content hash, only an id no other block has: a block whose
tokens include the request's whole unique prefix and at least ``_UNIQUE_AFTER`` words after
it. No other request of its class has that prefix (its number is its own); another class's
or phase's stream would have to repeat those random words, less likely (4096^-8 = 2^-96)
than two 63-bit hashes colliding, which the definition itself risks. Blocks that end inside
or just after the unique prefix are hashed: its first digits recur (request i and i + 4096
have the same first digit), and so do the blocks that end within them. Own ids are negative
and consecutive, after the hashed blocks: the engines' KV caches keep them as one run a request
(``engine/kv.py``), not one entry a block.
"""

from __future__ import annotations

import hashlib
import itertools

from surgelab.engine import prefix_block_hashes
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.prompts import PREFIX_WIDTH, Synthetic
from surgelab.workload.request import RequestSpec

__all__ = ["PrefixHasher", "reference_hashes"]

_TOKENIZER = BuiltinTokenizer()
_UNIQUE_AFTER = 8  # pool words after a whole unique prefix that make a block the request's own
_MEMO = 4096  # chain states kept (a text after a state); all forgotten at once past it
_INDEX_BITS, _BLOCK_BITS = 40, 21  # an own block's id: source, request index, block (MAX_TOKENS < 2^21)


def reference_hashes(spec: RequestSpec, block_size: int) -> tuple[int, ...]:
    """The block hashes of ``spec``'s prompt by their definition: tokenise everything, hash every block."""
    parts = [p for p in (spec.system_prompt, *(x for turn in spec.history for x in turn), spec.prompt) if p]
    pieces = [piece for part in parts for piece in _TOKENIZER.pieces(part)]
    return prefix_block_hashes(pieces, block_size)


class _State:
    """The chain after some tokens: its hashes, the last digest and the tokens past the last full block."""

    __slots__ = ("serial", "tokens", "digest", "hashes", "tail")

    def __init__(self, serial: int, tokens: int, digest: bytes, hashes: tuple[int, ...], tail: list[str]) -> None:
        self.serial, self.tokens, self.digest, self.hashes, self.tail = serial, tokens, digest, hashes, tail


class PrefixHasher:
    """``reference_hashes``' equalities for every request, at a fraction of its cost (module docstring);
    ``reference=True``: ``reference_hashes`` itself (what the fast way is checked against)."""

    def __init__(self, block_size: int, reference: bool = False) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.block_size, self.reference = block_size, reference
        self._serials = itertools.count(1)
        self._root = _State(0, 0, b"", (), [])
        self._after: dict[tuple[int, str], _State] = {}  # (state, text) → the chain carried on over the text
        self._sources: dict[object, int] = {}  # a Synthetic's source → its number in own blocks' ids

    def hashes(self, spec: RequestSpec, made: Synthetic | None = None) -> tuple[int, ...]:
        """The block hashes of ``spec``'s prompt; ``made``: how it was made (then its text is not read)."""
        if self.reference:
            return reference_hashes(spec, self.block_size)
        state = self._part(self._root, spec.system_prompt)
        if made is not None:
            return self._synthetic(state, made)
        for turn in spec.history:
            for text in turn:
                state = self._part(state, text)
        return self._part(state, spec.prompt).hashes

    def _part(self, state: _State, text: str) -> _State:
        """The chain carried on over ``text``'s pieces (remembered: the same texts recur)."""
        if not text:
            return state
        key = (state.serial, text)
        after = self._after.get(key)
        if after is None:
            if len(self._after) >= _MEMO:
                self._after.clear()
            after = self._after[key] = self._extend(state, _TOKENIZER.pieces(text))
        return after

    def _extend(self, state: _State, pieces: list[str]) -> _State:
        """``prefix_block_hashes`` carried on from ``state``: the same digests, block for block."""
        size = self.block_size
        tokens = [*state.tail, *pieces] if state.tail else pieces
        full = len(tokens) - len(tokens) % size
        digest, blake, hashes = state.digest, hashlib.blake2b, []
        for start in range(0, full, size):
            digest = blake(digest + "\x00".join(tokens[start : start + size]).encode(), digest_size=8).digest()
            hashes.append(int.from_bytes(digest, "little") >> 1)
        return _State(
            next(self._serials), state.tokens + len(pieces), digest, state.hashes + tuple(hashes), tokens[full:]
        )

    def _synthetic(self, state: _State, made: Synthetic) -> tuple[int, ...]:
        state = self._part(state, made.lead)
        size, at = self.block_size, state.tokens
        blocks = (at + made.tokens) // size
        own = blocks  # the first block that is the request's own: none unless its unique prefix is whole
        if made.tokens >= PREFIX_WIDTH:  # the prompt opens with its whole unique prefix
            own = min(blocks, max(len(state.hashes), -(-(at + PREFIX_WIDTH + _UNIQUE_AFTER) // size) - 1))
        hashes = state.hashes
        if own > len(hashes):  # blocks up to the first own one: hashed from their words
            words = made.words(own * size - at)
            pieces = [" " + w for w in words] if made.spaced else [words[0], *(" " + w for w in words[1:])]
            hashes = self._extend(state, pieces).hashes
        if blocks > own:
            source = self._sources.setdefault(made.source, len(self._sources))
            base = -1 - (((source << _INDEX_BITS) | made.index) << _BLOCK_BITS)  # below every content hash (≥ 0)
            hashes += tuple(range(base - own, base - blocks, -1))
        return hashes
