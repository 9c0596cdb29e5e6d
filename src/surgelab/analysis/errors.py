"""The most frequent failures, by what the target or the network said: state, HTTP status, message.

"12 failed, mostly http_error" sends the reader to the Parquet records; "12 × HTTP 401: invalid
api key" does not. Messages are grouped by their first ``MESSAGE_CHARS`` characters (the
record keeps 500), so a request id at the end of a body does not split a group.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from surgelab.analysis.columns import ColumnSource, Labels, labels, plain, seconds
from surgelab.metrics.record import FAILED_STATES

__all__ = ["MESSAGE_CHARS", "TOP_ERRORS", "masked", "readable", "top_errors"]

MESSAGE_CHARS = 200
TOP_ERRORS = 5


def top_errors(
    source: ColumnSource, state: Labels, rows: np.ndarray | None = None, limit: int = TOP_ERRORS
) -> list[dict[str, Any]]:
    """Requests that did not succeed (``rows``; the failed states when not given) grouped by (state,
    HTTP status, message with its numbers masked), the largest groups first: unanswered, dropped and
    lost ones with their cause, one example message, and when the first and the last of them ended."""
    failed = state.isin([s.value for s in FAILED_STATES]) if rows is None else rows
    if not failed.any():
        return []
    message = labels(source, "error")
    status = source.numpy("http_status", plain) if source.has("http_status") else None
    rows = np.flatnonzero(failed)
    when = _ended_s(source, rows)
    groups: dict[tuple[str, int | None, str], dict[str, Any]] = {}
    codes = message.codes[rows]
    states = state.codes[rows]
    statuses = status[rows] if status is not None else [None] * rows.size
    for s, code, http, t in zip(states.tolist(), codes.tolist(), list(statuses), when.tolist()):
        text = message.values[code]
        text = "" if text == "None" else readable(text)[:MESSAGE_CHARS]
        http = None if http is None or (isinstance(http, float) and np.isnan(http)) else int(http)
        key = (state.values[s], http, masked(text))
        group = groups.setdefault(key, {"message": text, "count": 0, "first_s": None, "last_s": None})
        group["count"] += 1
        if t == t:  # not NaN
            group["first_s"] = t if group["first_s"] is None else min(group["first_s"], t)
            group["last_s"] = t if group["last_s"] is None else max(group["last_s"], t)
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1]["count"], kv[0][0], kv[0][2]))[:limit]
    return [{"state": s, "http_status": http, "message": g["message"], "pattern": pattern, "count": g["count"],
             "first_s": _round(g["first_s"]), "last_s": _round(g["last_s"])}
            for (s, http, pattern), g in ranked]  # fmt: skip


def masked(text: str) -> str:
    """``HTTP 500: fault in request 1234 after 2.5s`` → ``HTTP 500: fault in request # after #s``: messages
    that differ only in an id, a count or a time are one failure (the HTTP status stays)."""
    head = re.match(r"HTTP \d{3}: ?", text)
    cut = head.end() if head else 0
    return text[:cut] + _NUMBER.sub("#", text[cut:])


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _ended_s(source: ColumnSource, rows: np.ndarray) -> np.ndarray:
    """Seconds into the run each of ``rows`` ended (its intended send when it never did); NaN without times."""
    out = np.full(rows.size, np.nan)
    for column in ("intended_ns", "end_ns"):  # the end wins where there is one
        if source.has(column):
            t = source.column(column, seconds)[rows]
            out = np.where(np.isfinite(t), t, out)
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


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
