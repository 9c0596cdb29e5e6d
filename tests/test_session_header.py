"""target.session_header: every request of a multi-turn session carries its session's id, and nothing else does."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter

import pyarrow.parquet as pq
import pytest

from surgelab.scenario.loader import ScenarioError
from surgelab.server.process import ServerProcess
from surgelab.testing.process import ScriptedServerProcess

SESSIONS = {"name": "chat", "session": {"turns": 3}, "prompt_tokens": 16, "output_tokens": 4}
SINGLE = {"name": "single", "prompt_tokens": 16, "output_tokens": 4}


def _stats(server: ScriptedServerProcess) -> dict:
    with urllib.request.urlopen(server.root_url + "/stats", timeout=5) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("header", ["X-Session-ID", None])
def test_the_session_header_carries_each_sessions_id_on_every_turn(tmp_path, scenario_for, run, header):
    with ScriptedServerProcess() as server:
        target = {"session_header": header} if header else {}
        scen = scenario_for(server.base_url, target=target, load={"rate": 6, "duration": "1s"},
                            workload={"mix": [SESSIONS, SINGLE]})  # fmt: skip
        run(scen, tmp_path / "run")
        table = pq.read_table(tmp_path / "run" / "records.parquet")
        seen = _stats(server)["session_ids"]
    rows = table.select(["session", "turn", "state"]).to_pylist()
    assert all(r["state"] == "ok" for r in rows)
    sessions = Counter(str(r["session"]) for r in rows if r["session"] >= 0)
    assert sum(sessions.values()) > len(sessions) > 0, "some sessions had more than one turn"
    assert any(r["session"] < 0 for r in rows), "some requests were outside a session"
    # the records' session column is what was sent, once per turn; single requests sent none
    assert Counter(seen) == (sessions if header else Counter())


def test_surgelab_serve_echoes_and_counts_the_session_header(tmp_path, scenario_for, run):
    with ServerProcess(["--session-header", "X-Affinity"]) as server:
        scen = scenario_for(server.base_url, model="surgelab-tiny", target={"session_header": "X-Affinity"},
                            load={"rate": 4, "duration": "1s"}, workload=SESSIONS)  # fmt: skip
        run(scen, tmp_path / "run")
        turns = pq.read_table(tmp_path / "run" / "records.parquet").num_rows
        request = urllib.request.Request(server.base_url + "/models", headers={"X-Affinity": "17"})
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.headers["X-Affinity"] == "17"
        with urllib.request.urlopen(server.root_url + "/metrics", timeout=5) as resp:
            metrics = resp.read().decode()
    # the run's requests (the pre-flight's among them carry no session) and the /models call above
    line = next(x for x in metrics.splitlines() if x.startswith("surgelab:session_requests_total"))
    assert float(line.rsplit(" ", 1)[1]) == turns + 1


def test_a_session_header_name_that_is_not_a_token_is_an_error(scenario_for):
    with pytest.raises(ScenarioError, match="target.session_header: the name is not an HTTP token"):
        scenario_for("http://127.0.0.1:9/v1", target={"session_header": "X Session"})
