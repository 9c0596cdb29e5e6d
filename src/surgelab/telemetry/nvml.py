"""Local NVIDIA GPUs sampled through NVML, for runs on the machine that serves the model.

Optional: needs the ``nvidia-ml-py`` package (extra ``surgelab[gpu]``) and a visible GPU.
Without either, ``open_nvml`` says why and returns None, and the run goes on without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from surgelab.telemetry.samples import SampleBuffer, label_text

__all__ = ["open_nvml"]

Sampler = Callable[[int, SampleBuffer], None]


def open_nvml() -> tuple[Sampler | None, str]:
    """(a sampler writing ``nvml`` rows, or None; a one-line note for the user)."""
    try:
        import pynvml  # the nvidia-ml-py package
    except ImportError:
        return None, "GPU sampling needs nvidia-ml-py: pip install 'surgelab[gpu]'"
    try:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception as exc:  # NVMLError and its many subclasses
        return None, f"no NVIDIA GPU visible through NVML ({exc})"
    if not handles:
        return None, "no NVIDIA GPU visible through NVML"
    return _sampler(pynvml, handles), f"sampling {len(handles)} GPU(s) through NVML"


def _sampler(nvml: Any, handles: list[Any]) -> Sampler:
    def sample(t_ns: int, buffer: SampleBuffer) -> None:
        for index, handle in enumerate(handles):
            labels = label_text({"gpu": str(index)})
            try:
                util = nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                power = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
            except Exception:  # a GPU that stops answering is a gap, not a crash
                buffer.add(t_ns, "nvml", "up", label_text({"gpu": str(index), "error": "nvml"}), 0.0, "gauge")
                continue
            buffer.add(t_ns, "nvml", "DCGM_FI_DEV_GPU_UTIL", labels, float(util.gpu), "gauge")
            buffer.add(t_ns, "nvml", "DCGM_FI_DEV_MEM_COPY_UTIL", labels, float(util.memory), "gauge")
            buffer.add(t_ns, "nvml", "DCGM_FI_DEV_FB_USED", labels, memory.used / 2**20, "gauge")
            buffer.add(t_ns, "nvml", "DCGM_FI_DEV_POWER_USAGE", labels, power, "gauge")
        buffer.add(t_ns, "nvml", "up", "", 1.0, "gauge")

    return sample
