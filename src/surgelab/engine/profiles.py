"""Named engine profiles, deployments described in a file, and ``load_profile`` for either.

A profile is a name (``llama3-8b-h100``), a file of explicit coefficients, or a file (or
mapping) describing a *deployment* — a model, GPUs, tensor parallelism, precision and vLLM's
limits — whose coefficients the physics derives (``hardware.Deployment``)::

    # qwen-tp1.yaml
    model: Qwen/Qwen2.5-7B-Instruct      # a catalogued model, or a path to a config.json
    gpu: h100
    tp: 1
    weights: bf16                        # fp8, int8, int4 … (default: the checkpoint's)
    max_num_seqs: 128
    max_num_batched_tokens: 2048

Every number is cited in ``docs/engine.md``: GPU figures from data sheets, model shapes from
the models' ``config.json`` on Hugging Face, efficiencies from real runs (``calibration.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from surgelab.engine.architecture import ArchitectureError
from surgelab.engine.catalogue import find_model
from surgelab.engine.hardware import GB, GPUS, Deployment
from surgelab.engine.profile import EngineProfile, ProfileError, read_profile_mapping

__all__ = ["DEPLOYMENT_KEYS", "PROFILES", "deployment_from_mapping", "load_profile", "profile_names"]

DEPLOYMENT_KEYS: dict[str, str] = {
    "name": "the profile's name",
    "model": "a catalogued model or a config.json path (required)",
    "gpu": f"one of {', '.join(GPUS)} (required)",
    "tp": "tensor-parallel GPUs (default 1)",
    "weights": "weight precision: bf16, fp16, fp8, int8, int4 (default: the checkpoint's)",
    "kv": "KV-cache precision: bf16, fp16, fp8",
    "max_num_seqs": "vLLM --max-num-seqs (default 256)",
    "max_num_batched_tokens": "vLLM --max-num-batched-tokens (default 8192)",
    "max_model_len": "vLLM --max-model-len (default: the model's, at most 32768)",
    "gpu_memory_utilization": "vLLM --gpu-memory-utilization (default 0.9)",
    "block_size": "KV block size (default 16)",
    "cpu_offload_gb": "KV cache offloaded to host memory, GB",
}
"""The keys of a deployment description, and what each means."""


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
    "llama3-8b-h100": lambda: Deployment(find_model("llama3-8b"), GPUS["h100"], max_model_len=8192).profile("llama3-8b-h100"),
    "llama3-70b-8xh100": lambda: Deployment(find_model("llama3-70b"), GPUS["h100"], tp=8, max_model_len=8192).profile(
        "llama3-70b-8xh100"
    ),
    "llama2-7b-a10": lambda: Deployment(
        find_model("llama2-7b"), GPUS["a10"], max_num_batched_tokens=2048, max_model_len=4096
    ).profile("llama2-7b-a10"),
    "tiny": _tiny,
}


def profile_names() -> list[str]:
    return sorted(PROFILES)


def deployment_from_mapping(data: Mapping[str, Any], base_dir: Path | None = None) -> Deployment:
    """A ``Deployment`` from a parsed mapping (``DEPLOYMENT_KEYS``); ProfileError listing every problem."""
    problems = [f"unknown key {k!r} (a deployment takes {', '.join(DEPLOYMENT_KEYS)})" for k in data if k not in DEPLOYMENT_KEYS]
    problems += [f"missing key {k!r}" for k in ("model", "gpu") if k not in data]
    if problems:
        raise ProfileError("; ".join(problems))
    gpu = str(data["gpu"]).lower()
    if gpu not in GPUS:
        raise ProfileError(f"gpu: unknown GPU {data['gpu']!r}: use one of {', '.join(GPUS)}")
    try:
        model = find_model(str(data["model"]), base_dir)
    except ArchitectureError as exc:
        raise ProfileError(f"model: {exc}") from None
    values: dict[str, Any] = {}
    for key, kind in (("tp", int), ("max_num_seqs", int), ("max_num_batched_tokens", int), ("max_model_len", int),
                      ("block_size", int), ("gpu_memory_utilization", float), ("cpu_offload_gb", float)):  # fmt: skip
        if key in data:
            value = data[key]
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
            if not ok or (kind is int and value != int(value)):
                problems.append(f"{key}: must be a positive {'integer' if kind is int else 'number'}, got {value!r}")
            else:
                values[key] = kind(value)
    if values.get("gpu_memory_utilization", 0.9) > 1:
        problems.append(f"gpu_memory_utilization: must be at most 1, got {values['gpu_memory_utilization']}")
    for key in ("weights", "kv"):
        if key in data:
            values[key] = str(data[key]).lower()
    if problems:
        raise ProfileError("; ".join(problems))
    offload = values.pop("cpu_offload_gb", 0.0)
    try:
        return Deployment(model, GPUS[gpu], cpu_offload_bytes=offload * GB, **values)
    except ValueError as exc:
        raise ProfileError(str(exc)) from None


def _is_deployment(data: Mapping[str, Any]) -> bool:
    """A deployment names a GPU and gives no coefficients (a coefficients file always has ``decode_base_s``)."""
    return "gpu" in data and "decode_base_s" not in data


def _profile_of(data: Mapping[str, Any], default_name: str, base_dir: Path | None) -> EngineProfile:
    """A deployment or explicit coefficients."""
    if not _is_deployment(data):
        return EngineProfile.from_mapping(data, default_name=default_name)
    deployment = deployment_from_mapping(data, base_dir)
    try:
        return deployment.profile(str(data.get("name") or default_name))
    except ValueError as exc:  # the weights do not fit
        raise ProfileError(str(exc)) from None


def load_profile(spec: str | Path | Mapping[str, Any], base_dir: Path | None = None) -> EngineProfile:
    """A named profile, a ``.yaml``/``.yml``/``.json`` file (coefficients or a deployment), or a deployment mapping."""
    if isinstance(spec, Mapping):
        return _profile_of(spec, "deployment", base_dir)
    if isinstance(spec, str) and spec in PROFILES:
        return PROFILES[spec]()
    path = Path(spec)
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        data = read_profile_mapping(path)
        try:
            return _profile_of(data, path.stem, path.parent)
        except ProfileError as exc:
            raise ProfileError(f"profile file {path}: {exc}") from None
    raise ProfileError(
        f"unknown profile {str(spec)!r}: use one of {', '.join(profile_names())}, a .yaml/.json file of coefficients, "
        "or a deployment file (model, gpu, tp, …)"
    )
