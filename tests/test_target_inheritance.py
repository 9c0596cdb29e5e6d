"""With ``targets:``, the top-level ``target:`` settings reach every entry unless it sets its own (issue 29).

Seen before: ``examples/providers/dual-active.yaml`` sets a 5 s first-token timeout in ``target:``;
its targets loaded with the 60 s default and ``validate`` said ok, so requests to a hung primary
waited a minute instead of failing over in seconds.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[1]

ROUTED = """\
targets:
  - {name: primary, url: http://127.0.0.1:1/v1, weight: 80}
  - name: backup
    url: http://127.0.0.1:2/v1
    model: other
    timeouts: {total: 9s}
    headers: {X-Own: b}
routing:
  mode: route
  health: {interval: 15s, failures: 3, max_switch_over: 30s}
target:
  url: http://127.0.0.1:1/v1
  model: chat
  api_key_env: KEY
  headers: {X-Team: a}
  timeouts: {connect: 1s, first_token: 5s, total: 20s}
  retry: {max_attempts: 2}
load: {rate: 4, duration: 10s}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_examples_targets_get_its_first_token_timeout():
    scenario = load_scenario(ROOT / "examples/providers/dual-active.yaml")
    assert [t.timeouts.first_token for t in scenario.targets] == [5.0, 5.0]
    assert [t.timeouts.connect for t in scenario.targets] == [1.0, 1.0]


def test_every_setting_is_inherited_key_by_key_and_an_entrys_own_wins(tmp_path):
    primary, backup = load_scenario(_write(tmp_path, ROUTED)).targets
    assert (primary.model, primary.api_key_env, primary.headers) == ("chat", "KEY", {"X-Team": "a"})
    assert (primary.timeouts.first_token, primary.timeouts.total) == (5.0, 20.0)
    assert primary.retry is not None and primary.retry.max_attempts == 2
    assert str(backup.url) == "http://127.0.0.1:2/v1" and backup.model == "other"
    assert (backup.timeouts.connect, backup.timeouts.first_token, backup.timeouts.total) == (1.0, 5.0, 9.0)
    assert backup.headers == {"X-Team": "a", "X-Own": "b"}


def test_a_wrong_top_level_target_is_reported_once_at_its_own_line(tmp_path):
    try:
        load_scenario(_write(tmp_path, ROUTED.replace("first_token: 5s", "first_token: soon")))
    except ScenarioError as exc:
        messages = exc.messages
    else:
        raise AssertionError("a first_token of 'soon' was accepted")
    assert len(messages) == 1 and "target.timeouts.first_token" in messages[0] and ":16:" in messages[0], messages


def test_validate_prints_each_targets_resolved_timeouts_and_the_health_checks(tmp_path):
    result = CliRunner().invoke(app, ["validate", str(_write(tmp_path, ROUTED))])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == ("target primary: http://127.0.0.1:1/v1, weight 80 — model chat; timeouts: connect 1s, "
                        "first token 5s, total 20s; retry up to 2 attempts on 429, 503, connection_error")  # fmt: skip
    assert (
        "target backup: http://127.0.0.1:2/v1, weight 1 — model other; timeouts: connect 1s, first token 5s, total 9s"
        in lines[2]
    )
    assert lines[3].startswith("health checks: GET /models every 15s, timeout 1s; out after 3 consecutive failures")
    assert lines[3].endswith("switch-over bound 30s")
    # the seed's checks alone cannot take a hung target out in under 30 s: 3 failed checks 15 s apart
    assert lines[4] == ("warning: checks alone take 31s–46s to take out a target that hangs (3 failed checks 15s apart), "
                        "not under the 30s bound: only its requests failing sooner can (the shortest first-token "
                        "timeout is 5s)")  # fmt: skip
