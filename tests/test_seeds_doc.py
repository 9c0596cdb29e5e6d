"""docs/seeds.md maps every paragraph of each seed, and the fleets it cites load."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from surgelab.sim.loader import load_fleet

ROOT = Path(__file__).parents[1]
SEEDS = {"000": "000_ee200891d95ecbc6.txt", "002": "002_f601debe9e98fdb0.txt", "004": "004_f379968c7d0916ad.txt"}
# The seeds live beside the repository (../shared/seeds), or two levels up from a worktree.
SEED_DIRS = [ROOT.parent / "shared" / "seeds", ROOT.parents[1] / "shared" / "seeds"]


def paragraphs(text: str) -> list[int]:
    """First line number of each paragraph: runs of lines between empty lines (lines of spaces stay inside)."""
    starts, inside = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if line == "":
            inside = False
        elif not inside:
            starts.append(number)
            inside = True
    return starts


def table_rows(doc: str, seed: str) -> list[list[str]]:
    """The numbered rows (¶ 1, 2, …, not 37.1) of the table under '## Seed <seed>'."""
    section = doc.split(f"## Seed {seed}", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0].isdigit():
            rows.append(cells)
    return rows


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_every_paragraph_of_the_seed_has_its_row(seed: str) -> None:
    found = [d / SEEDS[seed] for d in SEED_DIRS if (d / SEEDS[seed]).exists()]
    if not found:
        pytest.skip("the seed documents are not beside this checkout")
    starts = paragraphs(found[0].read_text(encoding="utf-8"))
    rows = table_rows((ROOT / "docs" / "seeds.md").read_text(encoding="utf-8"), seed)
    assert [int(r[0]) for r in rows] == list(range(1, len(starts) + 1))
    assert [int(re.match(r"\d+", r[1]).group()) for r in rows] == starts
    assert all(r[3] for r in rows), "every paragraph names what does it, or why nothing does"


def test_the_wave_fleets_it_cites_load() -> None:
    hpa = load_fleet(ROOT / "examples" / "fleets" / "wave-autoscale.yaml")
    fixed = load_fleet(ROOT / "examples" / "fleets" / "wave-fixed-5.yaml")
    assert hpa.pools[0].autoscale is not None and hpa.pools[0].autoscale.target == 3
    assert fixed.pools[0].replicas == 5 and fixed.pools[0].autoscale is None


def _commands(pattern: str) -> list[str]:
    """Every backticked or fenced command in docs/*.md matching ``pattern``."""
    found = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        found += re.findall(pattern, doc.read_text(encoding="utf-8"))
    return found


def test_every_lunch_spike_command_runs_through_the_spike() -> None:
    """docs/seeds.md's spike command ran 40 s of a scenario whose spike rises at 60 s."""
    from surgelab.scenario import load_scenario
    from surgelab.units import parse_duration

    commands = _commands(r"surgelab run examples/lunch-spike\.yaml[^`\n#]*")
    assert len(commands) >= 2
    for command in commands:
        duration = re.search(r"--duration (\S+)", command)
        overrides = {"load.duration": ("--duration", duration[1])} if duration else {}
        scenario = load_scenario(ROOT / "examples" / "lunch-spike.yaml", overrides)
        spike = scenario.load.shape
        assert scenario.load.planned_duration >= spike.at + spike.rise + spike.hold + spike.decay, command
        assert not duration or parse_duration(duration[1]) > spike.at


def test_the_seeds_cushion_gives_the_seeds_count() -> None:
    """'Stock for 1.2 × the peak' (seed 000 ¶25): planned capacity = peak × 1.2; 1,000 req/s on instances of
    100 is 12 of them. The row said 13 (--safety 0.83 rounds 1 ÷ 1.2 down)."""
    from typer.testing import CliRunner

    from surgelab.cli import app

    row = next(r for r in table_rows((ROOT / "docs" / "seeds.md").read_text(encoding="utf-8"), "000") if r[0] == "25")
    command = re.search(r"`surgelab (plan [^`]+)`", row[3])[1]
    flags = dict(re.findall(r"--(\w+) (\S+)", command))
    expected = math.ceil(float(flags["peak"]) * 1.2 / float(flags["capacity"]) - 1e-9)
    assert expected == 12 and f"is {expected} instances" in row[3]
    result = CliRunner().invoke(app, command.split())
    assert result.exit_code == 0, result.output
    assert f"{expected} instances ({expected} GPUs)" in result.output
