"""Every kind in one mixed run against the embedded server: records, units and by_kind figures."""

from __future__ import annotations

import pytest

from surgelab.engine.media import speech_tokens
from surgelab.workload.media import image_tokens

MIX = [
    {"name": "chat", "weight": 2, "kind": "chat", "prompt_tokens": 32, "output_tokens": 8},
    {"name": "embed", "kind": "embeddings", "batch_size": {"dist": "uniform", "min": 2, "max": 6}, "prompt_tokens": 40},
    {"name": "look", "kind": "vision", "prompt_tokens": 20, "output_tokens": 4,
     "images": {"count": 2, "width": 640, "height": 480, "format": "png"}},
    {"name": "listen", "kind": "transcription", "audio": {"seconds": {"dist": "uniform", "min": 1, "max": 3}}},
    {"name": "draw", "kind": "image_generation", "prompt_tokens": 12,
     "images": {"count": 2, "width": 256, "height": 256}, "sampling": {"num_inference_steps": 4}},
    {"name": "rank", "kind": "rerank", "prompt_tokens": 10, "documents": {"count": 5, "tokens": 30, "top_n": 3}},
    {"name": "say", "kind": "speech", "prompt_tokens": 25},
    {"name": "rag", "kind": "flow", "flow": [
        {"name": "embed-question", "kind": "embeddings", "prompt_tokens": 16},
        {"name": "rerank", "kind": "rerank", "prompt_tokens": 16, "documents": {"count": 8, "tokens": 64}},
        {"name": "answer", "kind": "chat", "prompt_tokens": 600, "output_tokens": 16},
    ]},
    {"name": "raw", "kind": "http", "http": {"method": "POST", "path": "/v1/embeddings",
                                             "body": {"model": "{model}", "input": "{prompt}"}}},
]  # fmt: skip


@pytest.fixture(scope="module")
def mixed(embedded, scenario_for, run, reconciled, tmp_path_factory):
    scenario = scenario_for(
        embedded, model="surgelab-tiny", load={"rate": 30, "duration": "3s", "arrival": "constant"}, workload={"mix": MIX},
        kinds={"transcription": {"slo": {"e2e": "10s"}}, "speech": {"slo": {"ttft": "5s", "itl": "1ms"}}},
    )  # fmt: skip
    run_dir = tmp_path_factory.mktemp("mixed")
    result = run(scenario, run_dir)
    table = reconciled(result.summary, run_dir)
    return result.summary, table.to_pylist()


def _rows(records, kind):
    return [r for r in records if r["kind"] == kind]


def test_every_kind_succeeds_and_is_recorded(mixed):
    summary, records = mixed
    assert summary["requests"]["failed"] == 0, [r["error"] for r in records if r["error"]][:3]
    kinds = {"chat", "embeddings", "vision", "transcription", "image_generation", "rerank", "speech", "flow", "http"}
    assert {r["kind"] for r in records} == kinds
    assert set(summary["by_kind"]) == kinds
    assert all(summary["by_kind"][k]["requests"]["ok"] > 0 for k in kinds)


def test_units_per_kind(mixed):
    _, records = mixed
    for r in _rows(records, "embeddings"):
        assert 2 <= r["input_units"] <= 6 and r["output_units"] == r["input_units"]
        assert r["prompt_tokens"] == 40 * r["input_units"], "the server's usage counts every input"
    for r in _rows(records, "vision"):
        assert r["input_units"] == 2
        assert r["prompt_tokens"] == 20 + 2 * image_tokens(640, 480), "server usage = text + the tile rule"
    for r in _rows(records, "transcription"):
        assert 1 <= r["input_units"] <= 3 and r["output_tokens"] >= 1 and r["first_token_ns"] is None
    for r in _rows(records, "image_generation"):
        assert r["input_units"] == 2 and r["output_units"] == 2
    for r in _rows(records, "rerank"):
        assert r["input_units"] == 5 and r["output_units"] == 3
        assert r["prompt_tokens"] == 5 * 10 + 5 * 30, "cross-encoder: the query with every document"
    for r in _rows(records, "speech"):
        assert r["output_units"] == pytest.approx(speech_tokens(25)[0], abs=1e-3)
        assert r["sent_ns"] < r["first_token_ns"] <= r["end_ns"], "first audio byte"
    for r in _rows(records, "http"):
        assert r["output_units"] > 0 and r["http_status"] == 200


def test_flow_is_one_record_with_its_steps(mixed):
    summary, records = mixed
    for r in _rows(records, "flow"):
        steps = r["step_ms"]
        assert len(steps) == 3 and all(s > 0 for s in steps)
        assert sum(steps) <= (r["end_ns"] - r["sent_ns"]) / 1e6 + 1e-3
        assert r["output_tokens"] == 16 and len(r["itl_us"]) == 15, "the answer's stream"
    shares = summary["by_kind"]["flow"]["steps"]["rag"]
    assert [s["step"] for s in shares] == ["embed-question", "rerank", "answer"]
    assert sum(s["share"] for s in shares) == pytest.approx(1.0)


def test_by_kind_has_the_figures_that_fit(mixed):
    summary, _ = mixed
    k = summary["by_kind"]
    assert {"ttft", "itl", "tpot", "e2e"} <= set(k["chat"]["latency_ms"]) and "ttft" in k["vision"]["latency_ms"]
    for name in ("embeddings", "transcription", "image_generation", "rerank", "http"):
        assert set(k[name]["latency_ms"]) == {"e2e"}, name
    assert set(k["speech"]["latency_ms"]) == {"e2e", "ttfa"}
    assert k["embeddings"]["throughput"]["inputs_per_s"] >= 2 * k["embeddings"]["throughput"]["requests_per_s"]
    assert k["vision"]["throughput"]["images_per_s"] == pytest.approx(2 * k["vision"]["throughput"]["requests_per_s"])
    assert k["transcription"]["throughput"]["audio_s_per_s"] > 0
    assert 0 < k["transcription"]["real_time_factor"]["p50"] < 1, "the tiny profile is faster than real time"
    assert k["speech"]["audio_s_per_s"]["p50"] > 1
    assert k["image_generation"]["throughput"]["images_per_s"] > 0
    assert k["rerank"]["throughput"]["documents_per_s"] > 0
    assert k["transcription"]["goodput"]["slo_ms"]["e2e"] == 10000
    speech_slo = k["speech"]["goodput"]["slo_ms"]
    assert speech_slo["ttft"] == 5000 and speech_slo["itl"] is None, "ITL does not fit speech: not applied"
    assert k["speech"]["goodput"]["fraction"] == 1.0
