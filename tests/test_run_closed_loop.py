"""Closed loop: N users never exceed N in flight, keep N busy, and think exactly as told."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

S = 1e9


def sweep(table, start_s: float, end_s: float) -> tuple[int, float]:
    """Max and time-weighted mean requests in flight over [start, end] from [sent, end] intervals."""
    sent = np.array(table["sent_ns"].to_pylist(), dtype=float) / S
    end = np.array(table["end_ns"].to_pylist(), dtype=float) / S
    times = np.concatenate([sent, end])
    steps = np.concatenate([np.ones_like(sent), -np.ones_like(end)])
    order = np.lexsort((steps, times))  # at a tie the end comes first: touching is not overlapping
    times, level = times[order], np.cumsum(steps[order])
    clipped = np.clip(times, start_s, end_s)
    area = float(np.sum(level[:-1] * np.diff(clipped)))
    return int(level.max()), area / (end_s - start_s)


def _by_user(table) -> dict[int, list[dict]]:
    users: dict[int, list[dict]] = {}
    for row in sorted(table.to_pylist(), key=lambda r: r["intended_ns"]):
        users.setdefault(row["user"], []).append(row)
    return users


def test_sweep_line_on_known_intervals():
    import pyarrow as pa

    table = pa.table({"sent_ns": [0, int(0.5 * S), int(1 * S)], "end_ns": [int(1 * S), int(1.5 * S), int(2 * S)]})
    assert sweep(table, 0.0, 2.0) == (2, pytest.approx(1.5))


def test_zero_think_time_keeps_n_busy_and_never_more(timed_server, scenario_for, run, reconciled, tmp_path):
    n, duration = 4, 3.0
    scenario = scenario_for(timed_server.url, load={"concurrency": n, "duration": duration},
                            workload={"output_tokens": 6})  # fmt: skip
    result = run(scenario, tmp_path / "run")
    table = reconciled(result.summary, result.run_dir)
    assert result.summary["mode"] == "closed"
    assert result.summary["requests"]["ok"] == table.num_rows
    peak, mean = sweep(table, 0.0, duration)
    assert peak <= n
    assert mean == pytest.approx(n, rel=0.03)
    # each user's requests are back to back: 0.3 s each, so about duration / 0.3 apiece
    users = _by_user(table)
    assert sorted(users) == list(range(n))
    for rows in users.values():
        assert len(rows) == pytest.approx(duration / 0.3, abs=1.5)
        for prev, nxt in zip(rows, rows[1:]):
            assert nxt["sent_ns"] >= prev["end_ns"]
            assert (nxt["sent_ns"] - prev["end_ns"]) / 1e6 < 20  # client overhead only (well under 1 ms when idle)
        assert rows[-1]["intended_ns"] < duration * S  # no user starts after the duration
    assert result.summary["concurrency"]["mean_in_flight"] == pytest.approx(n, rel=0.03)


def test_think_time_gap_and_ramp_up(timed_server, scenario_for, run, reconciled, tmp_path):
    n, think, duration = 3, 0.25, 3.0
    scenario = scenario_for(timed_server.url, load={"concurrency": n, "duration": duration, "think_time": f"{think}s",
                                                    "ramp_up": "0.6s"}, workload={"output_tokens": 4})  # fmt: skip
    result = run(scenario, tmp_path / "run")
    table = reconciled(result.summary, result.run_dir)
    users = _by_user(table)
    gaps, lags = [], []
    for user, rows in users.items():
        assert rows[0]["intended_ns"] == int(0.6 * S * user / n)  # users start evenly over ramp_up
        for prev, nxt in zip(rows, rows[1:]):
            gaps.append((nxt["intended_ns"] - prev["end_ns"]) / S)
            lags.append((nxt["sent_ns"] - nxt["intended_ns"]) / S)
    gaps, lags = np.array(gaps), np.array(lags)
    assert np.all(lags >= 0) and np.median(lags) < 0.002 and lags.max() < 0.02  # sent when intended
    assert len(gaps) >= 3 * n
    assert np.all(gaps >= think)
    assert np.all(gaps - think < 0.02)  # room for a busy machine; the median shows the real agreement
    assert np.median(gaps) == pytest.approx(think, abs=0.002)
    peak, mean = sweep(table, 0.6, duration)
    busy = 0.2 + 3 * 0.02
    assert peak <= n
    assert mean == pytest.approx(n * busy / (busy + think), rel=0.1)


def test_random_think_times_are_drawn_per_user_from_the_seed(zero_server, scenario_for, run, reconciled, tmp_path):
    """Each user's think times are exponential with the given mean and the same for the same seed."""

    def gaps(seed: int, name: str) -> dict[int, list[float]]:
        scenario = scenario_for(zero_server.url, seed=seed, load={"concurrency": 3, "duration": "1.2s",
                                "think_time": {"dist": "exponential", "mean": 0.08}})  # fmt: skip
        result = run(scenario, tmp_path / name)
        table = reconciled(result.summary, result.run_dir)
        return {user: [(b["intended_ns"] - a["end_ns"]) / S for a, b in zip(rows, rows[1:])]
                for user, rows in _by_user(table).items()}  # fmt: skip

    first, again, other = gaps(11, "a"), gaps(11, "b"), gaps(12, "c")
    pooled = np.concatenate([np.array(g) for g in first.values()])
    assert len(pooled) >= 20
    assert stats.kstest(pooled, "expon", args=(0, 0.08)).pvalue > 0.001
    for user, seq in first.items():
        n = min(len(seq), len(again[user]))
        assert n >= 5
        assert seq[:n] == pytest.approx(again[user][:n], abs=0.01)  # same draws, whatever the timing
        m = min(len(seq), len(other[user]))
        assert seq[:m] != pytest.approx(other[user][:m], abs=0.01)
