"""What a real engine achieves of a GPU's data sheet: the efficiencies under every physics profile.

Each figure is an input of ``hardware.Deployment``, fitted to real vLLM runs on H100 GPUs
(``benchmarks/accuracy_h100.py``, which also refits them leaving each model out and reports
the error beside every figure; docs/accuracy.md). They are fractions of a peak (bandwidth,
FLOP/s) or times the GPU's own specification cannot give (CPU work per step, the front end).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from surgelab.engine.hardware import GPU

__all__ = ["Efficiency", "H100_VLLM", "efficiency_for"]


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of a GPU's peaks, and the engine's own overheads."""

    hbm: float = 0.8
    """Of HBM bandwidth, streaming weights (a decode step's floor)."""
    expert_hbm: float = 0.8
    """Of HBM bandwidth, streaming a mixture-of-experts layer's routed experts (grouped, fused MoE kernels)."""
    kv: float | None = None
    """Of HBM bandwidth, reading the KV cache in decode attention; None: as streaming weights (``hbm``)."""
    mfu: float = 0.7
    """Of dense tensor FLOP/s, in the linear layers of a prefill (compute-bound) step."""
    attention_mfu: float = 0.5
    """Of dense bf16 FLOP/s, in prefill attention (the (query, key) pairs)."""
    link: float = 0.7
    """Of the GPU link's bandwidth, carrying tensor-parallel all-reduce payloads."""
    step_s: float = 0.7e-3
    """CPU work per step: scheduling, sampling, kernel launches."""
    seq_s: float = 0.0
    """CPU work per scheduled sequence per step."""
    all_reduce_s: float = 7.5e-6
    """Latency of one all-reduce, per doubling of the tensor-parallel group."""
    request_s: float = 8e-3
    """The front end's time per request before it joins a step (HTTP, template, tokenising)."""
    reserve_bytes: float = 0.45e9
    """Per GPU, memory the engine keeps from the KV cache (activations, CUDA graphs, buffers)."""

    @property
    def kv_read(self) -> float:
        return self.hbm if self.kv is None else self.kv

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)

    def with_values(self, **values: float) -> Efficiency:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown efficiency {', '.join(unknown)}: use {', '.join(sorted(known))}")
        return replace(self, **values)


H100_VLLM = Efficiency(
    hbm=0.796, expert_hbm=0.673, mfu=0.674, step_s=0.927e-3, seq_s=0.0, all_reduce_s=6.28e-6, request_s=9.70e-3
)
"""vLLM v0.15.1 on H100 SXM: fitted on all 13 runs of ``shared/data/vllm-h100/runs.csv`` (the dense figures on
the 9 dense runs' mean E2E and TTFT, ``expert_hbm`` on the 4 Llama-4-Scout runs' E2E); ``benchmarks/accuracy_h100.py``
refits it and judges every model on a fit that left it out (docs/accuracy.md). ``attention_mfu``, ``link`` and
``reserve_bytes`` are not fitted to latencies: prefill attention and all-reduce payloads are small at these
prompt lengths, and the reserve is what makes Llama-2-7B's 119,408-token KV cache on one H100 come out."""


def efficiency_for(gpu: GPU, precision: str) -> Efficiency:
    """The calibrated efficiencies for ``gpu``: measured on H100, carried to other GPUs as stated in docs/accuracy.md."""
    return H100_VLLM
