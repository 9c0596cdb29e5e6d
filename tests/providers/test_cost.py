"""Cost per million tokens and the break-even against a fleet sized by surgelab plan."""

from __future__ import annotations

import json

import pytest

from surgelab.providers.cost import break_even, cost_per_mtok, read_plan
from surgelab.scenario.model import Price

from .fixtures import summary, write_run


def test_token_and_hourly_prices_per_million_tokens() -> None:
    run = summary(tokens_per_s=2000.0, prompt_total=30_000, output_total=10_000, ok=100)
    api = cost_per_mtok("api", Price(input_per_mtok=1.0, output_per_mtok=3.0), run)
    assert api.per_mtok == pytest.approx(0.75 * 1.0 + 0.25 * 3.0) and api.tokens_per_request == 400
    fleet = cost_per_mtok("gpu", Price(per_hour=7.2), run)
    assert fleet.per_mtok == pytest.approx(7.2 / (2000 * 3600) * 1e6)  # = 1.0
    assert "at the measured load" in fleet.how
    assert cost_per_mtok("x", None, run).per_mtok is None
    assert cost_per_mtok("idle", Price(per_hour=1.0), summary(tokens_per_s=0.0)).per_mtok is None


def test_break_even_within_and_beyond_the_fleet() -> None:
    # 2 instances at 2.5/h = 5/h; the API at 0.5/Mtok breaks even at 10 Mtok/h;
    # the fleet serves 2 × 5 req/s × 500 tok × 3600 = 18 Mtok/h, so the break-even is reachable.
    inside = break_even(0.5, 5.0, 2, 500, 5.0)
    assert inside.mtok_per_hour == pytest.approx(10.0) and inside.fleet_capacity_mtok_per_hour == pytest.approx(18.0)
    assert (
        inside.requests_per_day == pytest.approx(10e6 * 24 / 500)
        and "below 10 Mtok/h the API is cheaper" in inside.verdict
    )
    beyond = break_even(0.2, 5.0, 2, 500, 5.0)  # 25 Mtok/h > 18
    assert "cheaper at every volume this fleet can serve" in beyond.verdict
    assert "always cheaper" in break_even(0.0, 5.0, 1, 500, None).verdict


def test_plan_json_is_read_and_checked(tmp_path) -> None:
    plan = {"capacity": 4.0, "fleet": {"total": 3, "gpus": 3, "cost_per_hour": 7.5}}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert read_plan(tmp_path) == {"instances": 3, "capacity_rps": 4.0, "gpus": 3, "cost_per_hour": 7.5}
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a plan.json"):
        read_plan(tmp_path / "bad.json")


def test_cost_cli_with_a_plan(tmp_path, cli) -> None:
    write_run(tmp_path / "api", tokens_per_s=1000.0, prompt_total=40_000, output_total=10_000, ok=100)
    write_run(tmp_path / "gpu", tokens_per_s=1000.0, prompt_total=40_000, output_total=10_000, ok=100)
    scenario = {"target": {"url": "http://127.0.0.1:9/v1", "model": "m"}, "targets": [
        {"name": "api", "url": "http://127.0.0.1:9/v1", "model": "m", "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
        {"name": "gpu", "url": "http://127.0.0.1:9/v1", "model": "m", "price": {"per_hour": 2.0}}],
        "load": {"rate": 1, "duration": "1s"}}  # fmt: skip
    (tmp_path / "s.yaml").write_text(json.dumps(scenario))
    (tmp_path / "plan.json").write_text(
        json.dumps({"capacity": 2.0, "fleet": {"total": 4, "gpus": 4, "cost_per_hour": None}})
    )
    out = tmp_path / "cost.json"
    result = cli("cost", f"api={tmp_path / 'api'}", f"gpu={tmp_path / 'gpu'}", "--scenario", str(tmp_path / "s.yaml"),
                 "--plan", str(tmp_path / "plan.json"), "--fleet", "gpu", "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["costs"][0]["per_mtok"] == pytest.approx(0.7)
    # 4 × 2.0/h = 8/h ÷ 0.7/Mtok = 11.43 Mtok/h; capacity 4 × 2 req/s × 500 tok × 3600 = 14.4 Mtok/h
    assert doc["break_even"]["api"]["mtok_per_hour"] == pytest.approx(8 / 0.7)
    assert "break-even api (per token) vs gpu (per hour)" in result.stdout
