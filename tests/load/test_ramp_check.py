"""A load that climbs faster than the target warms up is said before the run (seed 000: a ramp
that is too fast reports a false crash), in validate, preview, at the start and in summary.json."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.load.ramp_check import ramp_warnings
from surgelab.scenario.loader import build_scenario


def _scenario(load: dict, warm_up: str | float = 0):
    return build_scenario(
        {"target": {"url": "http://127.0.0.1:9/v1", "model": "m", "warm_up": warm_up}, "load": load}, source="t"
    )


@pytest.mark.parametrize(
    ("load", "warm_up", "said"),
    [
        ({"rate": {"type": "ramp", "start": 1, "end": 100, "over": "10s"}, "duration": "60s"}, "30s", "at 4.95s"),
        (
            {"rate": {"type": "ramp", "start": 1, "end": 100, "over": "10s"}, "duration": "60s", "warmup": "30s"},
            0,
            "load.warmup",
        ),
        ({"concurrency": {"type": "step", "start": 0, "step": 16, "hold": "2s", "max": 64}}, "10s", "at 4s"),
        ({"rate": 50}, "1m", "starts at 50 req/s"),
        ({"rate": {"type": "ramp", "start": 1, "end": 100, "over": "2m"}}, "30s", None),  # slow enough
        ({"rate": 50, "warmup": "10s"}, 0, None),  # a steady load with an excluded warm-up is the usual practice
        (
            {"rate": {"type": "spike", "base": 5, "peak": 100, "at": "60s", "hold": "10s"}, "duration": "90s"},
            "30s",
            None,
        ),
    ],
)
def test_climbs_faster_than_the_warm_up_are_warned_of(load, warm_up, said) -> None:
    warnings = ramp_warnings(_scenario(load, warm_up))
    if said is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and said in warnings[0] and "false crash" in warnings[0], warnings


def test_validate_and_preview_say_it(tmp_path) -> None:
    path = tmp_path / "fast.yaml"
    path.write_text(yaml.safe_dump({"target": {"url": "http://127.0.0.1:9/v1", "model": "m", "warm_up": "30s"},
                                    "load": {"rate": {"type": "ramp", "start": 1, "end": 100, "over": "10s"}}}))  # fmt: skip
    for command in ("validate", "preview"):
        out = CliRunner().invoke(app, [command, str(path)])
        assert out.exit_code == 0, out.output
        assert "warning:" in out.output and "false crash" in " ".join(out.output.split()), out.output


def test_a_run_says_it_at_the_start_and_keeps_it_in_the_summary(
    zero_server, scenario_for, run, tmp_path, capsys
) -> None:
    scenario = scenario_for(
        zero_server.url,
        load={"rate": 20, "duration": "1s"},
        target={"url": zero_server.url, "model": "m", "warm_up": "5s"},
    )
    summary = run(scenario, tmp_path / "run").summary
    assert "false crash" in capsys.readouterr().err
    assert any("false crash" in w for w in summary["warnings"])
