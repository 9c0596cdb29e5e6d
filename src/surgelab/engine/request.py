"""What the engine is asked to do, and what one step of it did.

A request states its prompt length and the exact number of tokens it will generate: the
engine models cost, not language, so whoever builds the request (the server, the simulator,
a workload) decides the output length up front. Prefix caching needs to know which prompts
share a prefix; that is carried as ``block_hashes``, one chained hash per full block of
prompt tokens, which ``prefix_block_hashes`` computes from any token sequence.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["EngineRequest", "Run", "StepResult", "prefix_block_hashes"]


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """One generation request: prompt tokens in, exactly ``output_tokens`` tokens out."""

    request_id: str
    prompt_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] = ()
    """Chained hash of each full prompt block (``prefix_block_hashes``); empty: no reuse. Negative
    values, last and consecutive, are ids of blocks no other prompt holds (the KV cache keeps them as runs)."""

    def validate(self) -> list[str]:
        errors = []
        if self.prompt_tokens < 1:
            errors.append(f"prompt_tokens must be >= 1, got {self.prompt_tokens}")
        if self.output_tokens < 1:
            errors.append(f"output_tokens must be >= 1, got {self.output_tokens}")
        return errors


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one engine iteration did; ``duration`` is the time the caller should let pass."""

    duration: float
    emitted: Mapping[str, int] = field(default_factory=dict)
    """Tokens produced this step, by request id (at most one per request per step)."""
    finished: tuple[str, ...] = ()
    preempted: tuple[str, ...] = ()
    prefill_tokens: int = 0
    decode_seqs: int = 0
    kv_tokens_read: int = 0
    cached_tokens: Mapping[str, int] = field(default_factory=dict)
    """Prompt tokens served from the prefix cache, for requests admitted this step."""
    num_running: int = 0
    num_waiting: int = 0
    kv_usage: float = 0.0

    @property
    def idle(self) -> bool:
        """Nothing was scheduled: the caller should wait for a new request."""
        return self.prefill_tokens == 0 and self.decode_seqs == 0


@dataclass(slots=True)
class Run:
    """Steps decided at once by ``Engine.run`` (the first taken, the rest planned) or ``Engine.plan``.

    Read-only by convention (not frozen: a simulator makes hundreds of thousands of these).

    Planned steps are pure decode: every running request produces one token at each of them,
    and nothing changes the batch but the caller (a request added or aborted) or a request
    finishing. The caller lets the steps'
    time pass and says with ``Engine.advance`` how many planned steps were taken before it
    changed anything; the others never happen.

    A request's tokens come in *stretches*, one token per step: a stretch begins at the run's
    first step for every request in ``started``, and lasts until the step before a later run
    that lists the request in ``stopped`` (preempted, or not scheduled), until its last token
    (``finished``), or until the request is aborted.
    """

    start: int
    """Index of the run's first step (``Engine.steps`` when it was made)."""
    durations: list[float]
    """Seconds of each step: the taken ones first, then the planned ones."""
    started: Mapping[str, int] = field(default_factory=dict)
    """Requests whose tokens start (again) at the first step, with their place in the batch:
    requests produce their tokens of a step in increasing place."""
    stopped: tuple[str, ...] = ()
    """Requests that produced a token at the step before the run and not at its first step."""
    finished: Sequence[tuple[int, tuple[str, ...]]] = ()
    """Requests whose last token comes during the run: ``(step, ids)`` in step order, ``step``
    counted from the run's first (0), ids in batch order. Those of a taken step have
    finished; the others finish if ``advance`` takes their step."""
    taken: int = 1
    """Steps already taken: 1 from ``Engine.run``, 0 from ``Engine.plan``."""

    @property
    def planned(self) -> int:
        """Steps to be taken with ``Engine.advance``."""
        return len(self.durations) - self.taken


def prefix_block_hashes(tokens: Sequence[int | str], block_size: int) -> tuple[int, ...]:
    """Chained 63-bit hashes of each full block of ``tokens``, stable across processes.

    Block i's hash covers every token up to the end of block i, so two prompts share the
    first k hashes exactly when they share the first k blocks of tokens.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    hashes: list[int] = []
    digest = b""
    for start in range(0, len(tokens) - block_size + 1, block_size):
        h = hashlib.blake2b(digest, digest_size=8)
        h.update(_encode(tokens[start : start + block_size]))
        digest = h.digest()
        hashes.append(int.from_bytes(digest, "little") >> 1)
    return tuple(hashes)


def _encode(block: Iterable[int | str]) -> bytes:
    return "\x00".join(str(t) for t in block).encode()
