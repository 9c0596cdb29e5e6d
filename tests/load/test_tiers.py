"""A mix of classes in two tiers with different SLOs on the same latency: results per class and
per tier, and each tier's SLO applied to its own requests only."""

from __future__ import annotations

import pytest
from scipy import stats

from surgelab.metrics.store import read_records
from surgelab.scenario.loader import ScenarioError

MIX = {
    "prompt_tokens": 12,
    "output_tokens": 3,
    "mix": [
        {"name": "chat", "weight": 3, "tier": "paid"},
        {"name": "summarise", "weight": 1, "tier": "free", "prompt_tokens": 40, "output_tokens": 6},
    ],
}
TIERS = {"paid": {"slo": {"ttft": "150ms"}}, "free": {"slo": {"ttft": "400ms"}}}


def test_per_class_and_per_tier_results_with_each_tiers_slo(timed_server, scenario_for, run, tmp_path):
    s = scenario_for(timed_server.url, seed=9, load={"rate": 20, "duration": "2s"}, workload=MIX, tiers=TIERS,
                     slo={"e2e": "10s"})  # fmt: skip
    result = run(s, tmp_path / "run")
    summary, table = result.summary, read_records(result.run_dir)
    rows = table.to_pylist()
    assert {(r["request_class"], r["tier"]) for r in rows} == {("chat", "paid"), ("summarise", "free")}
    n, chat = len(rows), sum(r["request_class"] == "chat" for r in rows)
    assert stats.binom.ppf(1e-4, n, 0.75) <= chat <= stats.binom.ppf(1 - 1e-4, n, 0.75)
    by_class, by_tier = summary["by_class"], summary["by_tier"]
    assert set(by_class) == {"chat", "summarise"} and set(by_tier) == {"paid", "free"}
    assert by_class["chat"]["requests"]["ok"] == chat == by_tier["paid"]["requests"]["ok"]
    assert by_class["summarise"]["requests"]["ok"] == n - chat == by_tier["free"]["requests"]["ok"]
    assert by_class["summarise"]["latency_ms"]["e2e"]["p50"] > by_class["chat"]["latency_ms"]["e2e"]["p50"] + 50
    # TTFT is the scripted 200 ms for everyone: paid (150 ms) fails, free (400 ms) passes
    assert by_tier["paid"]["goodput"]["fraction"] == 0 and by_tier["free"]["goodput"]["fraction"] == 1
    assert by_class["chat"]["goodput"]["fraction"] == 0 and by_class["summarise"]["goodput"]["fraction"] == 1
    ok_in_window = by_tier["paid"]["throughput"]["requests_per_s"] + by_tier["free"]["throughput"]["requests_per_s"]
    assert summary["goodput"]["requests_per_s"] == pytest.approx(by_tier["free"]["throughput"]["requests_per_s"])
    assert summary["throughput"]["requests_per_s"] == pytest.approx(ok_in_window)
    # each tier reports the objectives it was judged by (its own, the scenario's where it sets none)
    assert by_tier["paid"]["goodput"]["slo_ms"] == {"ttft": 150, "itl": None, "tpot": None, "e2e": 10_000}
    assert by_tier["free"]["goodput"]["slo_ms"] == {"ttft": 400, "itl": None, "tpot": None, "e2e": 10_000}


def test_a_class_naming_an_unknown_tier_is_refused(scenario_for):
    with pytest.raises(ScenarioError, match="request class 'chat' names tier 'gold', which is not in tiers"):
        scenario_for("http://127.0.0.1:9/v1", workload={"mix": [{"name": "chat", "tier": "gold"}]})
