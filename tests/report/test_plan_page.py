"""The plan page: what the plan rests on — the sweep's warnings, the engine model's error bar, the
assumptions and the currency — and the way back to the sweep (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

SCENARIO = """name: plan-sweep
target: {url: 'http://127.0.0.1:9/v1', model: m}
load: {rate: 5, duration: 10s}
workload: {prompt_tokens: 100, output_tokens: 32}
"""
FLEET = "name: one\npools: [{profile: llama3-8b-h100, cost_per_hour: 4.0}]\n"


def _simulated_sweep(tmp: Path, cli, slo: str = "") -> Path:
    """A sweep in virtual time (seconds of CPU): levels of a few hundred requests, so every P99 is sparse."""
    (tmp / "s.yaml").write_text(SCENARIO + slo)
    (tmp / "f.yaml").write_text(FLEET)
    out = tmp / "sweep"
    done = cli("sweep", str(tmp / "s.yaml"), "--fleet", str(tmp / "f.yaml"), "--out", str(out), "--mode", "rate",
               "--levels", "5,10,20,40", "--hold", "5s", "--settle", "0.5s", "--warmup", "0")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_a_plan_on_a_sparse_simulated_sweep_says_so(tmp_path, surgelab_cli, browser, narrow):
    """It sized 17 instances on a capacity the sweep marked "sparse tail" with no warning, the engine
    model's error bar and the default 0.2 peak variation were nowhere, cost had no currency, and
    nothing led back to the sweep."""
    sweep_dir = _simulated_sweep(tmp_path, surgelab_cli, "slo: {ttft: 500ms}\n")
    sweep = json.loads((sweep_dir / "sweep.json").read_text())
    level = next(r for r in sweep["levels"] if r["index"] == sweep["sla_capacity"]["index"])
    assert level["measured"] < 500  # the trap: a P99 of a couple of hundred requests
    out = tmp_path / "plan"
    done = surgelab_cli("plan", str(sweep_dir), "--peak", "200", "--spares", "1", "--gpu-hour-cost", "2.5",
                        "--currency", "USD", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert (
        f"warning: sized on a sparse tail: the sweep's level {level['offered']:g} req/s holds {level['measured']:,} requests"
        in said
    )
    assert surgelab_cli("report", str(sweep_dir)).returncode == 0  # the sweep's own page, for the link back
    page = browser(offline=True).new_page()
    page.goto((out / "plan.html").as_uri())
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    [warning] = page.locator(".plan-warning").all_inner_texts()
    assert warning.startswith("Warning: sized on a sparse tail") and f"holds {level['measured']:,} requests" in warning
    assert sweep["target"]["model_error"]["text"] in page.inner_text("#model-error")
    assumptions = {r[0]: r[1] for r in page.evaluate("Array.from(document.querySelectorAll('#assumptions tr')).slice(1)"
                                                     ".map(r => Array.from(r.cells).map(c => c.innerText))")}  # fmt: skip
    assert assumptions["peak variation"] == "CV 0.2 (default)" and assumptions["safety"] == "0.7 (default)"
    assert assumptions["spares"] == "N+1" and assumptions["GPU-hour cost"] == "2.5 USD per GPU-hour"
    assert page.inner_text("#card-cost .unit") == "USD" and "cost/month (USD)" in page.inner_text("#plan-table")
    href = page.get_attribute("#sweep-link a", "href")
    assert (out / href).resolve() == (sweep_dir / "report.html").resolve()
    page.click("#sweep-link a")
    page.wait_for_function("window.SURGELAB_READY === true", timeout=20_000)
    assert page.evaluate("window.SURGELAB_REPORT.kind") == "sweep"
    narrow(page)


def test_a_plan_sized_on_errors_alone_says_the_latency_it_accepted(tmp_path, surgelab_cli):
    """The documented simulated sweep → plan pair sized at a level whose TTFT P99 was 5.8 s with only
    "(errors only)" as a hint."""
    sweep_dir = _simulated_sweep(tmp_path, surgelab_cli)
    done = surgelab_cli("plan", str(sweep_dir), "--peak", "100")
    assert done.returncode == 0, done.stderr
    sweep = json.loads((sweep_dir / "sweep.json").read_text())
    level = next(r for r in sweep["levels"] if r["index"] == sweep["sla_capacity"]["index"])
    ttft = level["latency_ms"]["ttft"]["p99"]
    assert (
        f"sized on the error limit alone (no latency objective): at level {level['offered']:g} req/s TTFT P99 was {ttft:,.0f} ms"
        in " ".join(done.stdout.split())
    )
