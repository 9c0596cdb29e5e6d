"""``/metrics`` is Prometheus text with vLLM's names and labels, and it counts what happened."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

VLLM_NAMES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
}


def scrape(http) -> dict[str, dict[str, float]]:
    reply = http.get("/metrics")
    assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(reply.body.decode())}
    for name, kind in VLLM_NAMES.items():
        assert families[name].type == kind, name
    samples: dict[str, dict[str, float]] = {}
    for family in families.values():
        for s in family.samples:
            if s.labels.get("model_name") == "surgelab-tiny":
                key = s.labels.get("finished_reason", s.labels.get("le", ""))
                samples.setdefault(s.name, {})[key] = s.value
    return samples


def test_metrics_parse_and_count_tokens_and_requests(http):
    before = scrape(http)
    for _ in range(3):
        reply = http.post(
            "/v1/completions", {"model": "surgelab-tiny", "prompt": "one two three", "max_tokens": 4, "ignore_eos": True}
        )
        assert reply.status == 200
    after = scrape(http)

    def delta(name: str, key: str = "") -> float:
        return after[name][key] - before.get(name, {}).get(key, 0.0)

    assert delta("vllm:prompt_tokens_total") == 9
    assert delta("vllm:generation_tokens_total") == 12
    assert delta("vllm:e2e_request_latency_seconds_count") == 3
    assert delta("vllm:time_to_first_token_seconds_count") == 3
    assert delta("vllm:request_success_total", "length") == 3
    assert after["vllm:num_requests_running"][""] == 0
    assert after["vllm:kv_cache_usage_perc"][""] == 0


def test_a_repeated_system_prompt_hits_the_prefix_cache(http):
    system = " ".join(["alpha beta gamma"] * 100)  # 300 tokens: 18 full blocks of 16
    before = scrape(http)
    for i in range(3):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": f"question {i}"}]
        assert http.post("/v1/chat/completions", {"model": "surgelab-tiny", "messages": messages, "max_tokens": 1}).status == 200
    after = scrape(http)
    hits = after["vllm:prefix_cache_hits_total"][""] - before["vllm:prefix_cache_hits_total"][""]
    assert hits == 2 * 18 * 16
