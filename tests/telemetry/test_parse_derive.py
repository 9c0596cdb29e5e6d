"""Parsing real exposition formats, and turning samples into rates, percentiles and gaps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from surgelab.telemetry.derive import histogram_quantile, increase, summarize_telemetry
from surgelab.telemetry.presets import detect_preset
from surgelab.telemetry.samples import SampleBuffer, label_text, parse_exposition

FIXTURES = Path(__file__).parent / "fixtures"


def _families(name: str):
    return parse_exposition((FIXTURES / name).read_text())


@pytest.mark.parametrize(
    ("fixture", "preset", "family"),
    [("vllm.prom", "vllm", "vllm:num_requests_running"), ("tgi.prom", "tgi", "tgi_queue_size"),
     ("dcgm.prom", "dcgm", "DCGM_FI_DEV_GPU_UTIL")],
)  # fmt: skip
def test_documented_formats_parse_and_are_recognised(fixture: str, preset: str, family: str) -> None:
    families = _families(fixture)
    names = {f.name for f in families}
    assert family in names
    assert detect_preset(names).name == preset


def test_counters_lose_total_in_family_names_but_keep_it_in_samples() -> None:
    prompt = next(f for f in _families("vllm.prom") if f.name == "vllm:prompt_tokens")
    assert prompt.kind == "counter"
    assert prompt.samples[0][0] == "vllm:prompt_tokens_total"


def test_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not Prometheus text format"):
        parse_exposition('metric{label="unterminated 1\n')


def test_increase_counts_across_a_reset() -> None:
    assert increase(np.array([10.0, 15.0, 3.0, 8.0])) == pytest.approx(5 + 3 + 5)
    assert increase(np.array([7.0])) == 0.0


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    bounds = np.array([0.1, 0.25, 0.5, 1.0, np.inf])
    counts = np.array([40.0, 90.0, 150.0, 190.0, 200.0])
    # rank 100 of 200 lies in (0.25, 0.5]: 10 of its 60 → 0.25 + 0.25 × 10/60
    assert histogram_quantile(0.5, bounds, counts) == pytest.approx(0.25 + 0.25 * 10 / 60)
    assert histogram_quantile(0.1, bounds, counts) == pytest.approx(0.1 * 20 / 40)
    assert histogram_quantile(0.99, bounds, counts) == pytest.approx(1.0)  # the +Inf bucket: its lower bound
    assert histogram_quantile(0.5, bounds, np.zeros(5)) is None


def _scrapes(texts: list[str], source: str = "s", step_s: float = 1.0):
    buffer = SampleBuffer()
    for k, text in enumerate(texts):
        t = int(k * step_s * 1e9)
        for family in parse_exposition(text):
            for name, labels, value in family.samples:
                buffer.add(t, source, name, label_text(labels), value, family.kind)
        buffer.add(t, source, "up", "", 1.0, "gauge")
    return buffer.take()


def test_summary_of_two_scrapes_gives_gauges_rates_and_percentiles() -> None:
    first = (FIXTURES / "vllm.prom").read_text()
    second = (
        first.replace("vllm:num_requests_running{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 12.0",
                      "vllm:num_requests_running{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 16.0")
        .replace("} 45000.0", "} 47000.0")
        .replace('le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 40.0', 'le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 140.0')
        .replace('le="0.25",model_name="meta-llama/Llama-3.1-8B-Instruct"} 90.0', 'le="0.25",model_name="meta-llama/Llama-3.1-8B-Instruct"} 190.0')
        .replace('le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 150.0', 'le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 250.0')
        .replace('le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 190.0', 'le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 290.0')
        .replace('le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 200.0', 'le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 300.0')
    )  # fmt: skip
    block = summarize_telemetry(_scrapes([first, second], step_s=2.0), 0.0, 10.0)
    series = block["series"]
    running = series["s/vllm:num_requests_running"]
    assert (running["mean"], running["max"], running["last"]) == (14.0, 16.0, 16.0)
    assert series["s/vllm:generation_tokens_total:rate"]["rate_per_s"] == pytest.approx(2000 / 2.0)
    ttft = next(v for k, v in series.items() if k.startswith("s/vllm:time_to_first_token_seconds{"))
    assert ttft["count"] == 100.0  # all 100 new requests landed in the first bucket
    assert ttft["p50"] == pytest.approx(0.05)
    assert block["roles"]["running"]["max"] == 16.0
    assert block["roles"]["kv_usage"]["max"] == pytest.approx(0.97)
    assert block["sources"]["s"]["preset"] == "vllm"


def test_failed_scrapes_become_gaps_with_their_error() -> None:
    buffer = SampleBuffer()
    for k, ok in enumerate([1, 1, 0, 0, 1, 0]):
        buffer.add(k * 1_000_000_000, "t", "up", "" if ok else "error=timeout after 2s", float(ok), "gauge")
    sources = summarize_telemetry(buffer.take(), 0, 10)["sources"]["t"]
    assert (sources["scrapes"], sources["failed"]) == (6, 3)
    assert sources["gaps"] == [
        {"from_s": 2.0, "to_s": 4.0, "error": "timeout after 2s"},
        {"from_s": 5.0, "to_s": None, "error": "timeout after 2s"},
    ]
