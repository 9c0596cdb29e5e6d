"""Connection policy: ``close`` opens a TCP connection per request, ``keepalive`` reuses them.

The scripted server counts distinct client ports at ``GET /stats``.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("policy", ["close", "keepalive"])
def test_connection_policy(zero_server, scenario_for, run, reconciled, tmp_path, policy):
    scenario = scenario_for(zero_server.url, target={"connection": policy},
                            load={"rate": 20, "arrival": "constant", "duration": "1s"})  # fmt: skip
    before = zero_server.stats()
    result = run(scenario, tmp_path / "run")
    after = zero_server.stats()
    reconciled(result.summary, result.run_dir)
    assert result.summary["requests"]["ok"] == 20
    requests = after["requests"] - before["requests"]
    connections = after["connections"] - before["connections"]
    assert requests == 20
    if policy == "close":
        assert connections == 20
    else:
        assert connections <= 2


def test_keepalive_pool_grows_to_the_concurrency(timed_server, scenario_for, run, reconciled, tmp_path):
    """Four users each hold a connection: four connections for many requests."""
    scenario = scenario_for(timed_server.url, load={"concurrency": 4, "duration": "1s"}, workload={"output_tokens": 1})
    before = timed_server.stats()
    result = run(scenario, tmp_path / "run")
    after = timed_server.stats()
    reconciled(result.summary, result.run_dir)
    assert after["requests"] - before["requests"] == result.summary["requests"]["ok"] >= 16
    assert after["connections"] - before["connections"] == 4
