"""What one engine settles at under a steady open loop, worked out without simulating (mean-value analysis).

Requests of fixed lengths (``prompt`` tokens, ``cached`` of them prefix-cache hits, ``output``
tokens generated) arrive at ``rate`` per second. In steady state the engine runs ``N``
sequences; each step decodes all of them, and each arrival's prompt rides in (a chunk of)
the step after it arrives. Per second the engine spends

    S_d · t_decode(N) + rate · Σ t_chunk = 1     (busy whenever anything runs)

so a decoding sequence sees a token every ``τ = t_decode ÷ (1 − rate · Σ(t_chunk − t_decode))``
seconds, and Little's law closes the loop: ``N = rate · (output − 1) · τ`` (plus the prefills
under way). The first token waits for the front end, the rest of the step in progress (a
step's length squared over twice the mean, as an arrival lands in a long step more often),
then its prefill chunks. Step times are the profile's own (``EngineProfile.price``).

This is the simulator's physics averaged, not a replacement for it: it ignores the spread of
``N`` (queueing tails, P99) and preemption. It is exact enough for means at loads the engine
holds, and a thousand times faster than a simulation: fitting coefficients and pruning plans
use it; every figure a user is shown comes from the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from surgelab.engine.profile import EngineProfile

__all__ = ["SteadyState", "steady_state"]


@dataclass(frozen=True)
class SteadyState:
    """Means of one engine under a steady open loop (seconds; ``running`` in sequences)."""

    itl: float
    ttft: float
    e2e: float
    running: float
    busy: float
    """Share of time in prefill beyond decode: the engine overloads as this nears 1."""
    overloaded: bool
    """True when the load cannot be held (prefills alone fill the time, or more than max_num_seqs would run)."""


def _chunks(profile: EngineProfile, new_tokens: int, running: float) -> list[int]:
    """How the engine splits ``new_tokens`` of prompt beside ``running`` decodes under its token budget."""
    room = max(profile.max_batched_tokens - int(math.ceil(running)), 1)
    chunks = []
    left = new_tokens
    while left > 0:
        chunks.append(min(left, room))
        left -= chunks[-1]
        room = profile.max_batched_tokens
    return chunks or [1]


def steady_state(
    profile: EngineProfile, rate: float, prompt: int, output: int, cached: int = 0, *, iterations: int = 60
) -> SteadyState:
    """Mean ITL, TTFT and E2E of ``rate`` requests/s of fixed lengths on one engine."""
    if rate <= 0 or prompt < 1 or output < 1:
        raise ValueError("rate, prompt and output must be positive")
    cached = min(max(cached, 0), prompt - 1)
    new = prompt - cached
    context = prompt + output / 2
    tau = profile.price(1, context, 1, 0)
    running = busy = 0.0
    t_decode = tau
    chunk_times: list[float] = []
    overloaded = False
    for _ in range(iterations):
        prefilling = rate * sum(chunk_times) if chunk_times else 0.0
        running = rate * (output - 1) * tau + prefilling
        n = max(running, 1.0)
        t_decode = profile.price(n, n * context, n, 0)
        chunk_times, extra, done = [], 0.0, cached
        for size in _chunks(profile, new, n):
            tokens = size + n
            pairs = size * done + size * (size + 1) / 2
            t = profile.price(tokens, n * context + done + size, n + 1, pairs)
            chunk_times.append(t)
            extra += t - t_decode if running >= 1 else t
            done += size
        busy = rate * extra
        if busy >= 1 or running > profile.max_num_seqs:
            overloaded = True
            busy = min(busy, 0.999)
        target = t_decode / (1 - busy) if running >= 1 else t_decode
        if abs(target - tau) < 1e-9:
            tau = target
            break
        tau = 0.5 * tau + 0.5 * target
    # decode steps per second: the time prefills leave, when always busy; each request's own, when mostly idle
    decode_steps = (1 - rate * sum(chunk_times)) / t_decode if running >= 1 else rate * (output - 1)
    in_progress = (decode_steps * t_decode**2 + rate * sum(t * t for t in chunk_times)) / 2  # Σ t² ÷ 2 per second
    ttft = profile.request_overhead_s + in_progress + sum(chunk_times)
    return SteadyState(
        itl=tau,
        ttft=ttft,
        e2e=ttft + (output - 1) * tau,
        running=running,
        busy=busy,
        overloaded=overloaded,
    )
