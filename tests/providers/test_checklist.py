"""Seed 004's whole checklist can be scored: model families, regions, network latency, burst
behaviour, dedicated resources, a burst plan, support and compliance — each verdict saying
whether it rests on a measurement or on what the provider declared (with source and date)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from surgelab.engine import load_profile
from surgelab.providers.evidence import EvidenceError, collect
from surgelab.providers.probe_http import Endpoint
from surgelab.providers.probe_network import model_families
from surgelab.providers.probe_result import ProbeSettings
from surgelab.providers.probes import run_probes
from surgelab.providers.requirements import RequirementError, load_requirements
from surgelab.providers.score import score
from surgelab.server.process import serve_process

from .fixtures import write_probe, write_run

EXAMPLES = Path(__file__).parents[2] / "examples" / "providers"


def test_model_ids_are_named_by_family() -> None:
    ids = ["deepseek-ai/DeepSeek-V3", "Qwen/Qwen2.5-72B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct", "gpt-4o-mini",
           "mistralai/Mixtral-8x7B", "yi-large", "typical-model"]  # fmt: skip
    assert model_families(ids) == ["deepseek", "gpt", "llama", "mistral", "mixtral", "qwen", "yi"]


def test_every_seed_item_scores_and_says_measured_or_declared(tmp_path) -> None:
    profile = load_requirements(EXAMPLES / "requirements.yaml")
    write_run(tmp_path / "api", p90_ms=1200.0)
    probe = write_probe(tmp_path / "probe-api.json", "api", max_context=65536, multi_turn_retention=24, openai_compat=1.0,
                        output_control=1.0, network_rtt=0.035, burst_slowdown=1.8, model_families=1.0)  # fmt: skip
    data = json.loads(probe.read_text())
    data["metrics"]["model_families"]["items"] = ["qwen"]  # measured: /models lists Qwen only
    probe.write_text(json.dumps(data))
    evidence = collect([f"api={tmp_path / 'api'}", str(probe), str(EXAMPLES / "declared" / "api.yaml")])
    card = score(profile, evidence)
    verdicts = {v.requirement.metric: v for v in card.verdicts}
    kinds = {metric: v.evidence for metric, v in verdicts.items()}
    assert kinds["regions"] == kinds["dedicated_path"] == kinds["burst_plan"] == kinds["compliance"] == "declared"
    assert kinds["network_rtt"] == kinds["burst_slowdown"] == kinds["p90(e2e)"] == "measured"
    assert kinds["volatility_7d"] == "none" and not verdicts["volatility_7d"].passed  # nothing monitored yet
    # The provider declares deepseek and qwen, /models shows qwen alone: the measurement wins, and fails.
    families = verdicts["model_families"]
    assert (families.evidence, families.items, families.passed) == ("measured", ("qwen",), False)
    assert verdicts["regions"].passed and verdicts["regions"].observed == 4
    assert "as of 2026-11-20" in verdicts["compliance"].how
    assert verdicts["network_rtt"].passed and verdicts["burst_slowdown"].passed
    row = card.to_dict()["matrix"]["api"]
    assert {r["evidence"] for r in row} == {"measured", "declared", "none"}


def test_includes_is_for_sets_and_a_declared_fact_needs_its_source(tmp_path) -> None:
    (tmp_path / "r.yaml").write_text('business_fit:\n  - {require: "max_context includes 64k"}\n')
    with pytest.raises(RequirementError, match="'includes' applies to"):
        load_requirements(tmp_path / "r.yaml")
    bad = tmp_path / "d.yaml"
    bad.write_text(yaml.safe_dump({"kind": "surgelab-declared", "target": "x", "facts": {"regions": {"value": ["a"]}}}))
    with pytest.raises(EvidenceError, match=r"d.yaml:\d+: facts.regions.source: required field is missing"):
        collect([str(bad)])
    bad.write_text(yaml.safe_dump({"kind": "surgelab-declared", "target": "x",
                                   "facts": {"uptime": {"value": 1, "source": "s", "as_of": "2026-01-01"}}}))  # fmt: skip
    with pytest.raises(EvidenceError, match="unknown fact"):
        collect([str(bad)])


def test_network_families_and_burst_probes_on_a_real_server() -> None:
    # 4 slots: a burst of 8 waits for half of them; the network is loopback.
    with serve_process(["--max-num-seqs", "4", "--model", "Qwen/Qwen2.5-7B-Instruct"], profile="llama2-7b-a10") as url:
        endpoint = Endpoint(url, "Qwen/Qwen2.5-7B-Instruct", timeout=30.0)
        doc = asyncio.run(run_probes(endpoint, "local", ProbeSettings(only=("network", "families", "burst"))))
    metrics = doc["metrics"]
    assert 0 < metrics["network_rtt"]["value"] < 0.05  # loopback: well under 50 ms, and measured without inference
    assert metrics["model_families"]["items"] == ["qwen"]
    slowdown = metrics["burst_slowdown"]["value"]
    assert slowdown is not None and slowdown > 1.2, metrics["burst_slowdown"]["found"]


def test_a_burst_that_loses_requests_has_no_slowdown() -> None:
    with serve_process(["--max-inflight", "2"], profile="llama2-7b-a10") as url:
        served = load_profile("llama2-7b-a10").model
        doc = asyncio.run(run_probes(Endpoint(url, served, timeout=30.0), "x", ProbeSettings(only=("burst",))))
    burst = doc["metrics"]["burst_slowdown"]
    assert burst["value"] is None and "failed" in burst["found"], burst
