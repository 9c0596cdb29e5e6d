"""Requirement profiles: every expression kind parses to its unit; bad files fail with file:line."""

from __future__ import annotations

import pytest

from surgelab.providers.requirements import RequirementError, load_requirements

GOOD = """\
name: seed
core_performance:
  - {require: "p90(e2e) <= 3s", weight: 3, must: true}
  - "error_rate < 0.5%"
  - require: volatility_7d <= 15%
business_fit:
  - {require: "max_context >= 64k", weight: 2}
  - require: multi_turn_retention >= 20
architecture_compatibility:
  - require: openai_compat == pass
commercial:
  - require: cost_per_mtok <= 2
"""


def test_every_kind_of_requirement_parses_to_its_unit(tmp_path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(GOOD)
    reqs = load_requirements(path).requirements()
    got = [(r.group, r.metric, r.op, r.value, r.source) for r in reqs]
    assert got == [
        ("core_performance", "p90(e2e)", "<=", 3.0, "run"),
        ("core_performance", "error_rate", "<", 0.005, "run"),
        ("core_performance", "volatility_7d", "<=", 0.15, "history"),
        ("business_fit", "max_context", ">=", 65536.0, "probe"),
        ("business_fit", "multi_turn_retention", ">=", 20.0, "probe"),
        ("architecture_compatibility", "openai_compat", "==", 1.0, "probe"),
        ("commercial", "cost_per_mtok", "<=", 2.0, "cost"),
    ]
    assert reqs[0].must and reqs[0].weight == 3 and not reqs[1].must
    assert reqs[0].passes(2.9) and not reqs[0].passes(3.1) and not reqs[0].passes(None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("core_performance:\n  - require: p90(e2e) <= 3 apples\n", ["r.yaml:2: core_performance.0", "3 apples"]),
        ("core_performance:\n  - require: p80(e2e) <= 3s\n", ["r.yaml:2:", "summaries hold p50, p90"]),
        (
            "business_fit:\n  - require: max_context >= 64k\n  - require: memory >= 20\n",
            ["r.yaml:3:", "unknown metric 'memory'"],
        ),
        ("business_fit:\n  - require: openai_compat == maybe\n", ["r.yaml:2:", "expected pass or fail"]),
        ("core_performance:\n  - require: error_rate == 1%\n", ["== and != only apply"]),
        ("core_performance:\n  - {require: error_rate < 1%, weight: -1}\n", ["r.yaml:2:", "weight", "greater than 0"]),
        ("core_perf:\n  - require: error_rate < 1%\n", ["r.yaml:1:", "core_perf", "unknown field"]),
        ("name: empty\n", ["no requirements"]),
        ("core_performance: [\n", ["invalid YAML"]),
        ("- a\n- b\n", ["r.yaml:1: expected a mapping"]),
    ],
)
def test_bad_profiles_name_the_line_and_the_problem(tmp_path, text, expected) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RequirementError) as caught:
        load_requirements(path)
    message = str(caught.value).replace(str(tmp_path) + "/", "")
    for part in expected:
        assert part in message, message


def test_every_problem_is_reported_at_once(tmp_path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("core_performance:\n  - require: bogus < 1\nbusiness_fit:\n  - require: max_context >= lots\n")
    with pytest.raises(RequirementError) as caught:
        load_requirements(path)
    assert [m.split(": ", 1)[0].rsplit(":", 1)[-1] for m in caught.value.messages] == ["2", "4"]


def test_the_example_study_files_are_valid() -> None:
    from pathlib import Path

    from surgelab.scenario.loader import load_scenario

    folder = Path(__file__).parents[2] / "examples" / "providers"
    profile = load_requirements(folder / "requirements.yaml")
    assert [r.group for r in profile.requirements()][:1] == ["core_performance"] and len(profile.requirements()) == 18
    study = load_scenario(folder / "study.yaml")
    assert [t.name for t in study.targets or []] == ["api", "selfhosted"] and study.routing.mode == "compare"
    assert load_scenario(folder / "dual-active.yaml").routing.mode == "route"
    assert load_scenario(folder / "monitor.yaml").load.concurrency is not None
