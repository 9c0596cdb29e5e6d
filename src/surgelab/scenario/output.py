"""What a run writes besides its requests: the run directory, and the server metrics scraped meanwhile."""

from __future__ import annotations

from typing import Literal

from pydantic import AnyHttpUrl, Field, PositiveFloat

from surgelab.scenario.base import PositiveSeconds, ScenarioModel
from surgelab.scenario.target import Tls

__all__ = ["Output", "Telemetry", "TelemetrySource"]


class Output(ScenarioModel):
    """Where the run directory goes; records are flushed so a crash loses at most one interval."""

    dir: str | None = Field(None, description="Run directory; default runs/<name>-<timestamp>.")
    flush_interval: PositiveSeconds = Field(1.0, description="How often records are written to disk.")


class TelemetrySource(ScenarioModel):
    """A Prometheus endpoint to scrape during the run: the target's /metrics, a DCGM or node exporter."""

    url: AnyHttpUrl = Field(description="e.g. http://127.0.0.1:8000/metrics")
    name: str | None = Field(None, description="Label in telemetry.parquet and the summary (default: host:port).")
    preset: Literal["auto", "all", "vllm", "sglang", "tgi", "triton", "llamacpp", "dcgm", "node"] = Field(
        "auto", description="Which series to keep: a server's useful ones (auto detects), or all."
    )
    series: list[str] = Field(default_factory=list, description="More metric families to keep (* wildcards).")
    timeout: PositiveSeconds = Field(2.0, description="A slower answer is a failed scrape, never a slower run.")
    tls: Tls | None = Field(
        None,
        description="TLS for an https:// source (ca_cert, client_cert, client_key, server_name, insecure); default: the target's when the source is on the target's host, else the system's trust.",
    )

    @property
    def label(self) -> str:
        return self.name or f"{self.url.host}:{self.url.port}"


class Telemetry(ScenarioModel):
    """Server and GPU metrics scraped while the run goes on (docs/telemetry.md)."""

    sources: list[TelemetrySource] = Field(default_factory=list)
    interval: PositiveSeconds = Field(1.0, description="Time between scrapes.")
    nvml: bool = Field(False, description="Also sample this machine's NVIDIA GPUs through NVML (extra surgelab[gpu]).")
    capacity: PositiveFloat | None = Field(
        None, description="The target's service capacity in requests/s on this workload (e.g. a sweep's highest "
        "throughput): utilization.offered is the arrival rate ÷ this. Unset, a run measures it only when the server "
        "had requests waiting, and says it is unknown otherwise.",
    )  # fmt: skip
