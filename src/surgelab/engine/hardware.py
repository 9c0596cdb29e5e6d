"""Engine profiles derived from physics: GPU data sheets, model cards and stated efficiencies.

For a decoder-only transformer with P parameters of b bytes, L layers and H_kv KV heads of
dimension d, served on G GPUs with tensor parallelism:

- weights W = P·b bytes, KV bytes per token k = 2·L·H_kv·d·b;
- KV capacity = (G · memory · utilisation − W − G · activation reserve) ÷ k tokens;
- a decode step streams the weights and the KV it reads: (W + tokens·k) ÷ (G · bandwidth · η);
- each token costs 2·P FLOPs: 2·P ÷ (G · peak · MFU) seconds per token of compute;
- tensor parallelism adds a fixed all-reduce cost per step (``comm_overhead_s``).

η (achieved fraction of HBM bandwidth) and MFU (achieved fraction of peak FLOP/s) are
inputs, not facts; ``surgelab fit`` replaces the derived coefficients with measured ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from surgelab.engine.profile import EngineProfile

__all__ = ["GPU", "Model", "Deployment", "GB"]

GB = 1e9
"""Decimal gigabyte, the unit of vendor data sheets."""


@dataclass(frozen=True)
class GPU:
    """One accelerator, as its data sheet states it."""

    name: str
    memory_bytes: float
    hbm_bytes_per_s: float
    peak_flops: float
    """Dense (no sparsity) bf16 tensor-core FLOP/s."""
    source: str = ""


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer, as its model card and config state it."""

    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: float = 2
    """Bytes per weight: 2 for FP16/BF16, 1 for FP8/INT8, 0.5 for INT4."""
    max_model_len: int = 8192
    source: str = ""
    kv_dtype_bytes: float | None = None
    """Bytes per KV-cache element when it differs from the weights' (an FP8 KV cache)."""

    @property
    def weight_bytes(self) -> float:
        return self.params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> float:
        kv_bytes = self.dtype_bytes if self.kv_dtype_bytes is None else self.kv_dtype_bytes
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes


@dataclass(frozen=True)
class Deployment:
    """A model on ``num_gpus`` GPUs with the efficiencies and limits an engine would use."""

    model: Model
    gpu: GPU
    num_gpus: int = 1
    bandwidth_efficiency: float = 0.8
    """η: achieved fraction of HBM bandwidth on decode."""
    mfu: float = 0.5
    """Achieved fraction of peak FLOP/s on prefill."""
    memory_utilization: float = 0.9
    """vLLM's ``gpu_memory_utilization``."""
    activation_reserve_bytes: float = 1 * GB
    """Per GPU: activations, CUDA graphs and workspace kept out of the KV cache."""
    step_overhead_s: float = 0.001
    """Scheduler, sampling and kernel-launch time per step."""
    comm_overhead_s: float = 0.0
    """Tensor-parallel all-reduce time per step."""
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    block_size: int = 16

    @property
    def kv_capacity_tokens(self) -> int:
        usable = (
            self.num_gpus * (self.gpu.memory_bytes * self.memory_utilization - self.activation_reserve_bytes)
            - self.model.weight_bytes
        )
        if usable <= 0:
            raise ValueError(f"{self.model.name} does not fit on {self.num_gpus} × {self.gpu.name}")
        return int(usable // self.model.kv_bytes_per_token)

    @property
    def weight_read_s(self) -> float:
        """Seconds to stream the weights once: the floor of every decode step."""
        return self.model.weight_bytes / self._bandwidth

    @property
    def kv_read_s_per_token(self) -> float:
        return self.model.kv_bytes_per_token / self._bandwidth

    @property
    def compute_s_per_token(self) -> float:
        return 2 * self.model.params / (self.num_gpus * self.gpu.peak_flops * self.mfu)

    @property
    def _bandwidth(self) -> float:
        return self.num_gpus * self.gpu.hbm_bytes_per_s * self.bandwidth_efficiency

    def profile(self, name: str) -> EngineProfile:
        """The coefficients an ``Engine`` runs on."""
        return EngineProfile(
            name=name,
            prefill_s_per_token=self.compute_s_per_token,
            decode_base_s=self.weight_read_s,
            s_per_kv_token=self.kv_read_s_per_token,
            step_overhead_s=self.step_overhead_s + self.comm_overhead_s,
            kv_capacity_tokens=self.kv_capacity_tokens,
            max_num_seqs=self.max_num_seqs,
            max_batched_tokens=self.max_batched_tokens,
            block_size=self.block_size,
            max_model_len=self.model.max_model_len,
            model=self.model.name,
            description=f"{self.model.name} on {self.num_gpus} × {self.gpu.name}",
            kv_bytes_per_token=self.model.kv_bytes_per_token,
        )
