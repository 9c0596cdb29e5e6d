"""Engine profiles derived from physics: a model's shape on GPUs from their data sheets.

A ``Deployment`` is a model (``Architecture``, from a Hugging Face ``config.json``) on
``tp`` GPUs with tensor parallelism, at a precision, under vLLM's limits. It prices a step
the way a fused GPU forward pass spends its time (``EngineProfile``, ``combine="split"``):

- the linear layers stream their weights once per step or compute 2 FLOPs per weight per
  token, whichever takes longer (a roofline per step): ``max(weights ÷ bandwidth, FLOPs ÷ peak)``;
  a mixture-of-experts layer streams only the experts the step's tokens are routed to;
- attention adds its own time: every scheduled sequence reads its context's KV cache, and a
  prefill chunk computes its (query, key) pairs;
- tensor parallelism adds two all-reduces per layer (a latency per call, and the activations
  over the GPU link), and the engine's CPU work adds a time per step and per sequence;
- the front end (HTTP, tokenising, scheduling a new request) takes a time per request before
  the request joins a step: it delays the first token, not the batch.

Efficiencies (achieved fractions of the data-sheet peaks, and the overheads) come from
``calibration.py``, fitted to real vLLM runs on H100s; the data-sheet figures are cited in
``docs/engine.md``. Memory: vLLM keeps ``gpu_memory_utilization`` of what the GPU reports,
takes the weights and a reserve (activations, CUDA graphs, communication buffers) off it, and
gives the rest to the KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from surgelab.engine.architecture import Architecture
from surgelab.engine.calibration import Efficiency, efficiency_for
from surgelab.engine.profile import EngineProfile

__all__ = ["GB", "GIB", "GPU", "GPUS", "PRECISIONS", "Deployment", "precision_bytes"]

GB = 1e9
"""Decimal gigabyte, the unit of most vendor data sheets."""
GIB = 2**30

PRECISIONS: dict[str, float] = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
"""Bytes per weight or KV element."""


def precision_bytes(precision: str) -> float:
    try:
        return PRECISIONS[precision.lower()]
    except KeyError:
        raise ValueError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}") from None


@dataclass(frozen=True)
class GPU:
    """One accelerator, as its data sheet states it (dense figures, no sparsity)."""

    name: str
    memory_bytes: float
    """Device memory as the driver reports it to the engine (a little under the marketed size)."""
    hbm_bytes_per_s: float
    peak_flops: float
    """Dense bf16/fp16 tensor FLOP/s."""
    fp8_flops: float = 0.0
    """Dense fp8 tensor FLOP/s; 0 where the GPU has no fp8 (its fp8 weights are computed in bf16)."""
    link_bytes_per_s: float = 0.0
    """GPU-to-GPU bandwidth per direction for tensor-parallel collectives (NVLink, Infinity Fabric, PCIe)."""
    host_bytes_per_s: float = 0.0
    """Host link per direction (PCIe): what a KV cache offloaded to CPU memory moves at."""
    source: str = ""

    def flops(self, precision: str) -> float:
        """Peak for matrix multiplies on weights of ``precision`` (fp8/int8 on fp8 tensor cores where there are any)."""
        return self.fp8_flops if precision in ("fp8", "int8") and self.fp8_flops else self.peak_flops


GPUS: dict[str, GPU] = {
    "h100": GPU("H100 SXM", 79.19 * GIB, 3.35e12, 989.4e12, 1978.9e12, 450e9, 64e9,
                "NVIDIA H100 Tensor Core GPU data sheet (SXM5 80 GB); NVLink 4 900 GB/s total"),
    "h200": GPU("H200 SXM", 139.8 * GIB, 4.8e12, 989.4e12, 1978.9e12, 450e9, 64e9,
                "NVIDIA H200 Tensor Core GPU data sheet (SXM 141 GB); NVLink 4 900 GB/s total"),
    "a100": GPU("A100 SXM 80GB", 79.15 * GIB, 2.039e12, 312e12, 0.0, 300e9, 32e9,
                "NVIDIA A100 Tensor Core GPU data sheet (SXM4 80 GB); NVLink 3 600 GB/s total"),
    "l40s": GPU("L40S", 44.5 * GIB, 864e9, 362.05e12, 733e12, 32e9, 32e9,
                "NVIDIA L40S data sheet (48 GB GDDR6 with ECC); PCIe Gen4 x16, no NVLink"),
    "b200": GPU("B200", 178.4 * GIB, 8.0e12, 2250e12, 4500e12, 900e9, 64e9,
                "NVIDIA DGX/HGX B200 data sheet (180 GB HBM3e per GPU); NVLink 5 1.8 TB/s total"),
    "mi300x": GPU("MI300X", 191.98 * GIB, 5.3e12, 1307.4e12, 2614.9e12, 448e9, 64e9,
                  "AMD Instinct MI300X data sheet (192 GB HBM3); Infinity Fabric 7 × 64 GB/s per direction"),
    "a10": GPU("A10", 22.0 * GIB, 600e9, 125e12, 0.0, 32e9, 32e9,
               "NVIDIA A10 Tensor Core GPU data sheet (24 GB GDDR6); PCIe Gen4"),
}  # fmt: skip


@dataclass(frozen=True)
class Deployment:
    """``model`` on ``tp`` GPUs at a precision, with vLLM's limits: the physics of an engine profile."""

    model: Architecture
    gpu: GPU
    tp: int = 1
    weights: str = ""
    """Weight precision (``bf16``, ``fp16``, ``fp8``, ``int8``, ``int4``); default: the checkpoint's."""
    kv: str = ""
    """KV-cache precision (``bf16`` or ``fp8``); default ``bf16`` (fp16 for an fp16 checkpoint)."""
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 0
    """Default: the model's ``max_position_embeddings`` (at most 32,768)."""
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    cpu_offload_bytes: float = 0.0
    """KV cache offloaded to host memory (vLLM's CPU offload): a second tier behind the GPU's."""
    efficiency: Efficiency | None = field(default=None, compare=False)
    """Override the calibrated efficiencies (``calibration.efficiency_for`` by default)."""

    def __post_init__(self) -> None:
        if self.tp < 1:
            raise ValueError(f"tp must be at least 1, got {self.tp}")
        precision_bytes(self.weight_precision)
        precision_bytes(self.kv_precision)

    # -- precisions and efficiencies ------------------------------------------------------

    @property
    def weight_precision(self) -> str:
        return (self.weights or self.model.dtype).lower()

    @property
    def kv_precision(self) -> str:
        if self.kv:
            return self.kv.lower()
        return "fp16" if self.model.dtype == "fp16" else "bf16"

    @property
    def eff(self) -> Efficiency:
        return self.efficiency or efficiency_for(self.gpu, self.weight_precision)

    # -- memory ---------------------------------------------------------------------------

    @property
    def weight_bytes(self) -> float:
        """Weights in memory: the body at the weight precision, embeddings and head in 16 bits (as quantisers leave them)."""
        m = self.model
        embeddings = m.embedding_params + (0 if m.tied_embeddings else m.head_params)
        body = m.total_params - embeddings
        w = precision_bytes(self.weight_precision)
        return body * w + embeddings * max(w, 2.0)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one token holds over all GPUs (KV heads fewer than GPUs are replicated on each)."""
        m = self.model
        per_token = m.kv_elements_per_token() * precision_bytes(self.kv_precision)
        if not m.kv_lora_rank and m.kv_heads < self.tp:
            per_token *= self.tp / m.kv_heads
        return per_token

    @property
    def usable_bytes(self) -> float:
        """Memory the engine may use, less the per-GPU reserve: what weights and KV share."""
        per_gpu = self.gpu.memory_bytes * self.gpu_memory_utilization - self.eff.reserve_bytes
        return self.tp * per_gpu

    @property
    def kv_capacity_tokens(self) -> int:
        usable = self.usable_bytes - self.weight_bytes
        if usable <= 0:
            need = math.ceil(self.weight_bytes / (self.gpu.memory_bytes * self.gpu_memory_utilization - self.eff.reserve_bytes))
            raise ValueError(
                f"{self.model.name} at {self.weight_precision} ({self.weight_bytes / GB:.1f} GB of weights) does not fit on "
                f"{self.tp} × {self.gpu.name}: it needs at least {need} GPUs"
            )
        return int(usable // self.kv_bytes_per_token)

    # -- step time --------------------------------------------------------------------------

    @property
    def _bandwidth(self) -> float:
        return self.tp * self.gpu.hbm_bytes_per_s

    @property
    def streamed_dense_bytes(self) -> float:
        """Weights every step streams: the body but the routed experts, and the output head (not the input table)."""
        m, w = self.model, precision_bytes(self.weight_precision)
        head = m.head_params * max(w, 2.0)
        return m.dense_params * w + head

    @property
    def expert_bytes(self) -> float:
        """One routed expert's weights over every MoE layer (expert ``i`` of each)."""
        return self.model.moe_layers * self.model.expert_params * precision_bytes(self.weight_precision)

    def profile(self, name: str = "") -> EngineProfile:
        """The coefficients an ``Engine`` runs on."""
        m, gpu, eff, tp = self.model, self.gpu, self.eff, self.tp
        hbm = self._bandwidth * eff.hbm
        compute = tp * gpu.flops(self.weight_precision) * eff.mfu
        attention = tp * gpu.peak_flops * eff.attention_mfu
        comm_calls = 2 * m.layers if tp > 1 else 0
        link = gpu.link_bytes_per_s * eff.link
        ring = 2 * (tp - 1) / tp
        max_len = self.max_model_len or min(m.max_position_embeddings or 8192, 32768)
        cpu_blocks, load_s = self._offload()
        return EngineProfile(
            name=name or _slug(m.name, gpu.name, tp),
            prefill_s_per_token=m.body_flops_per_token / compute,
            decode_base_s=self.streamed_dense_bytes / hbm,
            s_per_kv_token=self.kv_bytes_per_token / (self._bandwidth * eff.kv_read),
            step_overhead_s=eff.step_s + comm_calls * eff.all_reduce_s * math.log2(tp),
            prefill_s_per_pair=m.attention_flops_per_pair / attention,
            step_s_per_seq=eff.seq_s,
            combine="split",
            comm_s_per_token=comm_calls * ring * m.hidden * 2 / link if tp > 1 and link else 0.0,
            expert_s=self.expert_bytes / (self._bandwidth * eff.expert_hbm) if m.is_moe else 0.0,
            num_experts=m.experts if m.is_moe else 0,
            experts_per_token=m.experts_per_token if m.is_moe else 0,
            request_overhead_s=eff.request_s,
            kv_capacity_tokens=self.kv_capacity_tokens,
            max_num_seqs=self.max_num_seqs,
            max_batched_tokens=self.max_num_batched_tokens,
            block_size=self.block_size,
            max_model_len=max_len,
            model=m.name,
            description=self.describe(),
            kv_bytes_per_token=self.kv_bytes_per_token,
            gpu=gpu.name,
            kv_cpu_blocks=cpu_blocks,
            kv_load_s_per_block=load_s,
        )

    def _offload(self) -> tuple[int, float]:
        """The CPU tier of the KV cache: blocks host memory holds, and one block's load over each GPU's host link."""
        if not self.cpu_offload_bytes:
            return 0, 0.0
        block = self.block_size * self.kv_bytes_per_token
        return int(self.cpu_offload_bytes // block), block / (self.tp * self.gpu.host_bytes_per_s)

    def describe(self) -> str:
        precision = self.weight_precision + ("" if self.kv_precision in ("bf16", "fp16") else f", {self.kv_precision} KV")
        return f"{self.model.name} on {self.tp} × {self.gpu.name} ({precision})"

    def with_precision(self, weights: str, kv: str = "") -> Deployment:
        return replace(self, weights=weights, kv=kv)


def _slug(model: str, gpu: str, tp: int) -> str:
    short = model.rsplit("/", 1)[-1].lower()
    return f"{short}-{tp}x{gpu.split()[0].lower()}"
