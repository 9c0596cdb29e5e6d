"""Terminal tables at 80 columns: whole columns left out and said, never words cut short (issue 30:
"n.s. CI…", "kne…", "inv…", and nothing said that COLUMNS widens them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCENARIO = """name: narrow
target: {url: 'http://127.0.0.1:9/v1', model: m}
load: {rate: 5, duration: 10s}
workload: {prompt_tokens: 100, output_tokens: 32}
slo: {ttft: 500ms}
"""


def at_80(*args: str) -> str:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "surgelab", *args], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _table(out: str, first: str, last: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(last))
    return lines[start:end]


def test_a_sweep_at_80_columns_keeps_its_marks_whole(tmp_path: Path):
    """Past the H100's saturation the last column says "knee, SLA" and "invalid": once "kn…" and "in…"."""
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "f.yaml").write_text("name: one\npools: [{profile: llama3-8b-h100, cost_per_hour: 4.0}]\n")
    out = at_80("sweep", str(tmp_path / "s.yaml"), "--fleet", str(tmp_path / "f.yaml"), "--out", str(tmp_path / "sw"),
                "--mode", "rate", "--levels", "100,300,600,1200", "--hold", "3s", "--settle", "0.5s", "--warmup", "0")  # fmt: skip
    table = _table(out, "sweep narrow", "stop:")
    assert max(map(len, table)) <= 80 and not any("…" in line for line in table), "\n".join(table)
    rows = {line.split()[0]: line for line in table if line.strip() and line.split()[0] in ("100", "300", "600")}
    assert rows["300"].rstrip().endswith("knee, SLA") and rows["600"].rstrip().endswith("invalid")
    said = " ".join(" ".join(table).split())
    assert "left out to fit 80 columns; COLUMNS=" in said and "(or a wider terminal) shows them" in said
    width = int(said.split("COLUMNS=")[1].split()[0])
    assert 80 < width <= 120
    wide = subprocess.run([sys.executable, "-m", "surgelab", "show", str(tmp_path / "sw")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "80"})  # fmt: skip
    assert wide.returncode == 0 and "…" not in wide.stdout, wide.stdout


def test_a_comparison_of_long_run_names_at_80_columns(tmp_path: Path):
    """Two fleets with long names: the value columns became "autoscaled-cold-st…", verdicts "n…"."""
    (tmp_path / "s.yaml").write_text(SCENARIO.replace("rate: 5", "rate: 20"))
    fleets = []
    for name, replicas in (("autoscaled-cold-start-ten-seconds", 1), ("three-fixed-replicas-on-a10-gpus", 3)):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\npools: [{{profile: llama2-7b-a10, replicas: {replicas}, cost_per_hour: 2.0}}]\n"
        )
        fleets += ["--fleet", str(tmp_path / f"{name}.yaml")]
    at_80("simulate", str(tmp_path / "s.yaml"), *fleets, "--out", str(tmp_path / "sims"))
    out = at_80("compare", str(tmp_path / "sims" / "autoscaled-cold-start-ten-seconds"),
                str(tmp_path / "sims" / "three-fixed-replicas-on-a10-gpus"), "--out", str(tmp_path / "cmp"), "--resamples", "100")  # fmt: skip
    table = _table(out, "three-fixed-replicas-on-a10-gpus against", "n.s. = not significant")
    assert max(map(len, table)) <= 80 and not any("…" in line for line in table), "\n".join(table)
    head = next(line for line in table if line.strip().startswith("metric")).split()
    assert head[:3] == ["metric", "baseline", "candidate"] and head[-1] == "verdict"
    assert any(
        line.strip().startswith("req/s") and ("n.s. CI∋0" in line or "better" in line or "worse" in line)
        for line in table
    )
    # a simulation's cost is compared too: exact, fleet.json's own figure
    [cost] = [m for m in json.loads((tmp_path / "cmp" / "compare.json").read_text())["metrics"] if m["id"] == "cost"]
    names = ("autoscaled-cold-start-ten-seconds", "three-fixed-replicas-on-a10-gpus")
    fleets = [json.loads((tmp_path / "sims" / name / "fleet.json").read_text())["cost"] for name in names]
    assert cost["values"] == [round(c, 4) for c in fleets] and cost["diffs"][0]["exact"]
    assert any(line.strip().startswith("cost ") for line in table)
