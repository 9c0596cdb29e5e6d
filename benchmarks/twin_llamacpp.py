"""The digital twin on a real engine we did not write: llama.cpp's llama-server.

Measures one replica (a sweep: an idle level with varied prompt lengths for the prefill
cost, then a climb of users past the server's slots for the decode cost and the batch
limit), fits an engine profile to it, and predicts two held-out scenarios — a step ramp and a
spike with another length mix — in the simulator, against the same server measured for real.

Needs the server built once by ``../shared/tools/realserver/setup.sh`` (~15 min). Not a CI
test. Prints the fitted coefficients and the prediction errors; with ``--results`` appends
them to benchmarks/RESULTS.md.

    python benchmarks/twin_llamacpp.py [--port 18111] [--results]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from surgelab.aio import run_async
from surgelab.runner import run_scenario
from surgelab.scenario.loader import build_scenario
from surgelab.twin.fit import fit_profile
from surgelab.twin.validate import validate_twin

TOOLS = Path(__file__).resolve().parents[2] / "shared" / "tools" / "realserver"
HOME = Path(os.environ.get("REALSERVER_HOME", Path.home() / ".cache" / "surgelab-realserver"))


def scenario(url: str, load: dict, workload: dict, metrics: str | None = None) -> object:
    data = {
        "target": {"url": url, "model": "tiny", "extra_body": {"cache_prompt": False}},
        "tokenizer": str(HOME / "models" / "tokenizer.json"),  # the model's own tokens: exact lengths
        "load": load,
        "workload": workload,
    }
    if metrics:
        data["telemetry"] = {"interval": "500ms", "sources": [{"url": metrics, "preset": "llamacpp"}]}
    return build_scenario(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18111)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--results", action="store_true", help="append the figures to benchmarks/RESULTS.md")
    args = parser.parse_args()
    if not (HOME / "build" / "bin" / "llama-server").exists():
        raise SystemExit(f"build llama-server first: bash {TOOLS / 'setup.sh'}")
    env = {**os.environ, "NP": str(args.slots), "THREADS": "1"}
    subprocess.run(["bash", str(TOOLS / "start.sh"), str(args.port)], check=True, env=env)
    url, metrics = f"http://127.0.0.1:{args.port}/v1", f"http://127.0.0.1:{args.port}/metrics"
    lines = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sweep = Path(tmp) / "sweep"
            idle = scenario(url, {"rate": 0.7, "duration": "40s", "arrival": "constant"},
                            {"prompt_tokens": {"dist": "uniform", "min": 32, "max": 1500}, "output_tokens": 4})  # fmt: skip
            climb = scenario(url, {"concurrency": {"type": "step", "start": 1, "step": 2, "hold": "20s", "max": 9}},
                             {"prompt_tokens": {"dist": "uniform", "min": 32, "max": 1200}, "output_tokens": 48},
                             metrics)  # fmt: skip
            print("measuring: idle level …")
            run_async(run_scenario(idle, sweep / "level-01"))
            print("measuring: climb of users …")
            climbed = run_async(run_scenario(climb, sweep / "level-02")).summary
            slots = (climbed.get("telemetry", {}).get("roles", {}).get("running") or {}).get("max")
            fit = fit_profile(sweep, running_max=int(slots) if slots else None)
            lines.append(f"fit from {fit.samples['decode_gaps']} decode gaps and {fit.samples['compute_bound_prefills']} idle prefills:")
            for name, c in fit.coefficients.items():
                lines.append(f"  {name} = {c.value:.4g} ± {c.stderr or 0:.2g}")
            lines.append(f"  max_num_seqs = {fit.profile.max_num_seqs} (server slots: {args.slots})")
            lines.append(f"  residual: decode {fit.residual['decode']:.1%}, prefill {fit.residual['prefill']:.1%}")
            held_out = {
                "step ramp": scenario(url, {"rate": {"type": "step", "start": 0.5, "step": 0.5, "hold": "20s", "max": 2.0}},
                                      {"prompt_tokens": {"dist": "lognormal", "mean": 400, "std": 250, "max": 1500},
                                       "output_tokens": {"dist": "uniform", "min": 16, "max": 96}}),
                "spike": scenario(url, {"rate": {"type": "spike", "base": 0.5, "peak": 2.5, "at": "15s", "rise": "5s",
                                                 "hold": "15s", "decay": "5s", "after": "20s"}},
                                  {"prompt_tokens": {"dist": "uniform", "min": 64, "max": 800}, "output_tokens": 64}),
            }  # fmt: skip
            for name, held in held_out.items():
                print(f"held out: {name} (measured, then simulated) …")
                check = validate_twin(held, fit.profile, Path(tmp) / name.replace(" ", "-"))
                errors = ", ".join(f"{k} {v:+.1%}" if v is not None else f"{k} n/a" for k, v in check.errors.items())
                lines.append(f"held-out {name}: {'PASS' if check.passed else 'FAIL'} — {errors}")
    finally:
        subprocess.run(["bash", str(TOOLS / "stop.sh"), str(args.port)], check=False)
    print("\n".join(lines))
    if args.results:
        path = Path(__file__).with_name("RESULTS.md")
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        block = "\n".join(["", f"### Digital twin on llama.cpp ({stamp})", "", "```", *lines, "```", ""])
        with path.open("a", encoding="utf-8") as f:
            f.write(block)


if __name__ == "__main__":
    main()
