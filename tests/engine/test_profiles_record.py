"""The built-in GPU profiles against the public record: every row of docs/profiles.md.

Each comparison in docs/profiles-data.yaml is replayed on the profile's Engine in virtual
time (all requests at t = 0, as vLLM's benchmark_serving.py sends them with
``--request-rate inf``) and the predicted figure must equal the one written in the data file
and in the document, so neither can go stale. ``python tests/engine/test_profiles_record.py``
prints the table.
"""

from __future__ import annotations

import functools
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from surgelab.engine import Engine, EngineRequest, load_profile

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "profiles-data.yaml"
DOC = ROOT / "docs" / "profiles.md"


def _requests(workload: dict) -> list[tuple[int, int]]:
    """[prompt, output] per request; an output of 0 (nothing streamed) stays 0 here."""
    if "repeat" in workload:
        r = workload["repeat"]
        return [(r["prompt"], r["output"])] * r["n"]
    if "prompts" in workload:
        return list(zip(workload["prompts"], workload["outputs"], strict=True))
    return [(p, o) for p, o in workload["requests"]]


def replay(profile_name: str, workload: dict) -> dict[str, float]:
    """Run the workload to completion; the figures vLLM's benchmark_serving reports.

    Every request reaches the engine ``request_overhead_s`` after t = 0 (the front end), as the
    simulator hands it over; the benchmark's clock starts at 0.

    A request whose published output was 0 tokens still costs its prefill (it is replayed
    with 1 token) but, as in the benchmark, counts 0 output tokens and a TTFT of 0, and has no
    TPOT.
    """
    profile = replace(load_profile(profile_name), **workload.get("server", {}))
    engine = Engine(profile, prefix_caching=False)
    lengths = {}
    for i, (prompt, output) in enumerate(_requests(workload)):
        lengths[str(i)] = output
        engine.add(EngineRequest(str(i), prompt, max(output, 1)))
    now, first, last = profile.request_overhead_s, {}, {}  # every request reaches the engine after the front end
    while engine.has_work:
        step = engine.step()
        now += step.duration
        for rid in step.emitted:
            first.setdefault(rid, now)
        for rid in step.finished:
            last[rid] = now
    ttft = [first[r] if n > 0 else 0.0 for r, n in lengths.items()]
    tpot = [(last[r] - first[r]) / (n - 1) for r, n in lengths.items() if n > 1]
    end = max(last.values())
    return {
        "output_throughput": sum(lengths.values()) / end,
        "request_throughput": len(lengths) / end,
        "ttft_mean_ms": 1000 * statistics.fmean(ttft),
        "ttft_median_ms": 1000 * statistics.median(ttft),
        "tpot_median_ms": 1000 * statistics.median(tpot),
    }


@functools.cache
def predictions() -> tuple[dict, ...]:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    cache: dict[tuple[str, str], dict[str, float]] = {}
    rows = []
    for c in data["comparisons"]:
        key = (c["profile"], c["workload"])
        if key not in cache:
            cache[key] = replay(c["profile"], data["workloads"][c["workload"]])
        value = cache[key][c["metric"]]
        rows.append({**c, "computed": value, "error_pct": 100 * (value - c["published"]) / c["published"]})
    return tuple(rows)


def _fmt(value: float) -> str:
    return f"{value:,.1f}" if value >= 100 else f"{value:.2f}"


def test_every_row_of_docs_profiles_md_is_what_the_engine_predicts():
    doc = DOC.read_text(encoding="utf-8")
    rows = predictions()
    assert len(rows) >= 6
    for row in rows:
        assert _fmt(row["computed"]) == _fmt(row["predicted"]), row["id"]
        line = next((ln for ln in doc.splitlines() if f"`{row['id']}`" in ln), None)
        assert line is not None, f"{row['id']} has no row in docs/profiles.md"
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert _fmt(row["predicted"]) in cells, (row["id"], cells)
        assert f"{row['error_pct']:+.0f} %" in cells, (row["id"], cells)


def test_every_built_in_gpu_profile_is_compared_and_within_20_percent_or_says_why():
    rows = predictions()
    doc = DOC.read_text(encoding="utf-8").splitlines()
    for name in ("llama3-8b-h100", "llama3-70b-8xh100", "llama2-7b-a10"):
        mine = [r for r in rows if r["profile"] == name]
        assert mine, name
        for r in mine:
            if abs(r["error_pct"]) > 20:  # the row itself says why, and the verdict names it
                line = next(ln for ln in doc if f"`{r['id']}`" in ln)
                assert re.search(r"\bwhy\b", line), r["id"]
        verdict = next((ln for ln in doc if ln.startswith(f"- **`{name}`**")), "")
        assert "within 20 %" in verdict or re.search(r"\bwhy\b", verdict), name


@pytest.mark.parametrize("metric", ["output_throughput", "ttft_mean_ms", "tpot_median_ms"])
def test_replay_figures_follow_the_step_formula_for_one_request(metric):
    """One request alone: TTFT is one prefill step, TPOT one decode step, by hand."""
    profile = load_profile("llama3-8b-h100")
    got = replay("llama3-8b-h100", {"requests": [[100, 11]]})
    prefill = profile.step_time(100, 0, 100)
    decodes = [profile.step_time(0, 1, 100 + k) for k in range(1, 11)]
    front = profile.request_overhead_s
    by_hand = {
        "output_throughput": 11 / (front + prefill + sum(decodes)),
        "ttft_mean_ms": 1000 * (front + prefill),
        "tpot_median_ms": 1000 * statistics.median([sum(decodes) / 10]),
    }
    assert got[metric] == pytest.approx(by_hand[metric], rel=1e-9)


if __name__ == "__main__":
    for r in predictions():
        print(
            f"{r['id']:22} {r['profile']:18} {r['metric']:18} published {r['published']:>9} "
            f"computed {_fmt(r['computed']):>9}  {r['error_pct']:+.1f} %"
        )
