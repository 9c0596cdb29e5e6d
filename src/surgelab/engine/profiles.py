"""Named hardware, models and engine profiles, and ``load_profile`` for a name or a file.

Every number here is cited in ``docs/engine.md``: GPU figures from NVIDIA data sheets,
model shapes from the models' ``config.json`` on Hugging Face.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from surgelab.engine.hardware import GB, GPU, Deployment, Model
from surgelab.engine.profile import EngineProfile, ProfileError, read_profile_file

__all__ = ["GPUS", "MODELS", "PROFILES", "load_profile", "profile_names"]

GPUS: dict[str, GPU] = {
    "h100": GPU("H100 SXM", 80 * GB, 3.35e12, 989e12, "NVIDIA H100 Tensor Core GPU data sheet"),
    "h200": GPU("H200 SXM", 141 * GB, 4.8e12, 989e12, "NVIDIA H200 Tensor Core GPU data sheet"),
    "a100": GPU("A100 SXM 80GB", 80 * GB, 2.0e12, 312e12, "NVIDIA A100 Tensor Core GPU data sheet"),
    "a10": GPU("A10", 24 * GB, 600e9, 125e12, "NVIDIA A10 Tensor Core GPU data sheet"),
}

MODELS: dict[str, Model] = {
    "llama3-8b": Model(
        "meta-llama/Meta-Llama-3-8B-Instruct",
        8.03e9,
        32,
        8,
        128,
        max_model_len=8192,
        source="Meta Llama 3 model card; config.json",
    ),
    "llama2-7b": Model(
        "meta-llama/Llama-2-7b-chat-hf",
        6.74e9,
        32,
        32,
        128,
        max_model_len=4096,
        source="Llama 2 paper (Touvron et al. 2023); config.json",
    ),
    "llama3-70b": Model(
        "meta-llama/Meta-Llama-3-70B-Instruct",
        70.6e9,
        80,
        8,
        128,
        max_model_len=8192,
        source="Meta Llama 3 model card; config.json",
    ),
}

_ALL_REDUCE_S = 25e-6
"""Time of one small NVLink all-reduce (decode-sized activations), as vLLM achieves it: fitted
to Llama-3-70B's published TP-8 decode step on 8 × H100 (docs/profiles.md; was 10 µs)."""

_MFU_8B_H100 = 0.35
"""Prefill MFU of Llama-3-8B on one H100 under vLLM: fitted to a published 1,369-token
prefill (62 ms, docs/profiles.md); the data-sheet default of 0.5 predicted 45 ms."""

_MFU_70B_8XH100 = 0.2
"""Prefill MFU of Llama-3-70B at TP 8 under vLLM: fitted to a published 1,369-token prefill
(122 ms, docs/profiles.md); small prefills split eight ways and their all-reduces are slow."""


def _tiny() -> EngineProfile:
    return EngineProfile(
        name="tiny",
        prefill_s_per_token=1e-8,
        decode_base_s=1e-5,
        s_per_kv_token=0.0,
        step_overhead_s=0.0,
        kv_capacity_tokens=1 << 20,
        max_num_seqs=512,
        max_batched_tokens=16384,
        max_model_len=32768,
        model="surgelab-tiny",
        description="near-zero step time, for tests and the server benchmark",
    )


PROFILES: dict[str, Callable[[], EngineProfile]] = {
    "llama3-8b-h100": lambda: Deployment(MODELS["llama3-8b"], GPUS["h100"], mfu=_MFU_8B_H100).profile("llama3-8b-h100"),
    "llama3-70b-8xh100": lambda: Deployment(
        MODELS["llama3-70b"],
        GPUS["h100"],
        num_gpus=8,
        mfu=_MFU_70B_8XH100,
        comm_overhead_s=2 * MODELS["llama3-70b"].layers * _ALL_REDUCE_S,
    ).profile("llama3-70b-8xh100"),
    "llama2-7b-a10": lambda: Deployment(
        MODELS["llama2-7b"],
        GPUS["a10"],
        max_batched_tokens=2048,
    ).profile("llama2-7b-a10"),
    "tiny": _tiny,
}


def profile_names() -> list[str]:
    return sorted(PROFILES)


def load_profile(spec: str | Path) -> EngineProfile:
    """A named profile, or explicit coefficients from a ``.yaml``/``.yml``/``.json`` file."""
    if isinstance(spec, str) and spec in PROFILES:
        return PROFILES[spec]()
    path = Path(spec)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        return read_profile_file(path)
    raise ProfileError(
        f"unknown profile {str(spec)!r}: use one of {', '.join(profile_names())} or a .yaml/.json file of coefficients"
    )
