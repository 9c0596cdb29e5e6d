"""The engine model on real vLLM runs it was never fitted on: other models, MoE, A100 and L40S GPUs.

``benchmarks/data/vllm-heldout.csv`` holds 38 experiments the BLIS team ran with the same vLLM
v0.15.1 and inference-perf set-up as ``shared/data/vllm-h100/runs.csv`` but kept out of its
training (see ``benchmarks/data/README.md`` for the source). surgelab's engine figures were fitted
on ``runs.csv`` only (``surgelab.engine.calibration.H100_VLLM``); nothing here was fitted, so every
figure below is out of sample. Each run is simulated as ``accuracy_h100.py`` does (the deployment
from the model's ``config.json``, the GPU's data sheet, the run's TP and limits; its stages as
phases) and set beside the real server and the peers' predictions from the same file, among them
BLIS's trained-physics model, whose held-out medians on the 19 dense H100 runs (E2E 5.7 %, P99 E2E
9.4 %, TTFT 13.1 %, P99 TTFT 31.7 %, ITL 6.3 %) the issue quotes.

    python benchmarks/accuracy_heldout.py                      # every reading, full-length runs (~6 min on 2 cores)
    python benchmarks/accuracy_heldout.py --reading uniform --scale 0.25
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from accuracy_h100 import JUDGED, before_profile, error, fmt, read_accuracy, write_accuracy_file
from accuracy_runs import CLAIMED, RealRun, add_peer, deployment, finish_runs, new_run, predict

from surgelab.engine import GPUS

HELDOUT = Path(__file__).resolve().parent / "data" / "vllm-heldout.csv"
PEERS = ("blis-trained-physics", "blis-evolved", "blis-roofline", "vidur", "aiconfigurator-estimate",
         "llm-optimizer-estimate")  # fmt: skip


def load_heldout(path: Path = HELDOUT) -> list[RealRun]:
    """The held-out runs; a "-lite" general run's rates were not published and are marked assumed."""
    runs: dict[str, RealRun] = {}
    with open(path, newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            run = runs.get(row["experiment"])
            if run is None:
                run = runs[row["experiment"]] = new_run(row)
                run.rates_assumed = row["workload"] == "general-lite"
            key = (int(row["stage_index"]), row["metric"])
            run.actual[key] = float(row["actual"])
            for peer in PEERS:
                if row.get(peer):
                    add_peer(run, peer, key, float(row[peer]))
    return finish_runs(runs.values())


def family(run: RealRun) -> str:
    """The error bar's family: ``h100-dense``, ``h100-moe``, ``a100-dense`` …"""
    return f"{run.gpu}-{'moe' if deployment(run).model.is_moe else 'dense'}"


def _job(args: tuple) -> tuple[str, str, str, dict, float, int]:
    run, reading, label, scale = args
    profile = deployment(run).profile() if label == "surgelab" else before_profile(run)
    started = time.process_time()
    figures, summary = predict(run, reading, profile, scale=scale)
    return run.name, reading, label, figures, time.process_time() - started, summary["requests"]["scheduled"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reading", choices=(CLAIMED, "constant", "poisson", "all"), default="all")
    parser.add_argument("--scale", type=float, default=1.0, help="stage length multiplier (1 = the runs' own)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--write-accuracy", action="store_true",
                        help="write the held-out errors into src/surgelab/engine/data/accuracy.yaml (the error bars printed)")  # fmt: skip
    args = parser.parse_args()
    readings = (CLAIMED, "constant", "poisson") if args.reading == "all" else (args.reading,)
    runs = load_heldout()
    jobs = [(run, reading, label, args.scale) for reading in readings for run in runs
            for label in ("surgelab", "before") if label == "surgelab" or before_profile(run)]  # fmt: skip
    results: dict[tuple[str, str, str], dict] = {}
    cpu = requests = 0.0
    with ProcessPoolExecutor(args.workers) as pool:
        for name, reading, label, figures, seconds, n in pool.map(_job, jobs):
            results[(name, reading, label)] = figures
            cpu += seconds
            requests += n
    print(f"simulated {len(jobs)} runs, {requests:,.0f} requests in {cpu:.0f} CPU s")
    medians = {reading: _report(runs, reading, results) for reading in readings}
    if args.write_accuracy:
        if CLAIMED not in medians:
            parser.error(f"--write-accuracy writes the error bars of the runs' own reading: give --reading {CLAIMED} or all")
        write_heldout(runs, medians[CLAIMED], f"held-out: arrivals read as {CLAIMED} (× {args.scale:g})")


def write_heldout(runs: list[RealRun], medians: dict[tuple[str, str, str], float], readings: str) -> None:
    """Each family's held-out medians (under the runs' own reading) beside its calibration-set ones."""
    families = read_accuracy()["families"]
    for key in sorted({family(r) for r in runs}):
        members = [r for r in runs if family(r) == key]
        assumed = sum(r.rates_assumed for r in members)
        part: dict = {"runs": len(members), "models": len({r.model for r in members})}
        for metric in JUDGED:
            part[metric] = round(medians[("surgelab", metric, key)], 1)
        if assumed:
            part["note"] = f"{assumed} of {len(members)} at assumed load rates"
        gpu, kind = key.rsplit("-", 1)
        families.setdefault(key, {"gpu": GPUS[gpu].name, "kind": kind})["heldout"] = part
    write_accuracy_file(families, readings)


def _report(runs: list[RealRun], reading: str, results: dict) -> dict[tuple[str, str, str], float]:
    print(f"\n=== reading: {reading} (surgelab: the shipped figures, fitted on runs.csv only) ===")
    labels = ("surgelab", "before", *PEERS)
    print(f"{'run':44s} {'metric':9s} {'real':>8s} " + " ".join(f"{label[:14]:>14s}" for label in labels))
    errors: dict[tuple[str, str, str], list[float]] = {}
    overloaded = []
    for run in runs:
        for metric in JUDGED:
            actual = run.actual[(-1, metric)]
            cells = []
            for label in labels:
                source = (
                    results.get((run.name, reading, label)) if label in ("surgelab", "before") else run.peers.get(label)
                )
                value = (source or {}).get((-1, metric))
                err = error(value, actual)
                cells.append(f"{value:8.0f} {err:+4.0f}%" if err is not None else f"{'':>14s}")
                if err is not None:
                    errors.setdefault((label, metric, family(run)), []).append(abs(err))
                    if label == "surgelab" and metric == "e2e_mean" and value > 2 * actual:
                        overloaded.append(run.name)
            mark = " (rates assumed)" if run.rates_assumed else ""
            print(f"{(run.name + mark)[:44]:44s} {metric:9s} {actual:8.1f} " + " ".join(cells))
    for name in sorted({family(r) for r in runs}, key=lambda k: (k[:4] != "h100", k)):
        count = sum(family(r) == name for r in runs)
        print(f"\nmedian |error| %, whole-run rows, {name} ({count} runs; runs counted in brackets)")
        print(f"{'simulator':24s} " + " ".join(f"{m:>14s}" for m in JUDGED))
        for label in labels:
            cells = []
            for metric in JUDGED:
                values = errors.get((label, metric, name), [])
                cells.append(f"{fmt(statistics.median(values))} ({len(values)})".rjust(14) if values else " " * 14)
            if any(c.strip() for c in cells):
                print(f"{label:24s} " + " ".join(cells))
    print(f"\nruns predicted overloaded (surgelab E2E > 2 × real): {overloaded or 'none'}")
    return {key: statistics.median(values) for key, values in errors.items()}


if __name__ == "__main__":
    main()
