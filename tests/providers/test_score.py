"""Scoring: evidence from run dirs, compare dirs, route runs and probes; matrix, ranking, explanations."""

from __future__ import annotations

import json

import pytest

from surgelab.providers.evidence import EvidenceError, collect
from surgelab.providers.requirements import load_requirements
from surgelab.providers.score import score
from surgelab.scenario.model import Price

from .fixtures import summary, write_probe, write_run

PROFILE = """\
name: seed
core_performance:
  - {name: P90, require: "p90(e2e) <= 3s", weight: 3, must: true}
  - {name: errors, require: "error_rate < 0.5%", weight: 3}
business_fit:
  - {name: context, require: "max_context >= 64k", weight: 2}
  - {name: memory, require: "multi_turn_retention >= 20", weight: 1}
architecture_compatibility:
  - {name: compat, require: "openai_compat == pass", weight: 2}
commercial:
  - {name: cost, require: "cost_per_mtok <= 2", weight: 1}
"""


@pytest.fixture()
def profile(tmp_path):
    (tmp_path / "r.yaml").write_text(PROFILE)
    return load_requirements(tmp_path / "r.yaml")


def _compare_dir(root, **targets):
    root.mkdir()
    for name, kwargs in targets.items():
        write_run(root / name, **kwargs)
    (root / "compare-index.json").write_text(json.dumps({"targets": list(targets), "runs": {n: n for n in targets}}))
    return root


def test_matrix_ranking_and_explanations(tmp_path, profile) -> None:
    study = _compare_dir(
        tmp_path / "study", fast=dict(p90_ms=1800, error_rate=0.001), slow=dict(p90_ms=4200, error_rate=0.02)
    )
    write_probe(tmp_path / "fast.json", "fast", max_context=131072, multi_turn_retention=24, openai_compat=1.0)
    write_probe(tmp_path / "slow.json", "slow", max_context=32768, multi_turn_retention=0, openai_compat=1.0)
    evidence = collect([str(study), str(tmp_path / "fast.json"), str(tmp_path / "slow.json")])
    prices = {"fast": Price(input_per_mtok=0.5, output_per_mtok=1.5), "slow": Price(per_hour=36.0)}
    card = score(profile, evidence, prices)
    matrix = {t: [v.passed for v in card.verdicts if v.target == t] for t in card.targets}
    # slow: 36/h ÷ (1000 tok/s × 3600) = 10/Mtok fails the cost line; fast: 0.8 × 0.5 + 0.2 × 1.5 = 0.7 passes
    assert matrix == {"fast": [True] * 6, "slow": [False, False, False, False, True, False]}
    assert [(r.target, round(r.score, 3), r.qualified) for r in card.ranking] == [
        ("fast", 1.0, True),
        ("slow", round(2 / 12, 3), False),
    ]
    assert card.ranking[1].failed_musts == ["P90"]
    why = {v.requirement.name: v.explain() for v in card.failures()}
    assert "measured 4.2 s, needs <= 3 s" in why["P90"] and "latency_ms.e2e.p90" in why["P90"]
    assert "measured 2.00%, needs < 0.50%" in why["errors"]
    assert "measured 32,768 tokens, needs >= 65,536 tokens" in why["context"] and "slow.json" in why["context"]
    assert "measured 10, needs <= 2" in why["cost"] and "36/h" in why["cost"]
    assert card.verdict("fast", 5).observed == pytest.approx(0.7)


def test_the_worst_of_several_runs_is_judged_and_missing_evidence_fails_with_the_command(tmp_path, profile) -> None:
    a = write_run(tmp_path / "a", p90_ms=2000)
    b = write_run(tmp_path / "b", p90_ms=3500)
    card = score(profile, collect([f"prov={a}", f"prov={b}"]))
    p90 = card.verdict("prov", 0)
    assert not p90.passed and p90.observed == pytest.approx(3.5) and p90.source == str(b)
    context = card.verdict("prov", 2)
    assert context.observed is None and "surgelab probe" in context.explain()
    cost = card.verdict("prov", 5)
    assert "price" in cost.explain()


def test_route_runs_split_into_their_targets(tmp_path, profile) -> None:
    data = summary()
    data["by_target"] = {"primary": summary(p90_ms=900), "backup": summary(p90_ms=5000)}
    (tmp_path / "route").mkdir()
    (tmp_path / "route" / "summary.json").write_text(json.dumps(data))
    card = score(profile, collect([str(tmp_path / "route")]))
    assert card.targets == ["primary", "backup"]
    assert card.verdict("primary", 0).passed and not card.verdict("backup", 0).passed
    assert "by_target.backup" in card.verdict("backup", 0).source


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "nothing", "not a run directory"),
        (lambda p: (p / "x.json").write_text("{}") and p / "x.json", "not a probe result"),
        (lambda p: (p / "y.json").write_text("[") and p / "y.json", "cannot read"),
    ],
)
def test_unusable_inputs_are_named(tmp_path, make, message) -> None:
    with pytest.raises(EvidenceError, match=message):
        collect([str(make(tmp_path))])


def test_score_a_real_run_and_probe_of_the_embedded_server(tmp_path, scenario_for, run, cli) -> None:
    from surgelab.aio import run_async
    from surgelab.providers.probe_http import Endpoint
    from surgelab.providers.probes import ProbeSettings, run_probes
    from surgelab.server.process import serve_process

    with serve_process(["--error-rate", "20%", "--model", "ok"], profile="tiny") as lossy, serve_process(profile="tiny") as clean:
        lossy_run = scenario_for(lossy, load={"rate": 40, "duration": "1s", "arrival": "constant"}, preflight=False)
        run(lossy_run, tmp_path / "lossy")  # 20 % of answers are errors: the pre-flight might meet one
        doc = run_async(
            run_probes(
                Endpoint(clean, "surgelab-tiny"),
                "lossy",
                ProbeSettings(only=("conformance", "context"), context_precision=0.0),
            )
        )
    (tmp_path / "probe.json").write_text(json.dumps(doc))
    (tmp_path / "r.yaml").write_text(
        "core_performance:\n  - {require: error_rate < 0.5%, weight: 2}\n"
        "business_fit:\n  - require: max_context >= 64k\n"
        "architecture_compatibility:\n  - {require: openai_compat == pass, must: true}\n"
    )
    result = cli("score", str(tmp_path / "lossy"), str(tmp_path / "probe.json"), "--requirements", str(tmp_path / "r.yaml"),
                 "--out", str(tmp_path / "score.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr  # the must (conformance) passed: qualified
    card = json.loads((tmp_path / "score.json").read_text())
    errors, context, compat = card["matrix"]["lossy"]
    assert not errors["passed"] and 0.05 < errors["observed"] < 0.4
    assert not context["passed"] and context["observed"] == 32767
    assert compat["passed"] and card["ranking"][0]["score"] == pytest.approx(1 / 4)
    assert "needs >= 65,536 tokens" in result.stdout and "needs < 0.50%" in result.stdout
