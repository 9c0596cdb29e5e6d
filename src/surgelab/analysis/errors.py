"""The most frequent failures, by what the target or the network said: state, HTTP status, message.

"12 failed, mostly http_error" sends the reader to the Parquet records; "12 × HTTP 401: invalid
api key" does not. Messages are grouped by their first ``MESSAGE_CHARS`` characters (the
record keeps 500), so a request id at the end of a body does not split a group.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import numpy as np

from surgelab.analysis.columns import ColumnSource, Labels, labels, plain
from surgelab.metrics.record import FAILED_STATES

__all__ = ["MESSAGE_CHARS", "TOP_ERRORS", "readable", "top_errors"]

MESSAGE_CHARS = 200
TOP_ERRORS = 5


def top_errors(
    source: ColumnSource, state: Labels, rows: np.ndarray | None = None, limit: int = TOP_ERRORS
) -> list[dict[str, Any]]:
    """Requests that did not succeed (``rows``; the failed states when not given) grouped by (state,
    HTTP status, message), the largest groups first: unanswered, dropped and lost ones with their cause."""
    failed = state.isin([s.value for s in FAILED_STATES]) if rows is None else rows
    if not failed.any():
        return []
    message = labels(source, "error")
    status = source.numpy("http_status", plain) if source.has("http_status") else None
    groups: Counter[tuple[str, int | None, str]] = Counter()
    rows = np.flatnonzero(failed)
    codes = message.codes[rows]
    states = state.codes[rows]
    statuses = status[rows] if status is not None else [None] * rows.size
    for s, code, http in zip(states.tolist(), codes.tolist(), list(statuses)):
        text = message.values[code]
        text = "" if text == "None" else readable(text)[:MESSAGE_CHARS]
        http = None if http is None or (isinstance(http, float) and np.isnan(http)) else int(http)
        groups[(state.values[s], http, text)] += 1
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][2]))[:limit]
    return [{"state": s, "http_status": http, "message": text, "count": n} for (s, http, text), n in ranked]


def readable(text: str) -> str:
    """``HTTP 401: {"error": {"message": "bad key", ...}}`` → ``HTTP 401: bad key``; whitespace collapsed.

    The JSON error bodies of OpenAI-compatible servers (``error.message``, ``message``, ``detail``)
    say in a few words what the whole body says in two hundred characters.
    """
    text = " ".join(text.split())
    m = re.match(r"(HTTP \d{3}): (\{.*\})$", text)
    if m:
        try:
            body = json.loads(m.group(2))
        except ValueError:
            return text
        said = body.get("error", body) if isinstance(body, dict) else None
        if isinstance(said, dict):
            said = said.get("message") or said.get("detail")
        if isinstance(said, str) and said.strip():
            return f"{m.group(1)}: {' '.join(said.split())}"
    return text
