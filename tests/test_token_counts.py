"""Without the server's token counts, TPOT and ITL can disagree several times over: the summary says why (issue 29).

Hand-made records of a server that streams 24 tokens in 5 chunks of about 5 tokens, 50 ms apart:
ITL (per chunk) is 50 ms, TPOT (per token) about 8.7 ms.
"""

from __future__ import annotations

from array import array

from rich.console import Console

from surgelab.analysis.summary import RunInfo, summarize
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta
from surgelab.report.terminal import summary_table
from surgelab.scenario.loader import build_scenario

MS = 1_000_000


def _records(usage_source: str, chunks: int = 5, tokens: int = 24):
    buffer = RecordBuffer()
    for k in range(20):
        intended = k * 100 * MS
        times = [intended + 20 * MS + i * 50 * MS for i in range(chunks)]
        out = Outcome(state=State.OK, sent_ns=intended, first_token_ns=times[0], end_ns=times[-1], output_tokens=tokens,
                      usage_source=usage_source, http_status=200, token_ns=array("q", times))  # fmt: skip
        buffer.add(RecordMeta(id=k, intended_ns=intended, warmup=False), out)
    return buffer.take()


def _summary(table):
    scenario = build_scenario(
        {"target": {"url": "http://127.0.0.1:1/v1", "model": "m"}, "load": {"rate": 10, "duration": "2s"}}
    )
    return summarize(table, scenario, RunInfo(stop_reason="completed", stopped_at_s=2.0))


def test_tokens_counted_by_surgelab_that_disagree_with_the_chunks_are_warned_of_with_the_cause():
    s = _summary(_records("counted"))
    assert s["latency_ms"]["itl"]["p50"] == 50.0 and round(s["latency_ms"]["tpot"]["p50"], 1) == 8.7
    [warning] = [w for w in s["warnings"] if "without token counts" in w]
    assert warning.startswith("20 of 20 streamed responses came without token counts from the server (no usage)")
    assert "5.8 tokens per streamed chunk, so TPOT P50 8.7 ms and ITL P50 50.0 ms disagree 5.8×" in warning
    console = Console(record=True, width=400)
    console.print(summary_table(s))
    assert "warning: 20 of 20 streamed responses came without token counts" in console.export_text()


def test_no_warning_when_the_server_counted_or_a_chunk_is_a_token():
    assert not any("token counts" in w for w in _summary(_records("server"))["warnings"])
    assert not any("token counts" in w for w in _summary(_records("counted", chunks=24))["warnings"])
