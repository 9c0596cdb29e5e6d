"""The documentation that is generated must match what generates it."""

from __future__ import annotations

from pathlib import Path

from surgelab.scenario.reference import markdown

ROOT = Path(__file__).parents[1]


def test_scenario_reference_matches_the_models() -> None:
    written = (ROOT / "docs" / "scenario.md").read_text(encoding="utf-8")
    assert written == markdown(), "docs/scenario.md is stale: run `surgelab schema --markdown > docs/scenario.md`"


def test_readme_starts_with_the_two_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0].strip() for b in readme.split("```bash\n")[1:3]]
    assert blocks[0].endswith("surgelab demo")
    assert blocks[1].endswith("pytest -q tests/interop")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert blocks[1] in ci, ".ci/run must run the README's test command verbatim"
