"""How many sequences fit in GPU memory, and what quantisation buys.

Seed 002 sizes concurrency as ``gpu_mem ÷ mem_per_req``. Done properly, the weights come off
first, the engine keeps a share of memory back (``gpu_memory_utilization`` and activations), and
a sequence holds KV for every token of its context, in whole blocks:

    KV tokens   = (G · memory · utilisation − G · reserve − weights) ÷ KV bytes per token
    sequences   = ⌊KV tokens ÷ block⌋ ÷ ⌈context ÷ block⌉

Quantising the weights frees memory for KV and shortens every decode step (fewer bytes to
stream); quantising the KV cache halves the bytes per token. ``what_if`` sets the precisions
side by side on the same model and hardware, with the decode speed each would reach when full.
"""

from __future__ import annotations

from dataclasses import dataclass

from surgelab.engine.architecture import Architecture
from surgelab.engine.hardware import GPU, PRECISIONS, Deployment
from surgelab.engine.kv import sequences_that_fit

__all__ = ["PRECISIONS", "WHAT_IF", "MemoryFit", "memory_fit", "what_if", "naive_concurrency"]

WHAT_IF: tuple[tuple[str, str], ...] = (
    ("fp16", "fp16"),
    ("fp8", "fp16"),
    ("fp8", "fp8"),
    ("int4", "fp16"),
    ("int4", "fp8"),
)
"""(weights, KV cache) pairs compared by default: what serving stacks commonly offer."""


@dataclass(frozen=True)
class MemoryFit:
    """One model at one precision on one set of GPUs."""

    weights: str
    kv: str
    context_tokens: int
    weight_bytes: float
    kv_bytes_per_token: float
    kv_tokens: int
    """Tokens of KV cache that fit beside the weights; 0 when the weights alone do not fit."""
    sequences: int
    """Sequences of ``context_tokens`` each that fit at once (KV blocks, not the engine's max_num_seqs)."""
    decode_step_s: float | None
    """One decode step with ``sequences`` sequences, each reading its whole context; None if nothing fits."""

    @property
    def fits(self) -> bool:
        return self.sequences > 0

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Output tokens per second when full: one token per sequence per step."""
        return None if not self.decode_step_s else self.sequences / self.decode_step_s


def memory_fit(deployment: Deployment, context_tokens: int, weights: str = "fp16", kv: str | None = None) -> MemoryFit:
    """``deployment``'s model at the given precisions: the KV it can hold and how fast it decodes when full.

    Quantised weights keep the embeddings and the output head in 16 bits, as quantisers leave them.
    """
    if context_tokens < 1:
        raise ValueError(f"context must be at least 1 token, got {context_tokens}")
    kv = kv or weights
    quantised = deployment.with_precision(weights.lower(), kv.lower())
    try:
        kv_tokens = quantised.kv_capacity_tokens
    except ValueError:  # the weights alone do not fit
        kv_tokens = 0
    sequences = sequences_that_fit(kv_tokens, quantised.block_size, context_tokens)
    step = None
    if sequences:
        step = quantised.profile("what-if").step_time(0, sequences, sequences * context_tokens)
    return MemoryFit(
        weights, kv, context_tokens, quantised.weight_bytes, quantised.kv_bytes_per_token, kv_tokens, sequences, step
    )


def what_if(
    model: Architecture,
    gpu: GPU,
    num_gpus: int,
    context_tokens: int,
    pairs: tuple[tuple[str, str], ...] = WHAT_IF,
    gpu_memory_utilization: float = 0.9,
) -> list[MemoryFit]:
    """The same model and GPUs at each (weights, KV) precision pair."""
    base = Deployment(model, gpu, tp=num_gpus, gpu_memory_utilization=gpu_memory_utilization)
    return [memory_fit(base, context_tokens, w, k) for w, k in pairs]


def naive_concurrency(gpu_memory_bytes: float, bytes_per_request: float) -> int:
    """Seed 002's ``int(gpu_mem / mem_per_req)``: no weights, no reserve, no blocks."""
    if bytes_per_request <= 0:
        raise ValueError("memory per request must be positive")
    return int(gpu_memory_bytes / bytes_per_request)
