"""`surgelab simulate`: fleet files with line-numbered errors, comparison of schemes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.sim import FleetError, load_fleet

SCENARIO = """
name: cli
target: {url: "http://127.0.0.1:9/v1", model: m}
load: {rate: 5, duration: 20s}
workload: {prompt_tokens: 100, output_tokens: 16}
slo: {e2e: 200ms}
"""

BAD = [
    ("pools: []\n", "1: pools: List should have at least 1 item"),
    ("pools:\n  - name: a\n    profile: nope\n", "3: pools[0].profile: unknown profile"),
    (
        "pools:\n  - name: a\n    replicas: 2\n    profile: tiny\n    colds_start: 5s\n",
        "5: pools[0].colds_start: unknown field",
    ),
    ("pools:\n  - profile: tiny\n    service_time: 1\n", "2: pools[0]: give exactly one of profile"),
    (
        "pools:\n  - profile: tiny\n    autoscale: {metric: rps, target: 1, min: 0}\n",
        "3: pools[0].autoscale: min: 0 needs scale_to_zero",
    ),
    ("router: {policy: random}\npools: [{profile: tiny}]\n", "1: router.policy: Input should be"),
    ("pools: [{profile: tiny}]\nadmission: {shed_status: 500}\n", "2: admission.shed_status"),
    ("pools: [{profile: tiny, cold_start: soon}]\n", "1: pools[0].cold_start: expected a duration"),
]


@pytest.mark.parametrize(("text", "expected"), BAD, ids=[e.split(": ")[1] for _, e in BAD])
def test_bad_fleet_files_name_file_and_line(tmp_path, text, expected):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    with pytest.raises(FleetError) as err:
        load_fleet(path)
    assert f"{path}:{expected}" in str(err.value)


def test_cli_bad_fleet_exits_2_with_one_line(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "f.yaml").write_text("pools:\n  - profile: tiny\n    replicas: -1\n")
    result = CliRunner().invoke(app, ["simulate", str(tmp_path / "s.yaml"), "--fleet", str(tmp_path / "f.yaml")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'f.yaml'}:3: pools[0].replicas" in result.output


def test_cli_compares_fleets_on_the_same_schedule(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "one.yaml").write_text("name: one\npools: [{profile: llama2-7b-a10, cost_per_hour: 1.0}]\n")
    (tmp_path / "two.yaml").write_text("name: two\npools: [{profile: llama3-8b-h100, cost_per_hour: 3.0}]\n")
    out = tmp_path / "cmp"
    args = [
        "simulate",
        str(tmp_path / "s.yaml"),
        "--fleet",
        str(tmp_path / "one.yaml"),
        "--fleet",
        str(tmp_path / "two.yaml"),
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "SLA violations" in result.output and "one" in result.output and "two" in result.output
    rows = json.loads((out / "comparison.json").read_text())["fleets"]
    assert [r["fleet"] for r in rows] == ["one", "two"]
    assert rows[0]["measured"] == rows[1]["measured"]  # the identical schedule
    assert rows[0]["sla_violations"] > rows[1]["sla_violations"]  # the A10 is slower than the 200 ms objective allows
    assert (out / "one" / "summary.json").is_file() and (out / "two" / "fleet.parquet").is_file()


def test_every_fleet_in_the_docs_is_valid():
    import re
    from pathlib import Path

    import yaml

    from surgelab.sim import build_fleet

    text = (Path(__file__).parents[2] / "docs" / "simulator.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "[...]" not in b]  # all but the outline
    fleets = [yaml.safe_load(b) for b in blocks]
    fleets = [f for f in fleets if isinstance(f, dict) and "pools" in f]
    assert len(fleets) >= 4
    for data in fleets:
        build_fleet(data)


def test_several_fleets_get_reports_and_a_comparison(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parents[2]
    out = tmp_path / "cmp"
    proc = subprocess.run(
        [sys.executable, "-m", "surgelab", "simulate", str(root / "examples" / "noodle-shop.yaml"),
         "--fleet", str(root / "examples" / "fleets" / "noodle-shop.yaml"),
         "--fleet", str(root / "examples" / "fleets" / "noodle-shop-2-cooks.yaml"), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (out / "compare.html").stat().st_size > 100_000  # the chart library is inside
    assert all((d / "report.html").is_file() for d in out.iterdir() if d.is_dir())
