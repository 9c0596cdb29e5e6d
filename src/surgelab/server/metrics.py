"""``/metrics`` in Prometheus text format, under vLLM's metric names and labels.

Dashboards and autoscalers written for vLLM (``vllm:num_requests_waiting``,
``vllm:kv_cache_usage_perc``, the TTFT histogram) work against ``surgelab serve`` unchanged.
Each server owns its ``CollectorRegistry``; nothing touches the global one.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from surgelab.engine import Engine, StepResult

__all__ = ["CONTENT_TYPE", "ServerMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Bucket boundaries as vLLM's V1 engine uses them.
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                 80.0)  # fmt: skip
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
                960.0, 1920.0, 7680.0)  # fmt: skip


class ServerMetrics:
    """The engine's gauges and the requests' histograms, labelled ``model_name`` and ``engine``."""

    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes …, as vLLM's API server exports
        labels = {"model_name": model_name, "engine": "0"}
        names = list(labels)

        def make(kind, name: str, doc: str, **kw):
            return kind(name, doc, names, registry=self.registry, **kw).labels(**labels)

        self.running = make(Gauge, "vllm:num_requests_running", "Requests in the running batch.")
        self.waiting = make(Gauge, "vllm:num_requests_waiting", "Requests waiting to be scheduled.")
        self.kv_usage = make(Gauge, "vllm:kv_cache_usage_perc", "KV-cache usage (1 = 100%).")
        self.prompt_tokens = make(Counter, "vllm:prompt_tokens", "Prefill tokens processed.")
        self.generation_tokens = make(Counter, "vllm:generation_tokens", "Tokens generated.")
        self.preemptions = make(Counter, "vllm:num_preemptions", "Preemptions (recompute).")
        self.cache_queries = make(Counter, "vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.")
        self.cache_hits = make(Counter, "vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.")
        self.session_requests = make(
            Counter, "surgelab:session_requests", "Requests carrying the session header (surgelab serve --session-header)."
        )
        self.ttft = make(
            Histogram, "vllm:time_to_first_token_seconds", "Time to first token in seconds.", buckets=_TTFT_BUCKETS
        )
        self.tpot = make(
            Histogram, "vllm:time_per_output_token_seconds", "Time per output token in seconds.", buckets=_TPOT_BUCKETS
        )
        self.e2e = make(
            Histogram,
            "vllm:e2e_request_latency_seconds",
            "End-to-end request latency in seconds.",
            buckets=_E2E_BUCKETS,
        )
        self._success = Counter(
            "vllm:request_success", "Finished requests.", [*names, "finished_reason"], registry=self.registry
        )
        self._labels = labels

    def observe_step(self, result: StepResult) -> None:
        if result.emitted:
            self.generation_tokens.inc(sum(result.emitted.values()))
        if result.preempted:
            self.preemptions.inc(len(result.preempted))
        if result.cached_tokens:
            self.cache_hits.inc(sum(result.cached_tokens.values()))

    def observe_admitted(self, prompt_tokens: int) -> None:
        self.prompt_tokens.inc(prompt_tokens)
        self.cache_queries.inc(prompt_tokens)

    def observe_finished(self, reason: str, ttft: float, e2e: float, output_tokens: int) -> None:
        self.ttft.observe(ttft)
        self.e2e.observe(e2e)
        if output_tokens > 1:
            self.tpot.observe((e2e - ttft) / (output_tokens - 1))
        self._success.labels(**self._labels, finished_reason=reason).inc()

    def render(self, engine: Engine) -> bytes:
        """The exposition text; gauges are read from ``engine`` now, not at its last step."""
        self.running.set(engine.num_running)
        self.waiting.set(engine.num_waiting)
        self.kv_usage.set(engine.kv.usage)
        return generate_latest(self.registry)
