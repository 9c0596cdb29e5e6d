"""Compressed and held-back streams through nginx, a proxy many inference endpoints sit behind.

nginx gzipping ``text/event-stream`` with ``proxy_buffering off`` flushes the compressor at
every upstream chunk: a compressed stream that still streams, whose first read is the gzip
header alone (which the client once took for the end of the body: every request a
``protocol_error``). With nginx's default ``proxy_buffering on`` the compressor holds the
stream until the answer ends, and each stream reaches the client in one burst after the
script's whole answer time: the summary's ``streaming`` block counts those responses and a
warning says why TTFT equals the response time.
"""

from __future__ import annotations

import pytest

from .process import post
from .stacks import STACKS, Settings

NGINX = next(stack for stack in STACKS if stack.name == "nginx")
TTFT_S, ITL_S, TOKENS = 0.03, 0.01, 12
GZIP = {"Accept-Encoding": "gzip"}
ANSWER_MS = (TTFT_S + (TOKENS - 1) * ITL_S) * 1000


@pytest.mark.parametrize("held", [False, True], ids=["gzip-streamed", "gzip-held"])
def test_gzipped_streams_stream_and_held_ones_are_named(held, servers, scenario_for, run, reconciled, tmp_path):
    server = servers.get(NGINX, Settings(TTFT_S, ITL_S, TOKENS, gzip_streams=True, proxy_buffering=held))
    body = {"model": "interop", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    assert post(server.port, "/v1/chat/completions", body, GZIP).getheader("Content-Encoding") == "gzip"
    scenario = scenario_for(
        server.url,
        model="interop",
        target={"stream": True, "headers": GZIP, "timeouts": {"first_token": 2, "total": 5}},
        load={"concurrency": 2, "duration": 1.0, "grace": 3},
        workload={"prompt_tokens": 16, "output_tokens": TOKENS},
        preflight=False,
    )
    result = run(scenario, tmp_path / "run")
    rows = reconciled(result.summary, result.run_dir).to_pylist()
    summary, streams = result.summary, result.summary["streaming"]
    assert {r["state"] for r in rows} == {"ok"} and len(rows) >= 6, {r["error"] for r in rows}
    assert all(len(r["itl_us"]) + 1 == r["output_tokens"] == TOKENS for r in rows)  # every token its own chunk
    assert streams["streamed"] == len(rows), streams
    said = [w for w in summary["warnings"] if "one burst" in w]
    if not held:  # compressed, still a stream: the script's timing, and nothing to say
        assert streams["buffered"] == 0 and not said, streams
        assert abs(summary["latency_ms"]["ttft"]["p50"] - TTFT_S * 1000) < 15, summary["latency_ms"]["ttft"]
        assert abs(summary["latency_ms"]["itl"]["p50"] - ITL_S * 1000) < 5, summary["latency_ms"]["itl"]
        return
    assert streams["buffered"] == len(rows) and streams["buffered_fraction"] == 1.0, streams
    assert streams["buffered_span_ms_max"] < TOKENS * 0.1, streams  # every token together
    # what was held back: TTFT is the whole answer's time, and the warning puts it in words
    assert ANSWER_MS * 0.95 < streams["buffered_ttft_ms_p50"] < ANSWER_MS * 1.5, streams
    assert streams["buffered_ttft_ms_p50"] == pytest.approx(summary["latency_ms"]["ttft"]["p50"], rel=0.05)
    assert len(said) == 1 and f"{len(rows)} of {len(rows)} streamed responses (100%)" in said[0], summary["warnings"]
