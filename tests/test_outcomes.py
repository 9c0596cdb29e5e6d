"""Every request that did not succeed counts against the run (analysis/outcomes.py, issue 29).

Hand-made records of a server that answers 10 requests in 100 ms and then hangs: 5 requests are
still unanswered when the grace (2 s) runs out, 2 time out waiting for a first token.
"""

from __future__ import annotations

from array import array

import pytest

from surgelab.analysis.summary import RunInfo, summarize
from surgelab.metrics.record import CUT_SHORT, Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta
from surgelab.scenario.loader import build_scenario

MS, S = 1_000_000, 1_000_000_000
GRACE = "no answer by the end of the grace period (2s after the planned end, load.grace)"
INFO = RunInfo(stop_reason="completed", stopped_at_s=10.0, wall_s=12.0)


def _scenario(**extra):
    return build_scenario({"target": {"url": "http://127.0.0.1:1/v1", "model": "m"},
                           "load": {"rate": 2, "duration": "10s", "grace": "2s"}, **extra})  # fmt: skip


def _ok(intended: int) -> Outcome:
    times = [intended + 100 * MS, intended + 110 * MS]
    return Outcome(state=State.OK, sent_ns=intended, first_token_ns=times[0], end_ns=times[-1], output_tokens=2,
                   usage_source="server", http_status=200, token_ns=array("q", times))  # fmt: skip


def _records(cut_short: int = 0):
    buffer, n = RecordBuffer(), 0

    def add(intended: int, out: Outcome) -> None:
        nonlocal n
        buffer.add(RecordMeta(id=n, intended_ns=intended, warmup=False), out)
        n += 1

    for k in range(10):
        add(k * 400 * MS, _ok(k * 400 * MS))
    for k in range(2):  # waited 1 s for a first token that never came
        intended = 4 * S + k * 400 * MS
        out = Outcome(sent_ns=intended)
        out.fail(State.TIMEOUT, "no first token within 1s (first_token timeout)", intended + S)
        add(intended, out)
    for k in range(5):  # still waiting at the planned end (10 s) + the grace (2 s)
        intended = 6 * S + k * 800 * MS
        add(intended, Outcome(state=State.CANCELLED, sent_ns=intended, end_ns=12 * S, error=GRACE))
    for k in range(cut_short):  # a second Ctrl-C: given no time at all
        intended = 9 * S + k * MS
        add(intended, Outcome(state=State.CANCELLED, sent_ns=intended, end_ns=intended + MS, error=CUT_SHORT))
    return buffer.take()


def test_unanswered_and_timed_out_requests_count_in_the_error_rate_goodput_and_errors():
    s = summarize(_records(), _scenario(slo={"e2e": "500ms"}), INFO)
    req = s["requests"]
    assert (req["ok"], req["failed"], req["cancelled"], req["unanswered"], req["unsuccessful"]) == (10, 2, 5, 5, 7)
    assert req["error_rate"] == pytest.approx(7 / 17), "was 2 / 12: the hung requests were left out"
    assert s["goodput"]["fraction"] == pytest.approx(10 / 17)
    assert s["errors"][0] == {"state": "cancelled", "http_status": None, "message": GRACE, "count": 5,
                              "pattern": "no answer by the end of the grace period (#s after the planned end, load.grace)",
                              "first_s": 12.0, "last_s": 12.0}  # all five given up on when the grace ran out  # fmt: skip
    assert [(e["state"], e["count"]) for e in s["errors"]] == [("cancelled", 5), ("timeout", 2)]
    assert s["thresholds"][0]["expr"] == "error_rate < 10%" and not s["thresholds_passed"]


def test_a_request_given_up_on_counts_in_the_latencies_as_the_time_it_waited():
    s = summarize(_records(), _scenario(), INFO)
    e2e, ttft = s["latency_ms"]["e2e"], s["latency_ms"]["ttft"]
    # 10 answers in 110 ms, 2 timeouts after 1 s, 5 waits until 12 s (from 6.0, 6.8, 7.6, 8.4, 9.2 s)
    assert (e2e["count"], e2e["censored"]) == (17, 7)
    assert e2e["max"] == pytest.approx(6000.0) and e2e["p90"] > 2000, "the P99 cannot look good any more"
    assert (ttft["count"], ttft["censored"]) == (17, 7) and ttft["min"] == pytest.approx(100.0)
    assert s["latency_ms"]["itl"]["count"] == 10 and s["latency_ms"]["tpot"]["count"] == 10  # answers only
    p99 = summarize(_records(), _scenario(thresholds=["p99(e2e) < 1s"]), INFO)["thresholds"][0]
    assert not p99["passed"] and p99["observed"] > 5.0


def test_requests_cut_short_by_the_user_count_neither_way():
    s = summarize(_records(cut_short=3), _scenario(), INFO)
    req = s["requests"]
    assert (req["cancelled"], req["unanswered"], req["cut_short"]) == (8, 5, 3)
    assert req["error_rate"] == pytest.approx(7 / 17)
    assert s["latency_ms"]["e2e"]["count"] == 17


def test_the_first_line_names_the_cause():
    s = summarize(_records(), _scenario(), INFO)
    assert s["headline"].startswith(
        "FAIL: 5 of 17 requests never answered (cancelled when the grace ran out, 2s after the planned end; load.grace)"
    )
    assert "2 × timeout: no first token within 1s" in s["headline"]
    assert s["headline"].endswith("error_rate < 10% failed (observed 41.176%)")
    loose = summarize(_records(), _scenario(thresholds=["error_rate < 50%"]), INFO)
    assert loose["thresholds_passed"] and loose["headline"].startswith("WARNING: 5 of 17 requests never answered")
    fine = summarize(_records().slice(0, 10), _scenario(), INFO)
    assert fine["headline"] is None
