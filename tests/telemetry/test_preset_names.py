"""The vllm preset against what a real vLLM 0.32 server exposes (fixtures/vllm-0.32.prom, captured
from ci/vllm's server; tests/realengine checks the same against a live one)."""

from __future__ import annotations

from pathlib import Path

from surgelab.telemetry.presets import PRESETS, detect_preset
from surgelab.telemetry.samples import parse_exposition
from surgelab.telemetry.scrape import ScrapeSource, _Filter

REAL_VLLM = Path(__file__).parent / "fixtures" / "vllm-0.32.prom"


def test_every_vllm_preset_series_is_exposed_by_real_vllm() -> None:
    families = {f.name for f in parse_exposition(REAL_VLLM.read_text())}
    preset = PRESETS["vllm"]
    assert detect_preset(families) is preset
    assert [s for s in preset.series if s not in families] == []
    for role, names in preset.roles.items():
        assert any(n in families for n in names.split("|")), role
    # V1 dropped these V0 names; the preset keeps them only as legacy names
    assert {"vllm:num_requests_swapped", "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"} <= set(
        preset.legacy
    )
    assert not families & set(preset.legacy)


def test_a_vllm_scrape_keeps_the_v1_tpot_histogram_and_legacy_names() -> None:
    text = REAL_VLLM.read_text() + (
        "# TYPE vllm:time_per_output_token_seconds histogram\n"
        'vllm:time_per_output_token_seconds_bucket{le="+Inf"} 3.0\n'
        "vllm:time_per_output_token_seconds_count 3.0\n"
        "vllm:time_per_output_token_seconds_sum 0.1\n"
    )
    families = parse_exposition(text)
    for preset in ("vllm", "auto"):
        kept = {f.name for f in _Filter(ScrapeSource("s", "http://127.0.0.1:1/metrics", preset)).keeps(families)}
        assert "vllm:request_time_per_output_token_seconds" in kept
        assert "vllm:time_per_output_token_seconds" in kept  # as surgelab serve and V0 servers name it
        assert "vllm:request_params_n" not in kept
