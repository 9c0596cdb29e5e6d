"""``surgelab plan --search``: the cheapest fleet that meets the SLO, checked against brute force on a small space."""

from __future__ import annotations

import json

import pytest
import yaml

from surgelab.plan.search import mean_lengths, prune, search, trial, workload
from surgelab.plan.space import SpaceError, load_space

CHAT = {"name": "chat", "seed": 3, "target": {"url": "http://127.0.0.1:9/v1", "model": "m"},
        "load": {"rate": 10, "duration": "20s", "warmup": "4s", "arrival": "poisson"},
        "workload": {"system_prompt_tokens": 100, "prompt_tokens": {"dist": "lognormal", "mean": 500, "std": 200, "max": 2000},
                     "output_tokens": {"dist": "uniform", "min": 100, "max": 300}}}  # fmt: skip
SPACE = {"name": "small", "workload": "chat.yaml", "peak": 30, "slo": ["p99(ttft) < 500ms", "p99(e2e) < 6s", "error_rate < 1%"],
         "model": ["qwen2.5-7b", "llama3.1-70b"], "gpus": {"h100": 2.49, "l40s": 0.99}, "tp": [1, 2], "weights": ["bf16", "fp8"],
         "max_num_seqs": [128], "max_num_batched_tokens": [2048], "replicas": {"min": 1, "max": 12}, "seeds": 1}  # fmt: skip


def _space(tmp_path, **changes):
    (tmp_path / "chat.yaml").write_text(yaml.safe_dump(CHAT))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({**SPACE, **changes}))
    space, base = load_space(tmp_path / "space.yaml")
    return space, base, workload(space, base)


def test_physics_prunes_with_reasons(tmp_path):
    space, base, scenario = _space(tmp_path)
    lengths = mean_lengths(scenario)
    by_label = {c.label(): prune(space, base, c, 30, lengths) for c in space.candidates()}
    seventy = by_label["llama3.1-70b 1×l40s bf16 seqs 128 tokens 2048 least_outstanding"]
    assert seventy.status == "pruned" and "memory:" in seventy.reason and "needs at least" in seventy.reason
    qwen = by_label["qwen2.5-7b 1×h100 bf16 seqs 128 tokens 2048 least_outstanding"]
    assert qwen.status == "candidate" and qwen.floor >= 1
    tight = prune(space.model_copy(update={"replicas": space.replicas.model_copy(update={"max": 1})}), base,
                  next(c for c in space.candidates() if "1×l40s" in c.label() and "qwen" in c.label()), 300, lengths)  # fmt: skip
    assert tight.status == "pruned" and tight.reason.startswith("capacity: needs at least")


def test_a_trial_stops_once_its_objective_is_lost(tmp_path):
    space, base, scenario = _space(tmp_path)
    cand = next(c for c in space.candidates() if c.label().startswith("qwen2.5-7b 1×l40s bf16"))
    t = trial(scenario, cand, 1, cand.deployment(), scenario.seed)  # 30 req/s on one L40S: hopeless
    assert not t.passed and t.stopped_early and "lost:" in t.why


def test_a_trial_ended_by_the_workloads_own_guard_does_not_pass(tmp_path):
    """The simulator keeps a workload's abort guards as a run does; a trial they end early is not judged
    on the part it ran (here the guard's P99 bound trips long before the search's own budget is spent)."""
    guarded = {**CHAT, "slo": {"e2e": "1s"}, "guards": {"abort": {"p99_over_slo": 1.5, "window": "10s"}}}
    (tmp_path / "chat.yaml").write_text(yaml.safe_dump(guarded))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({**SPACE, "slo": ["p99(e2e) < 60s"]}))
    space, base = load_space(tmp_path / "space.yaml")
    scenario = workload(space, base)
    cand = next(c for c in space.candidates() if c.label().startswith("qwen2.5-7b 1×h100 bf16"))
    t = trial(scenario, cand, 1, cand.deployment(), scenario.seed)  # 30 req/s on one H100: E2E past 1.5 s soon
    assert not t.passed and t.stopped_early and t.why.startswith("aborted"), t


def test_the_search_finds_the_cheapest_that_brute_force_finds(tmp_path):
    space, base, scenario = _space(tmp_path)
    result = search(space, base, scenario)
    assert result.winner is not None
    passed = [o for o in result.outcomes if o.status == "passed"]
    best_search = min(o.replicas * o.candidate.replica_hour for o in passed)
    brute = []
    lengths = mean_lengths(scenario)
    for cand in space.candidates():
        if prune(space, base, cand, 30, lengths).reason.startswith("memory"):
            continue
        for n in range(1, space.replicas.max + 1):
            if trial(scenario, cand, n, cand.deployment(), scenario.seed).passed:
                brute.append(n * cand.replica_hour)
                break
    assert min(brute) == pytest.approx(best_search)
    w = result.winner
    assert w.robust_replicas >= w.replicas and w.cost_per_hour >= best_search
    assert any(t.pessimistic for t in w.trials) and {t.seed for t in w.trials} >= {3, 4}
    assert result.front and result.front[0].cost_per_hour <= w.cost_per_hour


def test_the_cli_writes_the_winner_ready_to_simulate(tmp_path, cli):
    _space(tmp_path)
    out = cli(
        "plan", "--search", str(tmp_path / "space.yaml"), "--workers", "1", "--out", str(tmp_path / "out"), timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "cheapest:" in out.stdout and "engine model: E2E ±" in out.stdout
    data = json.loads((tmp_path / "out" / "search.json").read_text())
    winner = data["winner"]
    fleet = yaml.safe_load((tmp_path / "out" / "fleet.yaml").read_text())
    assert fleet["pools"][0]["replicas"] == winner["robust_replicas"]
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["fleet"]["total"] == winner["robust_replicas"]
    (tmp_path / "peak.yaml").write_text(yaml.safe_dump({**CHAT, "load": {**CHAT["load"], "rate": 30},
                                                        "thresholds": SPACE["slo"]}))  # fmt: skip
    check = cli("simulate", str(tmp_path / "peak.yaml"), "--fleet", str(tmp_path / "out" / "fleet.yaml"),
                "--out", str(tmp_path / "check"), timeout=300)  # fmt: skip
    assert check.returncode == 0, check.stderr
    summary = json.loads((tmp_path / "check" / "summary.json").read_text())
    assert summary["thresholds_passed"], summary["thresholds"]


SPIKE = {**CHAT, "name": "spike", "load": {"rate": {"type": "spike", "base": 4, "peak": 40, "at": "40s", "rise": "10s",
                                                  "hold": "40s", "decay": "10s", "after": "40s"},
                                         "warmup": "10s", "arrival": "poisson"}}  # fmt: skip
HPA = {"metric": ["rps", "in_flight"], "target": [10, 20], "min": [1, 2], "max": [8], "cold_start": "15s",
       "settings": {"sync_period": "5s", "scale_down": {"stabilization": "20s"}}}  # fmt: skip


def _hpa_space(tmp_path, **changes):
    (tmp_path / "spike.yaml").write_text(yaml.safe_dump(SPIKE))
    data = {**SPACE, "workload": "spike.yaml", "peak": None, "model": ["qwen2.5-7b"], "gpus": {"h100": 2.49, "l40s": 0.99},
            "tp": [1], "weights": ["bf16"], "autoscale": HPA, "seeds": 1, **changes}  # fmt: skip
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    space, base = load_space(tmp_path / "space.yaml")
    return space, base, workload(space, base)


def test_an_autoscaled_search_finds_the_cheapest_that_brute_force_finds(tmp_path):
    """Fixed counts and every HPA of the space on the spike (an HPA from its min, costing its mean
    replicas): the search's cheapest is brute force's, and here an HPA beats the fixed fleet the
    peak needs, holding at the model's slow end with its own settings."""
    space, base, scenario = _hpa_space(tmp_path)
    assert len(space.candidates()) == 2 + 16 and sum(c.autoscale is not None for c in space.candidates()) == 16
    result = search(space, base, scenario)
    nominal = [o.trials[0].mean_replicas * o.candidate.replica_hour if o.candidate.autoscale else
               o.replicas * o.candidate.replica_hour for o in result.outcomes if o.status == "passed"]  # fmt: skip
    brute = []
    for cand in space.candidates():
        if cand.autoscale is not None:
            t = trial(scenario, cand, cand.autoscale[2], cand.deployment(), scenario.seed)
            brute += [t.mean_replicas * cand.replica_hour] if t.passed else []
            continue
        fewest = next((n for n in range(1, 13) if trial(scenario, cand, n, cand.deployment(), scenario.seed).passed), None)
        brute += [fewest * cand.replica_hour] if fewest else []
    assert min(brute) == pytest.approx(min(nominal))
    w = result.winner
    fixed = min(o.cost_per_hour for o in result.outcomes if o.status == "passed" and not o.candidate.autoscale)
    assert w.candidate.autoscale is not None and w.cost_per_hour < fixed, "the spike's HPA costs less than its peak's fleet"
    assert w.robust_replicas == w.candidate.autoscale[2] and any(t.pessimistic for t in w.trials)
    assert w.mean_replicas >= w.trials[0].mean_replicas  # the robust checks' highest mean
    assert 1 < w.mean_replicas < w.candidate.autoscale[3], "the HPA followed the spike, neither idle nor at its max"
    assert all(o.reason for o in result.outcomes if o.status in ("failed", "skipped", "pruned"))


def test_an_autoscaled_winner_is_written_with_its_hpa(tmp_path, cli):
    _hpa_space(tmp_path, gpus={"h100": 2.49}, autoscale={**HPA, "metric": ["rps"], "target": [20], "min": [1]})
    out = cli("plan", "--search", str(tmp_path / "space.yaml"), "--out", str(tmp_path / "out"), timeout=300)
    assert out.returncode == 0, out.stderr
    winner = json.loads((tmp_path / "out" / "search.json").read_text())["winner"]
    assert winner["replicas_text"].startswith("HPA 1–8, mean ") and "HPA 1–8, mean" in out.stdout
    pool = yaml.safe_load((tmp_path / "out" / "fleet.yaml").read_text())["pools"][0]
    assert pool["replicas"] == 1 and pool["cold_start"] == 15
    assert pool["autoscale"] == {"metric": "rps", "target": 20, "min": 1, "max": 8, "sync_period": "5s",
                                 "scale_down": {"stabilization": "20s"}}  # fmt: skip
    hpa = yaml.safe_load((tmp_path / "out" / "hpa.yaml").read_text())
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 8)
    metric = hpa["spec"]["metrics"][0]["pods"]
    assert metric["metric"]["name"] == "vllm_requests_per_second" and metric["target"]["averageValue"] == "20"
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 20
    (tmp_path / "check.yaml").write_text(yaml.safe_dump({**SPIKE, "thresholds": SPACE["slo"]}))
    check = cli("simulate", str(tmp_path / "check.yaml"), "--fleet", str(tmp_path / "out" / "fleet.yaml"),
                "--out", str(tmp_path / "check"), timeout=300)  # fmt: skip
    assert check.returncode == 0, check.stderr
    summary = json.loads((tmp_path / "check" / "summary.json").read_text())
    assert summary["thresholds_passed"] and summary["fleet"]["average_instances"] == pytest.approx(
        winner["trials"][0]["mean_replicas"]
    )
    # the plan buys the fleet the HPA reached at the peak (the simulation's own), not its max of 8
    peak = json.loads((tmp_path / "check" / "fleet.json").read_text())["pools"]["replica"]["peak_replicas"]
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert 1 < peak < 8 and plan["fleet"]["total"] == winner["peak_replicas"] == peak


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"gpus": {"h900": 1.0}}, "space.yaml:.*gpus: .*unknown GPU h900"),
        ({"profiles": {"x.yaml": 1.0}}, "give model and gpus .*or profiles"),
        ({"weights": ["fp5"]}, "weights: .*unknown precision fp5"),
        ({"replicas": {"min": 4, "max": 2}}, "replicas: .*min \\(4\\) must not exceed max \\(2\\)"),
        ({"autoscale": {"metric": "p99_latency", "target": 1, "max": 4}}, "autoscale.metric\\[0\\]: .*'rps'"),
        ({"autoscale": {"metric": "rps", "target": 1, "min": 5, "max": 4}}, "autoscale: .*no min \\(5\\) at or below"),
        ({"autoscale": {"metric": "rps", "target": 1, "max": 4, "settings": {"sync_period": "soon"}}},
         "autoscale: .*settings.sync_period"),
        ({"autoscale": {"metric": "rps", "target": 1, "max": 4, "settings": {"target": 3}}},
         "autoscale: .*target are choices here"),
    ],
)
def test_bad_spaces_are_one_line_with_the_line(tmp_path, changes, error):
    with pytest.raises(SpaceError, match=error):
        _space(tmp_path, **changes)


def test_bad_spaces_exit_2_from_the_cli(tmp_path, cli):
    (tmp_path / "space.yaml").write_text("name: x\nworkload: none.yaml\nslo: ['p99(e2e) < 1s']\nmodel: qwen2.5-7b\n"
                                         "gpus: {h100: 1}\ngpus: {a100: 1}\n")  # fmt: skip
    out = cli("plan", "--search", str(tmp_path / "space.yaml"))
    assert out.returncode == 2 and "given twice" in out.stderr + out.stdout and "Traceback" not in out.stderr
