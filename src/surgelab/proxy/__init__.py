"""``surgelab proxy``: a fault-injection reverse proxy in front of any target (latency, jitter,
drops, bandwidth, injected errors, mid-stream stalls, switched on and off by a schedule)."""

from surgelab.proxy.app import FaultProxy, ProxyConfig, run_proxy
from surgelab.proxy.faults import Faults, ProxyConfigError, Schedule, Window, read_schedule
from surgelab.proxy.process import ProxyProcess, proxy_process

__all__ = [
    "FaultProxy", "ProxyConfig", "run_proxy", "Faults", "ProxyConfigError", "Schedule", "Window", "read_schedule",
    "ProxyProcess", "proxy_process",
]  # fmt: skip
