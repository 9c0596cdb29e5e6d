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


def test_a_request_cut_on_a_pooled_connection_is_a_connection_error_each_time(
    zero_server, scenario_for, run, reconciled, tmp_path
):
    """The server closes each connection when a second request arrives on it, as a drop at the start
    of a reused connection does: every such request is one connection_error, sent once, so the
    records and the server agree (it used to be sent again silently, hiding the loss)."""
    scenario = scenario_for(zero_server.url, model="drop-reused", preflight=False,  # count every request
                            load={"concurrency": 1, "duration": "1s"})  # fmt: skip
    before = zero_server.stats()["requests"]
    result = run(scenario, tmp_path / "run")
    records = reconciled(result.summary, result.run_dir)
    states = records.sort_by("id").column("state").to_pylist()
    assert len(states) > 6 and states[::2] == ["ok"] * len(states[::2])  # a new connection answers
    assert states[1::2] == ["connection_error"] * len(states[1::2])  # its reuse is cut
    assert set(records.column("resends").to_pylist()) == {0} and result.summary["requests"]["resent"] == 0
    assert zero_server.stats()["requests"] - before == len(states)
