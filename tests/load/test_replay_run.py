"""Trace replay sent to the embedded server: recorded gaps kept (and scaled by speed), the
trace's prompt lengths reproduced exactly, and Mooncake's shared blocks shared as text."""

from __future__ import annotations

import json
import re
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from surgelab.load.phases import plan_phases
from surgelab.metrics.store import read_records
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.units import SECOND

TRACES = Path(__file__).parents[2].parent / "shared/data/traces"


def write_azure(path: Path, rows: int = 24, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An Azure-format excerpt: datetime stamps with 7 fractional digits, irregular gaps."""
    rng = np.random.default_rng(seed)
    gaps_ms = rng.uniform(15, 110, rows - 1).round(3)
    times_ms = np.concatenate([[0.0], np.cumsum(gaps_ms)])
    context, generated = rng.integers(5, 120, rows), rng.integers(1, 6, rows)
    t0 = datetime(2023, 11, 16, 18, 17, 3, 979960)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for t, c, g in zip(times_ms, context, generated):
        stamp = (t0 + timedelta(milliseconds=float(t))).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"
        lines.append(f"{stamp},{c},{g}")
    path.write_text("\n".join(lines))  # no trailing newline, like the real files
    return times_ms / 1000, context, generated


@pytest.mark.parametrize("speed", [1, 2])
def test_replay_keeps_the_gaps_and_the_lengths(embedded, scenario_for, run, reconciled, tmp_path, speed):
    times, context, generated = write_azure(tmp_path / "azure.csv")
    replay = {"type": "replay", "trace": str(tmp_path / "azure.csv"), "format": "azure", "speed": speed}
    s = scenario_for(embedded.base_url, load={"rate": replay, "duration": None})
    result = run(s, tmp_path / "run")
    table = reconciled(result.summary, tmp_path / "run")
    assert result.summary["requests"]["ok"] == len(times)
    intended = np.array(table["intended_ns"].to_pylist()) / SECOND
    sent = np.array(table["sent_ns"].to_pylist()) / SECOND
    want = np.diff(times) / speed
    assert np.max(np.abs(np.diff(intended) - want)) < 2e-3  # the schedule keeps every gap (in fact to 1 µs)
    assert np.max(np.abs(np.diff(intended) - want)) < 1e-6
    assert intended[0] == 0
    # the actual sends follow the schedule too (lag well inside the validity bound)
    assert np.median(np.abs(np.diff(sent) - want)) < 2e-3 and result.summary["validity"]["valid"]
    # lengths come from the trace: the server counted exactly ContextTokens, generated GeneratedTokens
    assert table["usage_source"].to_pylist() == ["server"] * len(times)
    assert table["prompt_tokens"].to_pylist() == context.tolist()
    assert table["output_tokens"].to_pylist() == generated.tolist()


def _metric(root_url: str, name: str) -> float:
    with urllib.request.urlopen(root_url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(float(m[1]) for m in re.finditer(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M))


def test_mooncake_hash_ids_become_shared_prefix_text(embedded, scenario_for, run, tmp_path):
    """Equal leading ids share exactly those blocks' text, which the server's prefix cache sees."""
    block = 32
    rows = [
        (0, 3 * block + 5, [901, 902, 903, 908]),  # one id per started block of prompt
        (150, 3 * block, [901, 902, 904]),  # shares blocks 1–2 with row 0
        (300, 2 * block + 7, [905, 906, 909]),  # shares nothing
        (450, 2 * block, [901, 907]),  # shares block 1 with rows 0 and 1
        (600, block + 3, [905, 910]),  # shares block 1 with row 2
    ]
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": n, "output_length": 2, "hash_ids": ids}) + "\n"
            for t, n, ids in rows
        )
    )
    replay = {"type": "replay", "trace": str(trace), "format": "mooncake", "block_size": block}
    # the server's counters are compared with the run's prompts: nothing else may reach it (no pre-flight)
    s = scenario_for(embedded.base_url, seed=12, load={"rate": replay, "duration": None}, preflight=False)
    sampler = plan_phases(s)[0].sampler
    pieces = [BuiltinTokenizer().pieces(sampler.spec(i).prompt) for i in range(len(rows))]
    assert [len(p) for p in pieces] == [n for _, n, _ in rows]

    def shared(a: int, b: int) -> int:
        return next(
            (k for k, (x, y) in enumerate(zip(pieces[a], pieces[b])) if x.strip() != y.strip()),
            min(len(pieces[a]), len(pieces[b])),
        )

    assert shared(0, 1) == 2 * block and shared(0, 3) == block and shared(1, 3) == block
    assert shared(2, 4) == block and shared(0, 2) == 0 and shared(1, 4) == 0

    hits_before = _metric(embedded.root_url, "vllm:prefix_cache_hits_total")
    queries_before = _metric(embedded.root_url, "vllm:prefix_cache_queries_total")
    result = run(s, tmp_path / "run")
    table = read_records(result.run_dir)
    assert table["state"].to_pylist() == ["ok"] * len(rows)
    assert table["prompt_tokens"].to_pylist() == [n for _, n, _ in rows]
    hits = _metric(embedded.root_url, "vllm:prefix_cache_hits_total") - hits_before
    queries = _metric(embedded.root_url, "vllm:prefix_cache_queries_total") - queries_before
    assert queries == sum(n for _, n, _ in rows)
    assert hits == 2 * block + block + block  # rows 1, 3 and 4 reuse exactly their shared blocks


def test_a_real_mooncake_excerpt_keeps_its_gaps_in_the_plan(scenario_for):
    path = TRACES / "mooncake_synthetic_trace.jsonl"
    if not path.is_file():
        pytest.skip(f"real traces not found at {TRACES} (see /work/shared/data/traces/README.md)")
    replay = {"type": "replay", "trace": str(path), "format": "mooncake", "start": "10s", "end": "40s", "speed": 2}
    s = scenario_for("http://127.0.0.1:9/v1", load={"rate": replay, "duration": None})
    plan = s.load.shape.load()
    stamps_ms = [json.loads(line)["timestamp"] for line in path.read_text().splitlines() if line.strip()]
    window = np.array([t for t in sorted(stamps_ms) if 10_000 <= t < 40_000], dtype=float)
    assert len(plan.rows) == len(window) > 0
    assert np.allclose(np.diff(plan.offsets_ns) / SECOND, np.diff(window) / 1000 / 2, atol=1e-6)
    assert s.load.planned_duration == pytest.approx(plan.offsets_ns[-1] / SECOND + 1e-3)
