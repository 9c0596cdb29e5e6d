"""One judgement per group: on a run with one kind, one class, one tier and one phase, every
breakdown of summary.json says what the overall figures say (``analysis.slo.goodput``).

The run is overloaded on purpose — timeouts, drops at ``max_in_flight``, a warm-up — where two
ways of counting would part: requests that did not succeed count against the fraction, warm-up
successes that end in the window count in the rate.
"""

from __future__ import annotations

import pytest

from surgelab.sim import simulate

from .helpers import TARGET, fleet, scenario


def test_every_breakdown_of_a_single_group_run_agrees_with_the_overall_figures(tmp_path):
    scen = scenario({"rate": 60, "duration": "30s", "warmup": "3s", "max_in_flight": 400},
                    workload={"prompt_tokens": 500, "output_tokens": 200}, slo={"ttft": "2s", "e2e": "6s"},
                    target={**TARGET, "timeouts": {"first_token": "3s", "total": "8s"}})  # fmt: skip
    summary = simulate(
        scen, fleet(pools=[{"name": "a", "profile": "llama3-8b-h100", "replicas": 1}]), tmp_path / "r"
    ).summary
    states = summary["requests"]["by_state"]
    assert states["ok"] and states["dropped"] and states["timeout"]  # every way of counting is exercised
    overall = summary["goodput"]
    assert 0 < overall["fraction"] < 1
    groups = {"by_kind": "chat", "by_class": "default", "by_tier": "default", "by_phase": "main"}
    for breakdown, name in groups.items():
        block = summary[breakdown][name]
        assert block["goodput"]["fraction"] == pytest.approx(overall["fraction"]), breakdown
        assert block["goodput"]["requests_per_s"] == pytest.approx(overall["requests_per_s"]), breakdown
        assert block["goodput"]["slo_ms"] == overall["slo_ms"], breakdown
        assert block["requests"]["error_rate"] == pytest.approx(summary["requests"]["error_rate"]), breakdown
        assert block["throughput"]["requests_per_s"] == pytest.approx(summary["throughput"]["requests_per_s"]), (
            breakdown
        )
