"""A hung server never passes (issue 29): what it leaves unanswered counts against the run.

Seen before: against ``surgelab serve --stall-after``, 11 of 15 requests never answered and the
run said "error rate 0.00 %", "valid", and exited 0 — the cancelled requests were left out of
the error rate, the latencies and goodput.
"""

from __future__ import annotations

import json

from surgelab.server.process import ServerProcess

DURATION_S, GRACE_S = 8, 1


def test_a_server_that_stalls_mid_run_fails_it_with_the_cause_on_the_first_line(cli, tmp_path) -> None:
    out = tmp_path / "run"
    # the stall timer starts when the server listens: the pre-flight (about 1 s after) and the first
    # seconds of load are answered, the second half or more of the run is not
    with ServerProcess(["--stall-after", "5s"]) as server:
        result = cli("run", "--url", server.base_url, "--rate", "2", "--arrival", "constant",
                     "--duration", f"{DURATION_S}s", "--grace", f"{GRACE_S}s", "--prompt-tokens", "16",
                     "--max-tokens", "8", "--out", str(out), timeout=60)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.elapsed_s < DURATION_S + GRACE_S + 5, f"the run took {result.elapsed_s:.1f}s"
    summary = json.loads((out / "summary.json").read_text())
    req = summary["requests"]
    assert 0 < req["unanswered"] == req["cancelled"] < req["measured"], req
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"FAIL: {req['unanswered']} of {req['measured']} requests never answered"), result.stdout
    assert "grace ran out" in first and "error_rate < 10% failed" in first
    assert req["error_rate"] == req["unanswered"] / req["measured"]
    assert summary["goodput"]["fraction"] == req["ok"] / req["measured"]
    assert summary["errors"][0]["state"] == "cancelled" and summary["errors"][0]["count"] == req["unanswered"]
    e2e = summary["latency_ms"]["e2e"]
    assert e2e["count"] == req["measured"] and e2e["censored"] == req["unanswered"]
    assert e2e["max"] >= GRACE_S * 1000, "the slowest waited at least the grace, and the P99 shows it"
    assert "never answered" in result.stderr  # said on stderr too, for --quiet
