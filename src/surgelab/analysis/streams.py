"""Streams that did not stream: responses whose every token reached the client in one burst.

A server or a proxy that holds a streamed response back (nginx's ``proxy_buffering``, a
front end starved of CPU) delivers the headers, the first token and all the rest together.
The client's TTFT of such a response is its whole response time, and its inter-token gaps
are microseconds that no engine produces: counted here so a report can say why TTFT and
E2E coincide, instead of leaving a reader to blame the engine's prefill.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from surgelab.analysis.summary import RecordColumns

__all__ = ["BURST_GAP_S", "MIN_GAPS", "buffered_streams", "buffering_warnings"]

BURST_GAP_S = 1e-4  # a mean gap under 0.1 ms a token: faster than any engine decodes, so held back and sent at once
MIN_GAPS = 3  # a response of fewer tokens says too little about how it was delivered
MIN_BURSTS, BURST_SHARE = 3, 0.05  # bursts worth a warning: a few, and a share of the streamed responses
MIN_HELD_MS = 20.0  # ... that waited this long: a server with nothing to wait for (a 2 ms answer) hides nothing


def buffered_streams(c: RecordColumns, rows: np.ndarray) -> dict[str, Any]:
    """How many of the chosen (ok) responses had tokens to stream, and how many came in one burst."""
    gaps = c.gaps.lengths
    streamed = rows & (gaps >= MIN_GAPS)
    span = c.end - c.first_token  # the first token to the end of the response
    with np.errstate(invalid="ignore", divide="ignore"):
        burst = streamed & (span / np.maximum(gaps, 1) < BURST_GAP_S)
    n, m = int(burst.sum()), int(streamed.sum())
    ttft = (c.first_token - c.intended)[burst] * 1000  # as the summary's TTFT: from the intended send
    return {
        "streamed": m,
        "buffered": n,
        "buffered_fraction": n / m if m else 0.0,
        "buffered_ttft_ms_p50": float(np.median(ttft)) if n else None,
        "buffered_span_ms_max": float(span[burst].max() * 1000) if n else None,
    }


def buffering_warnings(streams: dict[str, Any]) -> list[str]:
    """A sentence when enough streams came in one burst that TTFT reads as the whole response time."""
    n, m = streams["buffered"], streams["streamed"]
    if n < MIN_BURSTS or streams["buffered_fraction"] < BURST_SHARE or streams["buffered_ttft_ms_p50"] < MIN_HELD_MS:
        return []
    return [
        f"{n} of {m} streamed responses ({streams['buffered_fraction']:.0%}) arrived in one burst, every token within "
        f"{streams['buffered_span_ms_max']:.1f} ms after a TTFT P50 of {streams['buffered_ttft_ms_p50']:.0f} ms: the "
        "server or a proxy held them back (a buffering proxy such as nginx's proxy_buffering, or a front end short of "
        "CPU), so their TTFT is their whole response time, not the engine's"
    ]
