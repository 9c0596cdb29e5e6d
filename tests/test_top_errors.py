"""summary.json's ``errors``: the most frequent failures in the target's own words, with their HTTP status."""

from __future__ import annotations

import json

import pyarrow as pa

from surgelab.analysis.columns import ColumnSource, labels
from surgelab.analysis.errors import readable, top_errors
from surgelab.telemetry.diagnose import diagnose

BODY_401 = json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})


def _records() -> pa.Table:
    rows = (
        [("http_error", 401, f"HTTP 401: {BODY_401}")] * 7
        + [("http_error", 503, "HTTP 503: upstream   overloaded\n")] * 2
        + [("timeout", None, "no answer within 30s")] * 3
        + [("ok", 200, None)] * 5
        + [("cancelled", None, "cancelled at stop")]
    )
    state, status, error = zip(*rows)
    return pa.table({"state": list(state), "http_status": pa.array(status, pa.int16()), "error": list(error)})


def test_failures_are_grouped_by_state_status_and_readable_message():
    source = ColumnSource(_records())
    top = top_errors(source, labels(source, "state"))
    assert [{k: e[k] for k in ("state", "http_status", "message", "count")} for e in top] == [
        {"state": "http_error", "http_status": 401, "message": "HTTP 401: Incorrect API key provided", "count": 7},
        {"state": "timeout", "http_status": None, "message": "no answer within 30s", "count": 3},
        {"state": "http_error", "http_status": 503, "message": "HTTP 503: upstream overloaded", "count": 2},
    ]  # cancelled is not a failure; successes never appear
    assert [e["pattern"] for e in top] == ["HTTP 401: Incorrect API key provided", "no answer within #s", "HTTP 503: upstream overloaded"]
    assert top[0]["first_s"] is None  # records without times: no first and last
    assert readable("HTTP 500: not json {") == "HTTP 500: not json {"


def test_the_hint_names_the_message_not_only_the_category():
    source = ColumnSource(_records())
    summary = {
        "schedule_lag_ms": {"p99": 1.0}, "validity": {"valid": True, "max_lag_p99_ms": 50.0},
        "requests": {"failed": 12, "by_state": {"http_error": 9, "timeout": 3, "connection_error": 0, "protocol_error": 0}},
        "latency_ms": {"ttft": {"p50": 10.0, "p99": 12.0}}, "concurrency": {}, "errors": top_errors(source, labels(source, "state")),
    }  # fmt: skip
    [hint] = diagnose(summary)
    assert hint == "12 failed requests, mostly http_error (9): 7 × HTTP 401: Incorrect API key provided"


def test_messages_that_differ_only_in_numbers_are_one_failure_with_its_first_and_last_time():
    """73 × "HTTP 500: injected fault (request 17)" with 73 request ids were 73 groups of one: the top five
    named five requests and hid the count; the page could not say when the failures began and ended."""
    n = 73
    table = pa.table({
        "state": ["http_error"] * n + ["ok"] * 4 + ["timeout"] * 2,
        "http_status": pa.array([500] * n + [200] * 4 + [None] * 2, pa.int16()),
        "error": [f"HTTP 500: injected fault (request {i}, after {i * 1.5:.1f} ms)" for i in range(n)] + [None] * 4
                 + ["no answer within 30s", "no answer within 10s"],
        "intended_ns": pa.array([int((2 + 0.1 * i) * 1e9) for i in range(n + 6)], pa.int64()),
        "end_ns": pa.array([int((2.05 + 0.1 * i) * 1e9) for i in range(n + 4)] + [None, None], pa.int64()),
    })  # fmt: skip
    source = ColumnSource(table)
    first, second = top_errors(source, labels(source, "state"))
    assert first["count"] == n and first["http_status"] == 500
    assert first["pattern"] == "HTTP 500: injected fault (request #, after # ms)"
    assert first["message"] == "HTTP 500: injected fault (request 0, after 0.0 ms)"  # one real example
    assert (first["first_s"], first["last_s"]) == (2.05, round(2.05 + 0.1 * (n - 1), 3))
    # never answered: their intended send time, and "30s" and "10s" are one cause
    assert second["count"] == 2 and second["first_s"] == round(2 + 0.1 * (n + 4), 3)
