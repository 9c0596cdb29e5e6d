"""The series worth keeping from each inference server and GPU exporter.

Names as each project documents them: vLLM (docs "Production Metrics"; ``series`` are the V1
engine's names, checked against a real vLLM 0.32 server in tests/realengine, ``legacy`` the V0
names older servers and ``surgelab serve`` still expose),
SGLang ("Production Metrics"), Hugging Face TGI ("Metrics" reference), NVIDIA Triton
("Metrics"), llama.cpp server (``--metrics``), NVIDIA DCGM exporter (default counters) and
the Prometheus node exporter. ``roles`` name the few gauges the analysis reads (running and
waiting requests, KV-cache use, GPU utilisation), whatever the server calls them; ``latency``,
``completed`` and ``errors`` the histograms and counters alert rules and autoscalers are
written on (``telemetry.promql``), where the server has them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Preset", "PRESETS", "PROCESS_MEMORY", "detect_preset"]

PROCESS_MEMORY = "process_resident_memory_bytes"
"""Kept from every server that exports it (Python's and Go's Prometheus clients do): a soak's leak shows here."""


@dataclass(frozen=True)
class Preset:
    name: str
    prefix: str  # how to recognise the server from its metric names
    series: tuple[str, ...]  # metric family names kept (histograms keep their buckets)
    roles: dict[str, str] = field(default_factory=dict)  # running / waiting / kv_usage / gpu_util / memory_used
    legacy: tuple[str, ...] = ()  # older names of series, kept too when a server still exposes them
    title: str = ""  # how an alert's name spells the server
    latency: dict[str, str] = field(default_factory=dict)  # ttft / e2e / itl / tpot → histogram family (seconds)
    completed: str = ""  # the counter of requests served (PromQL's name), for requests/s
    errors: tuple[str, str] | None = None  # (failed, all) request counters, for the error rate

    @property
    def kept(self) -> tuple[str, ...]:
        """Every family name a scrape with this preset keeps."""
        return self.series + self.legacy + (PROCESS_MEMORY,)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "vllm",
            "vllm:",
            (
                "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                "vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:prefix_cache_queries",
                "vllm:prefix_cache_hits", "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                "vllm:request_time_per_output_token_seconds", "vllm:inter_token_latency_seconds",
                "vllm:request_queue_time_seconds",
            ),
            {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
             "kv_usage": "vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc"},
            ("vllm:num_requests_swapped", "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"),
            title="VLLM",
            latency={"ttft": "vllm:time_to_first_token_seconds", "e2e": "vllm:e2e_request_latency_seconds",
                     "itl": "vllm:inter_token_latency_seconds", "tpot": "vllm:request_time_per_output_token_seconds"},
            completed="vllm:request_success_total",
            # vLLM's HTTP middleware (prometheus-fastapi-instrumentator) counts responses by status class.
            errors=('http_requests_total{status=~"5.."}', "http_requests_total"),
        ),
        Preset(
            "sglang",
            "sglang:",
            (
                "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:cache_hit_rate",
                "sglang:gen_throughput", "sglang:prompt_tokens", "sglang:generation_tokens",
                "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
                "sglang:inter_token_latency_seconds",
            ),
            {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs", "kv_usage": "sglang:token_usage"},
            title="SGLang",
            latency={"ttft": "sglang:time_to_first_token_seconds", "e2e": "sglang:e2e_request_latency_seconds",
                     "itl": "sglang:inter_token_latency_seconds"},
            completed="sglang:num_requests_total",
        ),
        Preset(
            "tgi",
            "tgi_",
            (
                "tgi_batch_current_size", "tgi_queue_size", "tgi_batch_current_max_tokens", "tgi_request_count",
                "tgi_request_success", "tgi_request_failure", "tgi_request_duration", "tgi_request_queue_duration",
                "tgi_request_mean_time_per_token_duration", "tgi_request_generated_tokens", "tgi_request_input_length",
                "tgi_batch_inference_duration",
            ),
            {"running": "tgi_batch_current_size", "waiting": "tgi_queue_size"},
            title="TGI",
            latency={"e2e": "tgi_request_duration", "tpot": "tgi_request_mean_time_per_token_duration"},
            completed="tgi_request_success",
            errors=("tgi_request_failure", "tgi_request_count"),
        ),
        Preset(
            "triton",
            "nv_",
            (
                "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                "nv_inference_exec_count", "nv_inference_pending_request_count", "nv_inference_queue_duration_us",
                "nv_inference_compute_infer_duration_us", "nv_gpu_utilization", "nv_gpu_memory_used_bytes",
                "nv_gpu_memory_total_bytes",
            ),
            {"waiting": "nv_inference_pending_request_count", "gpu_util": "nv_gpu_utilization"},
            title="Triton",
            completed="nv_inference_request_success",
        ),
        Preset(
            "llamacpp",
            "llamacpp:",
            (
                "llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:kv_cache_usage_ratio",
                "llamacpp:kv_cache_tokens", "llamacpp:n_busy_slots_per_decode", "llamacpp:prompt_tokens_total",
                "llamacpp:tokens_predicted_total", "llamacpp:prompt_tokens_seconds", "llamacpp:predicted_tokens_seconds",
                "llamacpp:n_decode_total",
            ),
            {"running": "llamacpp:requests_processing", "waiting": "llamacpp:requests_deferred",
             "kv_usage": "llamacpp:kv_cache_usage_ratio"},
            title="LlamaCpp",
        ),
        Preset(
            "dcgm",
            "DCGM_FI_",
            (
                "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK",
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
            ),
            {"gpu_util": "DCGM_FI_DEV_GPU_UTIL", "memory_used": "DCGM_FI_DEV_FB_USED"},
            title="DCGM",
        ),
        Preset(
            "node",
            "node_",
            ("node_cpu_seconds", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes", "node_load1",
             "node_network_receive_bytes", "node_network_transmit_bytes"),
        ),
    )
}  # fmt: skip


def detect_preset(family_names: set[str]) -> Preset | None:
    """The preset whose prefix most of the exposed families carry (None when nothing matches)."""
    best, best_count = None, 0
    for preset in PRESETS.values():
        count = sum(name.startswith(preset.prefix) for name in family_names)
        if count > best_count:
            best, best_count = preset, count
    return best
