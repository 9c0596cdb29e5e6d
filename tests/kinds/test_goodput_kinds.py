"""Goodput in a mixed run judges each request by the objectives that fit its kind (issue 20).

The seeds' mixed-tiers case: a tier with a TTFT objective holds chat and embeddings. An
embedding has no first token, so the TTFT objective cannot apply to it; on a server that meets
every objective, every goodput — the headline, per class, per tier, per kind — is 1.
"""

from __future__ import annotations

import pytest

MIX = [
    {"name": "paid-chat", "weight": 2, "kind": "chat", "tier": "paid", "prompt_tokens": 24, "output_tokens": 6},
    {"name": "free-chat", "weight": 1, "kind": "chat", "tier": "free", "prompt_tokens": 24, "output_tokens": 6},
    {"name": "embed", "weight": 2, "kind": "embeddings", "tier": "free", "prompt_tokens": 32},
    {"name": "rank", "weight": 1, "kind": "rerank", "tier": "free", "prompt_tokens": 10,
     "documents": {"count": 3, "tokens": 20}},
]  # fmt: skip


@pytest.fixture(scope="module")
def mixed_tiers(embedded, scenario_for, run, reconciled, tmp_path_factory):
    scenario = scenario_for(
        embedded, model="surgelab-tiny", target={"stream": True},
        load={"rate": 12, "duration": "2s", "arrival": "constant"}, workload={"mix": MIX},
        tiers={"paid": {"slo": {"ttft": "5s", "tpot": "1s"}}, "free": {"slo": {"ttft": "5s"}}},
        slo={"e2e": "30s"}, kinds={"rerank": {"slo": {"e2e": "20s"}}},
    )  # fmt: skip
    run_dir = tmp_path_factory.mktemp("mixed-tiers")
    result = run(scenario, run_dir)
    reconciled(result.summary, run_dir)
    return result.summary


def test_every_goodput_is_one_on_a_server_that_meets_every_objective(mixed_tiers):
    s = mixed_tiers
    assert s["requests"]["failed"] == 0 and s["requests"]["ok"] >= 20
    assert s["goodput"]["fraction"] == pytest.approx(1.0), "the headline counted embeddings and reranks as misses"
    for group in ("by_class", "by_tier", "by_kind", "by_phase"):
        for name, block in s[group].items():
            assert block["goodput"]["fraction"] == pytest.approx(1.0), f"{group}.{name}"
    assert set(s["by_kind"]) == {"chat", "embeddings", "rerank"}
    # one judgement everywhere: the goodputs of the parts add up to the headline's
    for group in ("by_class", "by_tier", "by_kind"):
        parts = sum(b["goodput"]["requests_per_s"] for b in s[group].values())
        assert parts == pytest.approx(s["goodput"]["requests_per_s"]), group
    assert s["goodput"]["requests_per_s"] == pytest.approx(s["throughput"]["requests_per_s"])
    # what each kind was judged by: no TTFT for embeddings or rerank, the kind's own E2E for rerank
    assert s["by_kind"]["embeddings"]["goodput"]["slo_ms"] == {"ttft": None, "itl": None, "tpot": None, "e2e": 30000.0}
    assert s["by_kind"]["rerank"]["goodput"]["slo_ms"]["e2e"] == 20000.0
