"""A key given twice in one YAML mapping is an error naming both lines, in every YAML file surgelab reads
(issue 29: ``rate: 2`` then ``rate: 500`` silently ran 500 req/s)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.engine import ProfileError, load_profile
from surgelab.proxy import ProxyConfigError, read_schedule
from surgelab.scenario import ScenarioError, load_scenario
from surgelab.server import ConfigError, read_fault_file
from surgelab.sim import FleetError, load_fleet

SCENARIO = """\
name: dup
target:
  url: http://127.0.0.1:1/v1
  model: m
load:
  rate: 2
  duration: 5s
  rate: 500
"""


def test_a_scenario_key_given_twice_names_both_lines(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.messages == [f"{path}:8: invalid YAML: load.rate is given twice (lines 6 and 8); keep one"]
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {path}:8: invalid YAML: load.rate is given twice (lines 6 and 8); keep one"
    ]


def test_every_duplicate_is_reported_at_once_and_merge_keys_are_not_duplicates(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: dup\nbase: &t {url: 'http://127.0.0.1:1/v1', model: m}\n"
        "target:\n  <<: *t\n  model: other\n"  # a merge key overridden: YAML's own way, not a duplicate
        "load: {rate: 2, duration: 5s}\nname: again\nworkload:\n  mix:\n    - {name: a, weight: 1, weight: 2}\n"
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.messages == [
        f"{path}:7: invalid YAML: name is given twice (lines 1 and 7); keep one",
        f"{path}:10: invalid YAML: workload.mix[0].weight is given twice (lines 10 and 10); keep one",
    ]


def test_keys_equal_once_read_are_duplicates(tmp_path):
    """YAML 1.1 reads ``on`` and ``true`` (and ``1`` and ``0x1``) as one key."""
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("  rate: 500\n", "") + "workload:\n  sampling:\n    1: a\n    0x1: b\n")
    with pytest.raises(ScenarioError, match=r"workload\.sampling\.1 is given twice \(lines 10 and 11\)"):
        load_scenario(path)


@pytest.mark.parametrize(
    ("kind", "text", "read", "error"),
    [
        ("fleet", "pools:\n  - profile: tiny\n    replicas: 1\n    replicas: 8\n", load_fleet, FleetError),
        ("faults", "error_rate: 1%\nerror_rate: 50%\n", read_fault_file, ConfigError),
        ("schedule", "- at: 1s\n  at: 5s\n", read_schedule, ProxyConfigError),
        ("profile", "decode_base_s: 0.006\ndecode_base_s: 6\n", load_profile, ProfileError),
    ],
)
def test_every_yaml_file_refuses_a_duplicate_key(tmp_path, kind, text, read, error):
    path = tmp_path / f"{kind}.yaml"
    path.write_text(text)
    with pytest.raises(error) as info:
        read(path)
    assert "is given twice (lines" in str(info.value), str(info.value)
    assert str(path) in str(info.value)


def test_a_set_flag_value_with_a_duplicate_key_is_refused(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("  rate: 500\n", ""))
    result = CliRunner().invoke(app, ["run", str(path), "--set", "workload.sampling={temperature: 0, temperature: 1}"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: --set workload.sampling: temperature is given twice; keep one"]
