"""What a real GPU does, beside what surgelab's engine model says it does: one script, under 10 minutes.

Measured in PyTorch on the GPU at hand (H100 or H200; any CUDA GPU runs it):

- dense bf16 matrix multiplies at the shapes of a decoder's linear layers, from one token
  (memory-bound: what a decode step does) to thousands (compute-bound: what a prefill does),
  in TFLOP/s and in achieved bandwidth;
- HBM copy bandwidth (a large device-to-device copy);
- the step times of a random-weight Llama-shaped model (Llama-3-8B's shape unless told
  otherwise): a prefill of P tokens, and a decode step of B sequences over C tokens of context
  each, for several P, B and C.

Beside each, the engine model's figure for the same GPU (``surgelab.engine.Deployment``), so a
reader sees where the data sheet and the calibrated efficiencies hold and where they do not.
The model runs eagerly (no CUDA graphs, no fused attention kernels beyond PyTorch's SDPA): it
is a floor on what a serving engine achieves, not vLLM itself; the GEMM and copy figures are
the hardware's.

    python benchmarks/gpu_microbench.py --out results.json       # on the GPU machine
    python benchmarks/gpu_microbench.py --device cpu --tiny      # a check that the script runs (no GPU)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from surgelab.engine import GPUS, Deployment, find_model


@dataclass
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int


def _timer(device: str):
    """Seconds of ``fn()``, median of ``repeat`` after ``warmup`` (CUDA events on a GPU)."""

    def measure(fn, repeat: int = 10, warmup: int = 3) -> float:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeat):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                started = time.perf_counter()
                fn()
                times.append(time.perf_counter() - started)
        times.sort()
        return times[len(times) // 2]

    return measure


def gemms(device: str, dtype: torch.dtype, shape: Shape, tokens: list[int], measure) -> list[dict]:
    """The MLP's up projection (hidden → 2·intermediate, gate and up together) at each token count."""
    out = []
    w = torch.randn(shape.hidden, 2 * shape.intermediate, device=device, dtype=dtype)
    for m in tokens:
        x = torch.randn(m, shape.hidden, device=device, dtype=dtype)
        seconds = measure(lambda x=x: x @ w)
        flops = 2 * m * shape.hidden * 2 * shape.intermediate
        bytes_ = (w.numel() + x.numel() + m * 2 * shape.intermediate) * w.element_size()
        out.append(
            {"tokens": m, "seconds": seconds, "tflops": flops / seconds / 1e12, "gb_per_s": bytes_ / seconds / 1e9}
        )
    return out


def copy_bandwidth(device: str, gigabytes: float, measure) -> float:
    n = int(gigabytes * 1e9 // 2)
    src = torch.empty(n, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    seconds = measure(lambda: dst.copy_(src), repeat=5, warmup=2)
    return 2 * n * 2 / seconds / 1e9  # read and write


class Decoder(torch.nn.Module):
    """A Llama-shaped stack with random weights: RMSNorm, attention with a KV cache, gated MLP."""

    def __init__(self, shape: Shape, device: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.shape = shape
        head = shape.hidden // shape.heads
        self.head = head

        def linear(i: int, o: int) -> torch.Tensor:
            return torch.randn(i, o, device=device, dtype=dtype) / math.sqrt(i)

        self.layers = [
            {"qkv": linear(shape.hidden, (shape.heads + 2 * shape.kv_heads) * head), "o": linear(shape.heads * head, shape.hidden),
             "up": linear(shape.hidden, 2 * shape.intermediate), "down": linear(shape.intermediate, shape.hidden)}
            for _ in range(shape.layers)
        ]  # fmt: skip

    def forward(self, x: torch.Tensor, cache: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """``x``: (batch, new tokens, hidden); ``cache``: per layer (k, v) of (batch, kv heads, context, head)."""
        s, head = self.shape, self.head
        b, t, _ = x.shape
        for layer, (k_cache, v_cache) in zip(self.layers, cache):
            h = F.rms_norm(x, (s.hidden,))
            qkv = h @ layer["qkv"]
            q, k, v = qkv.split([s.heads * head, s.kv_heads * head, s.kv_heads * head], dim=-1)
            q = q.view(b, t, s.heads, head).transpose(1, 2)
            k = torch.cat([k_cache, k.view(b, t, s.kv_heads, head).transpose(1, 2)], dim=2)
            v = torch.cat([v_cache, v.view(b, t, s.kv_heads, head).transpose(1, 2)], dim=2)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1, enable_gqa=s.heads != s.kv_heads)
            x = x + attn.transpose(1, 2).reshape(b, t, s.heads * head) @ layer["o"]
            h = F.rms_norm(x, (s.hidden,)) @ layer["up"]
            gate, up = h.chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ layer["down"]
        return x

    def empty_cache(self, batch: int, context: int, device: str, dtype: torch.dtype) -> list:
        shape = (batch, self.shape.kv_heads, context, self.head)
        return [(torch.randn(shape, device=device, dtype=dtype), torch.randn(shape, device=device, dtype=dtype))
                for _ in range(self.shape.layers)]  # fmt: skip


def steps(
    model: Decoder, device: str, dtype: torch.dtype, prefills: list[int], decodes: list[tuple[int, int]], measure
):
    rows = []
    with torch.inference_mode():
        for p in prefills:
            x = torch.randn(1, p, model.shape.hidden, device=device, dtype=dtype)
            cache = model.empty_cache(1, 0, device, dtype)
            rows.append(
                {"kind": "prefill", "tokens": p, "seconds": measure(lambda x=x, c=cache: model(x, c), repeat=5)}
            )
        for batch, context in decodes:
            x = torch.randn(batch, 1, model.shape.hidden, device=device, dtype=dtype)
            cache = model.empty_cache(batch, context, device, dtype)
            rows.append({"kind": "decode", "batch": batch, "context": context,
                         "seconds": measure(lambda x=x, c=cache: model(x, c), repeat=5)})  # fmt: skip
            del cache
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", help="surgelab GPU name for the model's figures (default: from the device name)")
    parser.add_argument("--model", default="llama3-8b", help="a catalogued model whose shape the random stack takes")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: check that the script runs (CPU)")
    parser.add_argument("--out", help="write every figure here as JSON")
    args = parser.parse_args()
    device, dtype = args.device, torch.bfloat16
    arch = find_model(args.model)
    shape = Shape(arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.intermediate)
    tokens, prefills, decodes, copy_gb = [1, 8, 32, 128, 512, 2048, 8192], [128, 512, 2048], [
        (1, 512), (8, 512), (32, 512), (128, 512), (32, 2048), (128, 2048)], 4.0  # fmt: skip
    if args.tiny:
        shape = Shape(2, 256, 4, 2, 512)
        tokens, prefills, decodes, copy_gb = [1, 16, 128], [32], [(1, 64), (4, 64)], 0.05
    measure = _timer(device)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    gpu_key = args.gpu or next((k for k in GPUS if k in name.lower().replace(" ", "")), "h100")
    print(f"device: {name}; the engine model's figures for {GPUS[gpu_key].name}")
    result: dict = {"device": name, "gpu": gpu_key, "shape": shape.__dict__}
    result["gemm_bf16"] = gemms(device, dtype, shape, tokens, measure)
    for row in result["gemm_bf16"]:
        print(f"  GEMM {row['tokens']:5d} × {shape.hidden} × {2 * shape.intermediate}: {row['tflops']:7.1f} TFLOP/s, "
              f"{row['gb_per_s']:7.0f} GB/s")  # fmt: skip
    result["copy_gb_per_s"] = copy_bandwidth(device, copy_gb, measure)
    gpu = GPUS[gpu_key]
    print(f"  HBM copy: {result['copy_gb_per_s']:,.0f} GB/s (data sheet {gpu.hbm_bytes_per_s / 1e9:,.0f}: "
          f"{result['copy_gb_per_s'] * 1e9 / gpu.hbm_bytes_per_s:.0%})")  # fmt: skip
    model = Decoder(shape, device, dtype)
    result["steps"] = steps(model, device, dtype, prefills, decodes, measure)
    profile = Deployment(arch, gpu).profile() if not args.tiny else None
    for row in result["steps"]:
        if row["kind"] == "prefill":
            predicted = profile.step_time(row["tokens"], 0, row["tokens"]) if profile else None
            what = f"prefill {row['tokens']:5d} tokens"
        else:
            b, c = row["batch"], row["context"]
            predicted = profile.step_time(0, b, b * (c + 1)) if profile else None
            what = f"decode {b:3d} × {c:5d} context"
        row["model_seconds"] = predicted
        beside = (
            f", engine model {predicted * 1e3:7.2f} ms ({row['seconds'] / predicted - 1:+.0%})" if predicted else ""
        )
        print(f"  {what}: {row['seconds'] * 1e3:8.2f} ms{beside}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
