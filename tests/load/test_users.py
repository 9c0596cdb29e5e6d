"""An open loop dealt to users (inference-perf's sessions): each user has one request out at a time.

Request ``i`` belongs to user ``i mod users`` and goes at its scheduled time or, while that user
waits for an answer, the moment the answer is back; what a user still holds at the phase's end
is dropped. The same in a real run and in the simulator.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow.parquet as pq
import pytest

from surgelab.metrics.record import State
from surgelab.scenario.loader import build_scenario
from surgelab.sim import build_fleet, simulate


def scenario(load, **fields):
    return build_scenario({"name": "users", "seed": 1, "target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
                           "load": load, **fields})  # fmt: skip


def fleet(**fields):
    return build_fleet(fields)


def run(tmp_path, scen, flt):
    return simulate(scen, flt, tmp_path / "run")

USERS, RATE, SECONDS = 3, 20.0, 2.0


def _by_user(rows: list[dict]) -> dict[int, list[dict]]:
    users: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        users[row["user"]].append(row)
    return users


def _one_at_a_time(rows: list[dict]) -> None:
    """No user has two requests out at once."""
    for user, mine in _by_user([r for r in rows if r["state"] == State.OK.value]).items():
        mine.sort(key=lambda r: r["sent_ns"])
        for before, after in zip(mine, mine[1:]):
            assert after["sent_ns"] >= before["end_ns"], f"user {user} sent {after['id']} before {before['id']} ended"


def test_simulated_users_wait_for_their_answers(tmp_path):
    # every request takes 400 ms; 3 users can send 7.5 a second of the 20 scheduled
    scen = scenario({"rate": RATE, "arrival": "constant", "duration": f"{SECONDS}s", "users": USERS},
                    workload={"prompt_tokens": 8, "output_tokens": 4})  # fmt: skip
    result = run(tmp_path, scen, fleet(pools=[{"replicas": 1, "service_time": 0.4, "concurrency": 100}]))
    rows = pq.read_table(result.run_dir / "records.parquet").to_pylist()
    assert len(rows) == RATE * SECONDS  # every scheduled request is one record
    assert {r["user"] for r in rows} == set(range(USERS))
    assert all(r["user"] == r["id"] % USERS for r in rows)
    _one_at_a_time(rows)
    ok = [r for r in rows if r["state"] == State.OK.value]
    dropped = [r for r in rows if r["state"] == State.DROPPED.value]
    assert len(ok) + len(dropped) == len(rows)
    # each user sends one request every 400 ms from its first: ceil(2 s / 0.4 s) = 5 each
    assert len(ok) == USERS * 5
    assert all(r["error"] == "its user was still waiting for an answer when the phase ended" for r in dropped)
    latency = [(r["end_ns"] - r["intended_ns"]) / 1e9 for r in ok]
    assert max(latency) == pytest.approx(0.4)  # measured from when the user could send, not from the schedule


def test_users_that_keep_up_send_the_schedule_unchanged(tmp_path):
    scen = scenario({"rate": RATE, "arrival": "constant", "duration": f"{SECONDS}s", "users": 10},
                    workload={"prompt_tokens": 8, "output_tokens": 4})  # fmt: skip
    result = run(tmp_path, scen, fleet(pools=[{"replicas": 1, "service_time": 0.1, "concurrency": 100}]))
    rows = pq.read_table(result.run_dir / "records.parquet").to_pylist()
    assert all(r["state"] == State.OK.value for r in rows)
    step = 1e9 / RATE
    assert [r["intended_ns"] for r in sorted(rows, key=lambda r: r["id"])] == [round(i * step) for i in range(len(rows))]


def test_a_real_run_deals_its_schedule_to_users(timed_server, scenario_for, run, reconciled, tmp_path):
    """Against a server that answers in 200 ms + 3 × 20 ms: 2 users can send about 7.7 of the 20 a second."""
    scen = scenario_for(timed_server.url, load={"rate": RATE, "arrival": "constant", "duration": f"{SECONDS}s",
                                                "users": 2})  # fmt: skip
    summary = run(scen, tmp_path).summary
    rows = reconciled(summary, tmp_path).to_pylist()
    assert {r["user"] for r in rows} == {0, 1}
    _one_at_a_time(rows)
    ok = [r for r in rows if r["state"] == State.OK.value]
    assert 2 * 6 <= len(ok) <= 2 * 8  # 2 s ÷ (260 ms and the client's own time) per user
    assert summary["requests"]["dropped"] == len(rows) - len(ok)
    late = [r for r in ok if r["intended_ns"] > round(r["id"] * 1e9 / RATE) + 1]
    assert late, "requests held for their user's answer go when it is back"


def test_users_need_an_open_loop():
    with pytest.raises(Exception, match="users deals an open loop"):
        scenario({"concurrency": 2, "duration": "1s", "users": 2})


def test_what_a_busy_user_still_holds_counts_against_the_run_but_not_its_validity(tmp_path):
    scen = scenario({"rate": RATE, "arrival": "constant", "duration": f"{SECONDS}s", "users": USERS},
                    workload={"prompt_tokens": 8, "output_tokens": 4})  # fmt: skip
    summary = run(tmp_path, scen, fleet(pools=[{"replicas": 1, "service_time": 0.4, "concurrency": 100}])).summary
    assert summary["requests"]["dropped"] == RATE * SECONDS - USERS * 5
    assert summary["requests"]["error_rate"] > 0.5  # the load was not delivered: the server was too slow for it
    assert summary["validity"]["valid"], summary["validity"]["reasons"]  # but the client did what it was told
