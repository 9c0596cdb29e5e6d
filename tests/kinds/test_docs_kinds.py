"""Every scenario snippet of docs/kinds.md validates and runs, as written, for a second."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from surgelab.kinds import KINDS
from surgelab.scenario.loader import build_scenario

DOC = Path(__file__).resolve().parents[2] / "docs" / "kinds.md"
SNIPPETS = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_a_snippet_per_kind():
    """Every registered kind but chat and completions, which every other page shows."""
    kinds = {m for s in SNIPPETS for m in re.findall(r"^  kind: (\w+)", s, flags=re.M)}
    assert kinds == set(KINDS.names) - {"chat", "completions"}


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_snippet_runs(snippet, embedded, kserve, run, reconciled, tmp_path):
    data = yaml.safe_load(snippet)
    url, model = (kserve + "/v1", "llama") if "kserve_v2" in snippet else (embedded, "surgelab-tiny")
    scenario = build_scenario(
        {"target": {"url": url, "model": model}, "load": {"rate": 6, "duration": "1s"}, **data}, source=str(DOC)
    )
    summary = run(scenario, tmp_path).summary
    if "session:" not in snippet:  # a session's later turns have ids of their own, not 0..n-1
        reconciled(summary, tmp_path)
    assert summary["requests"]["ok"] > 0 and summary["requests"]["failed"] == 0, summary["requests"]["by_state"]
