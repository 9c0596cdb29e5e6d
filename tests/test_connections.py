"""Connection policy: ``close`` opens a TCP connection per request, ``keepalive`` reuses them.

The scripted server counts distinct client ports at ``GET /stats``.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("policy", ["close", "keepalive"])
def test_connection_policy(zero_server, scenario_for, run, reconciled, tmp_path, policy):
    scenario = scenario_for(zero_server.url, target={"connection": policy}, preflight=False,  # counts every request
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
    scenario = scenario_for(  # counts every request and connection the server sees: no pre-flight
        timed_server.url, load={"concurrency": 4, "duration": "1s"}, workload={"output_tokens": 1}, preflight=False
    )
    before = timed_server.stats()
    result = run(scenario, tmp_path / "run")
    after = timed_server.stats()
    reconciled(result.summary, result.run_dir)
    assert after["requests"] - before["requests"] == result.summary["requests"]["ok"] >= 16
    assert after["connections"] - before["connections"] == 4


def test_a_pooled_connection_the_server_dropped_costs_a_resend_not_a_failure(
    zero_server, scenario_for, run, reconciled, tmp_path
):
    """The server closes each connection when a second request arrives on it, as a keep-alive timer
    firing while the request travels does: every request is sent again once on a new connection."""
    scenario = scenario_for(zero_server.url, model="drop-reused", load={"concurrency": 1, "duration": "1s"})
    result = run(scenario, tmp_path / "run")
    records = reconciled(result.summary, result.run_dir)
    assert set(records.column("state").to_pylist()) == {"ok"}
    resends = records.column("resends").to_pylist()
    assert resends[0] == 0 and set(resends[1:]) == {1} and len(resends) > 5
    assert result.summary["requests"]["resent"] == len(resends) - 1
    assert result.summary["requests"]["failed"] == 0
