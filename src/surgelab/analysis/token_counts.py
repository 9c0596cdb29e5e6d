"""Streams without the server's token counts: when TPOT and ITL stop agreeing, say why.

TPOT divides a response's streaming time by its output tokens − 1, ITL by its chunks − 1:
they agree when a chunk carries one token. A server that sends no ``usage`` leaves the output
tokens to surgelab's own tokenizer, and then the two can differ several times over without a
word (6× was seen): either the server packs several tokens into a chunk (ITL is then per chunk,
TPOT per token), or the tokenizer counts the text differently from the server's (TPOT is then
off). Either way the reader must be told which figures rest on a guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from surgelab.analysis.summary import RecordColumns

__all__ = ["MIN_UNCOUNTED", "DISAGREEMENT", "uncounted_tokens_warning"]

MIN_UNCOUNTED = 3  # responses without server counts needed before saying anything
DISAGREEMENT = 1.5  # tokens per chunk this far from one (either way) is worth a warning


def uncounted_tokens_warning(
    c: RecordColumns, ok: np.ndarray, latency_ms: dict[str, Any], tokenizer: str
) -> str | None:
    """A sentence when the streamed successes without server token counts carry, in the median, not one
    token per chunk as surgelab counted them; ``latency_ms`` is the summary's, whose TPOT and ITL it quotes."""
    gaps = c.gaps.lengths
    streamed = ok & (gaps >= 1) & (c.output > 1)
    uncounted = streamed & (c.usage_source != "server")
    n = int(uncounted.sum())
    if n < MIN_UNCOUNTED:
        return None
    per_chunk = float(np.median((c.output[uncounted] - 1) / gaps[uncounted]))
    if 1 / DISAGREEMENT < per_chunk < DISAGREEMENT:
        return None
    tpot, itl = latency_ms["tpot"]["p50"], latency_ms["itl"]["p50"]
    apart = (
        f", so TPOT P50 {tpot:.1f} ms and ITL P50 {itl:.1f} ms disagree {max(itl / tpot, tpot / itl):.1f}×"
        if tpot and itl
        else ""
    )
    return (
        f"{n} of {int(streamed.sum())} streamed responses came without token counts from the server (no usage): "
        f"surgelab counted their output tokens with its {tokenizer} tokenizer, {per_chunk:.1f} tokens per streamed "
        f"chunk{apart} — the server packs several tokens into a chunk, or counts tokens differently; have it send "
        "usage (stream_options.include_usage) or give its tokenizer (tokenizer: PATH) before trusting TPOT"
    )
