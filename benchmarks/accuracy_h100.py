"""How close surgelab's engine model comes to real vLLM runs on H100 GPUs, beside six peer simulators.

Every run of ``shared/data/vllm-h100/runs.csv`` (13 experiments: 6 models, TP 1–4, FP16 and
FP8, dense and mixture-of-experts) is simulated with ``surgelab.sim.simulate`` under each
reading of its arrivals, with three sets of engine figures:

- ``before``: the physics surgelab shipped before this benchmark (MFU 0.5, η 0.8, 1 ms + 2 × layers
  × 25 µs a step, one roofline over the step, no front end); mixture-of-experts models cannot be
  described by it and are left out;
- ``lomo``: the efficiencies refitted with the run's own model left out (``accuracy_fit``), so
  no figure judged was fitted on the run it judges;
- ``shipped``: the efficiencies surgelab ships (``surgelab.engine.calibration``), fitted on all
  13 runs: an in-sample figure, printed for reference, never the one judged.

It prints, per run and metric, the real value, surgelab's predictions and their errors beside
the peers' predictions from the same file, then the median absolute error per simulator over
the runs (the whole-run rows, as the peers' own aggregation does), for dense runs and for all.

    python benchmarks/accuracy_h100.py                         # every reading, full-length runs
    python benchmarks/accuracy_h100.py --reading constant --scale 0.25   # a quick look
    python benchmarks/accuracy_h100.py --markdown docs/accuracy-table.md --json /tmp/accuracy.json
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml
from accuracy_fit import fit, leave_one_model_out
from accuracy_runs import CLAIMED, METRICS, READINGS, RealRun, deployment, load_runs, predict

from surgelab.engine.calibration import H100_VLLM, Efficiency
from surgelab.engine.profile import EngineProfile

ROOT = Path(__file__).resolve().parents[1]
ACCURACY_FILE = ROOT / "src" / "surgelab" / "engine" / "data" / "accuracy.yaml"
PEERS = ("blis-roofline", "blis-evolved", "vidur", "aiconfigurator-estimate", "llm-optimizer-estimate")
JUDGED = ("e2e_mean", "e2e_p99", "ttft_mean", "ttft_p99", "itl_mean", "itl_generated")


def before_profile(run: RealRun) -> EngineProfile | None:
    """The profile the physics shipped before this benchmark would give the run (None for MoE: not describable)."""
    d = deployment(run)
    m = d.model
    if m.is_moe:
        return None
    params = m.total_params
    tp = d.tp
    bw = tp * 3.35e12 * 0.8
    return EngineProfile(
        name="before",
        prefill_s_per_token=2 * params / (tp * 989e12 * 0.5),
        decode_base_s=params * 2 / bw,
        s_per_kv_token=m.kv_elements_per_token() * 2 / bw,
        step_overhead_s=1e-3 + (2 * m.layers * 25e-6 if tp > 1 else 0.0),
        kv_capacity_tokens=d.kv_capacity_tokens,
        max_num_seqs=128,
        max_batched_tokens=run.batched_tokens,
        max_model_len=4096,
        model=m.name,
    )


def _job(args: tuple) -> tuple[str, str, str, dict, float, int]:
    run, reading, label, profile, scale = args
    started = time.process_time()
    figures, summary = predict(run, reading, profile, scale=scale)
    cpu = time.process_time() - started
    return (
        run.name,
        reading,
        label,
        {f"{s}|{m}": v for (s, m), v in figures.items()},
        cpu,
        summary["requests"]["scheduled"],
    )


def error(predicted: float | None, actual: float) -> float | None:
    if predicted is None or not math.isfinite(predicted):
        return None
    return (predicted - actual) / actual * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reading", choices=(*READINGS, "all"), default="all")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="stage length multiplier (1 = the runs' own 600/1,200 s)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--markdown", help="write the summary tables here (for docs/accuracy.md)")
    parser.add_argument("--no-issue-case", action="store_true", help="skip the Qwen3-14B case the issue quotes")
    parser.add_argument("--write-accuracy", action="store_true",
                        help=f"write the leave-one-model-out errors to {ACCURACY_FILE.relative_to(ROOT)} (what plan and simulate print)")  # fmt: skip
    args = parser.parse_args()
    readings = READINGS if args.reading == "all" else (args.reading,)
    runs = load_runs()
    started = time.perf_counter()
    folds = leave_one_model_out(runs)
    whole = fit(runs)
    print(f"fits: {len(folds) + 1} in {time.perf_counter() - started:.1f} s; all 13 runs: "
          + ", ".join(f"{k} {v:.4g}" for k, v in whole.efficiency.to_dict().items() if v is not None))  # fmt: skip
    _compare_shipped(whole.efficiency)

    jobs = []
    for reading in readings:
        for run in runs:
            profiles = {"lomo": deployment(run, folds[run.model].efficiency).profile(), "shipped": deployment(run).profile(),
                        "before": before_profile(run)}  # fmt: skip
            jobs += [(run, reading, label, profile, args.scale) for label, profile in profiles.items() if profile]
    results: dict[tuple[str, str, str], dict | None] = {}
    cpu = requests = 0.0
    with ProcessPoolExecutor(args.workers) as pool:
        for name, reading, label, figures, seconds, n in pool.map(_job, jobs):
            results[(name, reading, label)] = figures
            cpu += seconds
            requests += n
    print(
        f"simulated {len(jobs)} runs, {requests:,.0f} requests in {cpu:.0f} CPU s ({requests / max(cpu, 1e-9):,.0f} per CPU s)"
    )
    report = {"efficiency": {m: f.efficiency.to_dict() for m, f in folds.items()}, "readings": {}}
    lines: list[str] = []
    for reading in readings:
        table = _tables(runs, reading, results)
        report["readings"][reading] = table
        lines += _markdown(reading, table) + _run_rows(runs, reading, table)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as file:
            file.write("\n".join(lines) + "\n")
    if args.write_accuracy:
        if CLAIMED not in report["readings"]:
            parser.error(f"--write-accuracy writes the error bars of the runs' own reading: give --reading {CLAIMED} or all")
        write_accuracy(report["readings"][CLAIMED], args.scale)
    if not args.no_issue_case:
        issue_case(readings, args.scale)


def issue_case(readings: tuple[str, ...], scale: float) -> None:
    """The run the issue quotes (held out: never fitted): Qwen3-14B on one H100 at 20 req/s, which the old physics
    called an overload (E2E 21.8 s, TTFT 15.8 s) while the real server held it (E2E 4.1 s, TTFT 51 ms)."""
    run = RealRun("qwen3-14b-tp1-general", "Qwen/Qwen3-14B", 1, "FP16", 2048, "general", (8.0, 20.0))
    real = {"e2e_mean": 4100.0, "ttft_mean": 51.0}
    print("\nthe issue's case, held out: Qwen3-14B, 1 × H100, general at 8 then 20 req/s; the 20 req/s stage")
    for reading in readings:
        for label, profile in (("before", before_profile(run)), ("now", deployment(run).profile())):
            figures, _ = predict(run, reading, profile, scale=scale)
            cells = [
                f"{m} {figures[(1, m)]:,.0f} ms (real {real[m]:,.0f}, {error(figures[(1, m)], real[m]):+.0f} %)"
                for m in real
            ]
            print(f"  {reading:9s} {label:7s} " + ", ".join(cells))


def write_accuracy(table: dict, scale: float) -> None:
    """The error bars surgelab prints: per family, each metric's median |error| under the runs' own reading."""
    families = {}
    kept = read_accuracy()["families"]  # the held-out parts (accuracy_heldout.py) stay as they are
    runs = load_runs()
    for kind in ("dense", "moe"):
        key = kind
        models = len({r.model for r in runs if deployment(r).model.is_moe == (kind == "moe")})
        family: dict = {"gpu": "H100 SXM", "kind": kind, "models": models}
        for metric in JUDGED:
            family[metric] = round(table["medians"]["lomo"][metric][key], 1)
            family["runs"] = table["medians"]["lomo"][metric][f"n_{key}"]
        families[f"h100-{kind}"] = family
    for key, family in kept.items():
        if "heldout" in family:
            families.setdefault(key, {k: family[k] for k in ("gpu", "kind")})["heldout"] = family["heldout"]
    write_accuracy_file(families, f"arrivals read as {CLAIMED}, inference-perf's own (stage length × {scale:g})")


def read_accuracy() -> dict:
    return yaml.safe_load(ACCURACY_FILE.read_text(encoding="utf-8"))


def write_accuracy_file(families: dict, readings: str) -> None:
    """``src/surgelab/engine/data/accuracy.yaml``: what ``plan``, ``simulate`` and ``memory`` print."""
    text = (
        "# Written by benchmarks/accuracy_h100.py --write-accuracy: do not edit by hand.\n"
        "# Median absolute error (%) on the real runs of shared/data/vllm-h100/runs.csv, each model left out of the fit,\n"
        "# and (heldout:, benchmarks/accuracy_heldout.py --write-accuracy) on runs never fitted,\n"
        f"# {readings}.\n"
        + yaml.safe_dump({"engine": "vLLM 0.15.1", "families": families}, sort_keys=False)
    )
    ACCURACY_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {ACCURACY_FILE.relative_to(ROOT)}")


def _compare_shipped(fitted: Efficiency) -> None:
    """Say so when the shipped efficiencies are not what a fit on all runs gives now (the code changed under them)."""
    shipped = H100_VLLM.to_dict()
    drift = {k: (shipped[k], v) for k, v in fitted.to_dict().items()
             if v is not None and not math.isclose(shipped[k], v, rel_tol=0.02, abs_tol=1e-7)}  # fmt: skip
    if drift:
        print("note: shipped calibration differs from a fit on all runs now: "
              + ", ".join(f"{k} {a:.4g} → {b:.4g}" for k, (a, b) in drift.items()))  # fmt: skip


def _tables(runs: list[RealRun], reading: str, results: dict) -> dict:
    print(f"\n=== reading: {reading} ===")
    header = f"{'run':16s} {'metric':9s} {'real':>9s} {'before':>12s} {'lomo':>12s} {'shipped':>12s}  " + " ".join(
        f"{p[:12]:>12s}" for p in PEERS
    )
    print(header)
    errors: dict[str, dict[str, list[tuple[str, float]]]] = {}
    overloaded: list[str] = []
    for run in runs:
        dense = not deployment(run).model.is_moe
        for metric in METRICS:
            key = f"-1|{metric}"
            actual = run.actual[(-1, metric)]
            cells = [f"{run.key:16s} {metric:9s} {actual:9.1f}"]
            for label in ("before", "lomo", "shipped"):
                figures = results.get((run.name, reading, label))
                value = figures.get(key) if figures else None
                err = error(value, actual)
                cells.append(f"{value:7.0f} {err:+4.0f}%" if err is not None else f"{'—':>12s}")
                if err is not None and metric in JUDGED:
                    errors.setdefault(label, {}).setdefault(metric, []).append((run.key, abs(err), dense))
                    if label == "lomo" and metric == "e2e_mean" and value > 2 * actual:
                        overloaded.append(run.key)
            for peer in PEERS:
                value = run.peers.get(peer, {}).get((-1, metric))
                err = error(value, actual)
                cells.append(f"{value:6.0f} {err:+4.0f}%" if err is not None else f"{'':>12s}")
                if err is not None and metric in JUDGED:
                    errors.setdefault(peer, {}).setdefault(metric, []).append((run.key, abs(err), dense))
            print(" ".join(cells))
    medians: dict[str, dict[str, dict[str, float | int]]] = {}
    print(f"\nmedian |error| % over runs (whole-run rows), reading {reading}: dense runs / all runs (runs counted)")
    print(f"{'simulator':24s} " + " ".join(f"{m:>18s}" for m in JUDGED))
    for label in ("before", "lomo", "shipped", *PEERS):
        row = [f"{label:24s}"]
        for metric in JUDGED:
            values = errors.get(label, {}).get(metric, [])
            dense = [e for _, e, d in values if d]
            every = [e for _, e, _ in values]
            moe = [e for _, e, d in values if not d]
            cell = {"dense": statistics.median(dense) if dense else None, "all": statistics.median(every) if every else None,
                    "moe": statistics.median(moe) if moe else None,
                    "n_dense": len(dense), "n_all": len(every), "n_moe": len(moe)}  # fmt: skip
            medians.setdefault(label, {})[metric] = cell
            row.append(
                f"{fmt(cell['dense'])}/{fmt(cell['all'])} ({len(dense)}/{len(every)})".rjust(18)
                if every
                else f"{'':>18s}"
            )
        print(" ".join(row))
    print(f"runs predicted overloaded (lomo E2E > 2 × real): {overloaded or 'none'}")
    return {"medians": medians, "overloaded": overloaded, "figures": {
        f"{name}|{label}": figs for (name, r, label), figs in results.items() if r == reading}}  # fmt: skip


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _markdown(reading: str, table: dict) -> list[str]:
    lines = [
        f"### Reading: {reading}",
        "",
        "| simulator | " + " | ".join(JUDGED) + " |",
        "|---|" + "---|" * len(JUDGED),
    ]
    for label, cells in table["medians"].items():
        row = []
        for metric in JUDGED:
            cell = cells[metric]
            row.append("" if not cell["n_all"] else f"{fmt(cell['dense'])} / {fmt(cell['all'])}")
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    lines += ["", "Median absolute error (%) over the runs' whole-run rows: dense runs / all runs.", ""]
    return lines


def _signed(percent: float | None) -> str:
    return "—" if percent is None else f"{percent:+.0f} %".replace("-", "−")


def _run_rows(runs: list[RealRun], reading: str, table: dict) -> list[str]:
    """Every run under one reading: real, surgelab ``lomo`` (its error) and BLIS evolved's error, per metric."""
    metrics = {"e2e_mean": "E2E mean ms", "e2e_p99": "P99 E2E ms", "ttft_mean": "TTFT mean ms",
               "itl_generated": "ITL ms per generated token"}  # fmt: skip
    lines = [f"Every run, reading `{reading}`: the real server · surgelab `lomo` (error) · BLIS evolved's error", "",
             "| run | " + " | ".join(metrics.values()) + " |", "|---|" + "---|" * len(metrics)]  # fmt: skip
    for run in runs:
        figures = table["figures"].get(f"{run.name}|lomo")
        if figures is None:
            continue
        lite = "-lite" if "-lite" in run.name else ""
        model = re.sub(r"-(Instruct|hf)\b.*$", "", run.model.split("/")[-1])
        name = f"{model}{' FP8' if run.precision == 'FP8' else ''} TP{run.tp} {run.workload}{lite}"
        cells = []
        for metric in metrics:
            real, ours = run.actual[(-1, metric)], figures[f"-1|{metric}"]
            blis = run.peers.get("blis-evolved", {}).get((-1, metric))
            digits = 1 if real < 100 else 0
            cell = f"{real:,.{digits}f} · {ours:,.{digits}f} ({_signed(error(ours, real))})"
            cells.append(cell + (f" · {_signed(error(blis, real))}" if blis is not None else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, ""]


if __name__ == "__main__":
    main()
