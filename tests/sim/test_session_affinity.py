"""Session affinity in the simulator's router: a session's turns go back to its replica, and find its history cached."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from surgelab.engine.kv import KVCache
from surgelab.sim import build_fleet, simulate

from .helpers import scenario

SESSIONS = {"prompt_tokens": 200, "output_tokens": 20, "session": {"turns": 4, "think_time": 1}}


@pytest.fixture
def prefix_hits(monkeypatch):
    """Prompt blocks found in an engine's prefix cache, and blocks asked for, over every admission."""
    counts = {"hit": 0, "asked": 0}
    admit = KVCache.admit

    def counted(self, alloc, hashes, tokens):
        hits = admit(self, alloc, hashes, tokens)
        counts["hit"] += max(hits, 0)
        counts["asked"] += len(hashes)
        return hits

    monkeypatch.setattr(KVCache, "admit", counted)
    return counts


def _run(tmp_path, name: str, affinity: str | None, counts: dict, replicas: int = 4):
    counts.update(hit=0, asked=0)
    router = {"policy": "round_robin", **({"affinity": affinity} if affinity else {})}
    fleet = build_fleet({"pools": [{"name": "p", "replicas": replicas, "profile": "llama3-8b-h100"}], "router": router,
                         "cache": {"prefix": True}})  # fmt: skip
    simulate(scenario({"rate": 4, "duration": "20s"}, seed=2, workload=SESSIONS), fleet, tmp_path / name)
    report = json.loads((tmp_path / name / "fleet.json").read_text())
    cache = report["pools"]["p"]["prefix_cache"]  # what fleet.json says is what the engines counted
    assert (cache["found_blocks"], cache["prompt_blocks"]) == (counts["hit"], counts["asked"])
    assert cache["hit_rate"] == pytest.approx(counts["hit"] / counts["asked"])
    return cache["hit_rate"], report


def test_affinity_keeps_sessions_on_one_replica_and_raises_the_prefix_hit_rate(tmp_path, prefix_hits):
    without, plain = _run(tmp_path, "spread", None, prefix_hits)
    with_affinity, pinned = _run(tmp_path, "pinned", "session", prefix_hits)
    # round robin over 4 replicas: a later turn finds its history on its replica about 1 time in 4
    assert with_affinity > 2 * without, (with_affinity, without)
    assert with_affinity > 0.4
    records = pq.read_table(tmp_path / "pinned" / "records.parquet")
    sessions = {s for s, t in zip(records["session"].to_pylist(), records["turn"].to_pylist()) if t >= 1}
    later = sum(1 for t in records["turn"].to_pylist() if t >= 2)
    assert pinned["affinity"] == {"sessions": len(sessions), "kept": later, "moved": 0}
    assert "affinity" not in plain and "affinity" not in plain["config"]["router"]
    # the policy still spreads the sessions' first turns: every replica serves
    assert min(pinned["pools"]["p"]["dispatched_by_replica"]) > 0


def test_a_session_moves_when_its_replica_crashes(tmp_path, prefix_hits):
    fleet = build_fleet({"pools": [{"name": "p", "replicas": 2, "profile": "llama3-8b-h100",
                                    "failures": {"crashes": [{"replica": 0, "at": "5s"}]}}],
                         "router": {"policy": "round_robin", "affinity": "session"}, "cache": {"prefix": True}})  # fmt: skip
    simulate(scenario({"rate": 2, "duration": "12s"}, seed=3, workload=SESSIONS), fleet, tmp_path / "crash")
    report = json.loads((tmp_path / "crash" / "fleet.json").read_text())
    assert report["affinity"]["moved"] > 0  # sessions of the crashed replica went on elsewhere
