"""Every fleet file in examples/fleets loads (the docs run them as written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from surgelab.sim import load_fleet

FLEETS = sorted((Path(__file__).parents[2] / "examples" / "fleets").glob("*.yaml"))


@pytest.mark.parametrize("path", FLEETS, ids=[p.stem for p in FLEETS])
def test_example_fleet_loads(path: Path) -> None:
    fleet = load_fleet(path)
    assert fleet.pools and fleet.name
