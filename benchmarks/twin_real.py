"""The digital twin on real engines we did not write: llama.cpp's llama-server and vLLM (CPU build).

Three steps, each re-runnable on its own (the measured runs are kept in ``--data``, outside the
repository, so a better fit is checked again without measuring again):

``measure``
    Starts the engine and measures the training runs (an idle level with prompts of 32–1,500
    tokens for the prefill cost, a climb of users past the batch limit for the decode cost) and
    the held-out runs: a step ramp, a spike, a mixed-length scenario, and one scenario at a
    setting the training never saw (another slot count / ``max-num-seqs``). Stops the engine
    after each setting.
``fit``
    ``surgelab fit DATA/train --out DATA/twin/profile.yaml`` (the CLI, as a user runs it).
``validate``
    ``surgelab validate-twin --measured RUN`` for every held-out run: the same scenario (same
    seed and salt) simulated on one replica of the fitted profile — for the held-out setting, the
    profile with that setting's batch limit — and compared with what was measured. With
    ``--repeat DATA2`` (the held-out scenarios measured again into another folder) the twin is
    checked on both measurements and the two are compared: the machine's noise floor. Prints
    the table; ``--results`` appends it to benchmarks/RESULTS.md.

Needs llama-server built by ``../shared/tools/realserver/setup.sh`` and vLLM by ``ci/vllm/setup.sh``.
Not a CI test. For steady timings run it as root at a high priority, the client on core 1 (the
engines' compute is pinned to core 0; see ``prioritise`` and ``place_vllm``)::

    setsid nice -n -10 taskset -c 1 python benchmarks/twin_real.py all --engine llamacpp --data /work/twin-data/llamacpp
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
# ../shared/tools/realserver beside the checkout (or beside a worktree folder of checkouts)
REALSERVER = next((p / "shared" / "tools" / "realserver" for p in ROOT.parents if (p / "shared" / "tools" / "realserver").is_dir()),
                  ROOT.parent / "shared" / "tools" / "realserver")
VLLM = ROOT / "ci" / "vllm"
LLAMA_HOME = Path(os.environ.get("REALSERVER_HOME", Path.home() / ".cache" / "surgelab-realserver"))
VLLM_HOME = Path(os.environ.get("SURGELAB_VLLM_HOME", Path.home() / ".cache" / "surgelab-vllm"))
P50_TOLERANCE, P99_TOLERANCE = 0.10, 0.25  # issue 19's targets


@dataclass(frozen=True)
class Engine:
    name: str
    scripts: Path  # start.sh PORT / stop.sh PORT
    tokenizer: Path
    preset: str  # telemetry preset of its /metrics
    target: dict[str, Any]  # what every scenario's target adds
    slots: int  # the batch limit of the training setting
    held_slots: int  # the batch limit of the held-out setting
    idle_rate: float  # requests/s of the idle level: most find the engine idle
    scale: float  # the held-out scenarios' rates are multiplied by it: the engine busy, not overloaded
    base: dict[str, Any] = field(default_factory=dict)  # what the records cannot show, for `fit --base`

    def start(self, port: int, slots: int) -> None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:  # its health check would pass for another server
                raise SystemExit(f"something already listens on 127.0.0.1:{port}: choose another --port")
        env, extra = dict(os.environ), []
        if self.preset == "llamacpp":
            env.update(NP=str(slots), THREADS="1")
        else:
            extra = ["--", "--max-num-seqs", str(slots), "--max-num-batched-tokens", str(self.base["max_batched_tokens"])]
        # llama.cpp's one compute thread on core 0; vLLM's processes are placed once it is up (place_vllm)
        pin = ["taskset", "-c", "0"] if self.preset == "llamacpp" else []
        subprocess.run([*pin, "bash", str(self.scripts / "start.sh"), str(port), *extra], check=True, env=env)
        if self.preset == "vllm":
            place_vllm(int((VLLM_HOME / "logs" / f"server-{port}.pid").read_text()))

    def stop(self, port: int) -> None:
        subprocess.run(["bash", str(self.scripts / "stop.sh"), str(port)], check=False)


ENGINES = {
    "llamacpp": Engine("llama.cpp", REALSERVER, LLAMA_HOME / "models" / "tokenizer.json", "llamacpp",
                       {"extra_body": {"cache_prompt": False}}, slots=4, held_slots=2, idle_rate=0.45, scale=0.6,
                       # start.sh: CTX = 4096 tokens per slot; llama-server's default batch (-b): 2,048 tokens a step
                       base={"max_batched_tokens": 2048, "kv_capacity_tokens": 16384, "max_model_len": 4096}),
    "vllm": Engine("vLLM (CPU)", VLLM, VLLM_HOME / "model" / "tokenizer.json", "vllm",
                   {"endpoint": "completions"},  # no chat template: the prompt is exactly the tokens asked for
                   slots=8, held_slots=4, idle_rate=2.0, scale=5.0,
                   base={"max_batched_tokens": 1024, "kv_capacity_tokens": 524288, "max_model_len": 2048}),
}  # fmt: skip


def prioritise(pid: int | str = "self") -> None:
    """Give ``pid``'s session (its scheduler autogroup) this process's nice value.

    Linux with autogroups (``/proc/sys/kernel/sched_autogroup_enabled``) shares a core between
    sessions first and applies nice only within one: ``nice -n -10`` alone does not put an engine
    ahead of other sessions' test suites; the autogroup's own nice does (root only)."""
    path, nice = Path(f"/proc/{pid}/autogroup"), os.getpriority(os.PRIO_PROCESS, 0)
    if nice >= 0 or not path.exists():  # only to raise the priority (as `nice -n -10` asked), never to lower it
        return
    try:
        path.write_text(str(nice))
    except OSError as exc:
        print(f"note: could not set {path} ({exc.strerror}); the engine shares the cores with other sessions")
    else:
        print(f"scheduler: {path.read_text().strip()}")


def place_vllm(pid: int) -> None:
    """vLLM's engine core and its worker on core 0, its API server on core 1 (with the client).

    The engine core waits for the worker in a busy loop that yields the core (``sched_yield``).
    Left free to share a core with it, the API server sent each streamed answer in one burst at
    the end (measured: every token at once, 200–700 ms after the send, while vLLM's own
    histograms said TTFT 38 ms and 7.6 ms between tokens). Placed apart, tokens arrive as generated.
    Its start.sh runs it in a session of its own: that session gets this process's priority."""
    prioritise(pid)
    group = subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True).stdout.split()
    for member in group:
        name = Path(f"/proc/{member}/comm").read_text().strip()
        core = "0" if name.startswith(("VLLM::EngineCor", "VLLM::Worker")) else "1"
        subprocess.run(["taskset", "-a", "-pc", core, member], check=True, capture_output=True)
        print(f"  {name} (PID {member}) on core {core}")


def scenarios(engine: Engine, longer: float = 1.0) -> dict[str, tuple[str, int, dict[str, Any]]]:
    """name → (group, the engine's batch limit, load and workload). Rates scale with the engine's speed.

    ``longer`` stretches the step ramp's holds and the mixed-length and held-out-setting runs
    (more requests, narrower intervals on their percentiles); the spike keeps its shape."""
    k = engine.scale

    def rate(x: float) -> float:
        return round(x * k, 3)

    def hold(seconds: float) -> str:
        return f"{seconds}s"

    lognormal = {"dist": "lognormal", "mean": 400, "std": 250, "max": 1500}
    return {
        "idle": ("train", engine.slots, {
            "load": {"rate": engine.idle_rate, "duration": "60s", "arrival": "constant"},
            "workload": {"prompt_tokens": {"dist": "uniform", "min": 32, "max": 1500}, "output_tokens": 4}}),
        "climb": ("train", engine.slots, {
            "load": {"concurrency": {"type": "step", "start": 1, "step": engine.slots // 2,
                                     "hold": hold(15), "max": 2 * engine.slots + 1}},
            "workload": {"prompt_tokens": {"dist": "uniform", "min": 32, "max": 1200}, "output_tokens": 48}}),
        "step-ramp": ("held-out", engine.slots, {
            "load": {"rate": {"type": "step", "start": rate(0.25), "step": rate(0.25), "hold": hold(15 * longer), "max": rate(1.0)}},
            "workload": {"prompt_tokens": lognormal, "output_tokens": {"dist": "uniform", "min": 16, "max": 96}}}),
        "spike": ("held-out", engine.slots, {
            "load": {"rate": {"type": "spike", "base": rate(0.4), "peak": rate(1.2), "at": "10s", "rise": "5s",
                              "hold": "10s", "decay": "5s", "after": "15s"}},
            "workload": {"prompt_tokens": {"dist": "uniform", "min": 64, "max": 800}, "output_tokens": 64}}),
        "mixed-length": ("held-out", engine.slots, {
            "load": {"rate": rate(0.6), "duration": hold(60 * longer)},
            "workload": {"mix": [
                {"name": "chat", "weight": 6, "prompt_tokens": {"dist": "uniform", "min": 32, "max": 160}, "output_tokens": 96},
                {"name": "rag", "weight": 3, "prompt_tokens": {"dist": "uniform", "min": 900, "max": 1500}, "output_tokens": 16},
                {"name": "summary", "weight": 1, "prompt_tokens": 600, "output_tokens": {"dist": "uniform", "min": 32, "max": 128}},
            ]}}),
        f"slots-{engine.held_slots}": ("held-out", engine.held_slots, {
            "load": {"concurrency": 2 * engine.held_slots, "duration": hold(45 * longer)},
            "workload": {"prompt_tokens": lognormal, "output_tokens": 48}}),
    }  # fmt: skip


def scenario_data(engine: Engine, url: str, spec: dict[str, Any], seed: int) -> dict[str, Any]:
    data = {
        "seed": seed,
        "target": {"url": f"{url}/v1", "model": "tiny", **engine.target},
        "tokenizer": str(engine.tokenizer),  # the model's own tokens: exact lengths
        **spec,
        "telemetry": {"interval": "500ms", "sources": [{"url": f"{url}/metrics", "preset": engine.preset}]},
    }
    return data


def measure(engine: Engine, data: Path, port: int, only: list[str] | None, longer: float = 1.0) -> None:
    from surgelab.aio import run_async
    from surgelab.runner import run_scenario
    from surgelab.runner.run import with_salt
    from surgelab.scenario.loader import build_scenario

    todo = {}  # name → (seed, group, batch limit, spec): the seed is the scenario's place in the list
    for seed, (name, (group, slots, spec)) in enumerate(scenarios(engine, longer).items(), start=1):
        if only and name not in only:
            continue
        if (data / group / name / "summary.json").exists():
            print(f"{name}: measured already ({data / group / name})")
            continue
        todo[name] = (seed, group, slots, spec)
    for slots in sorted({t[2] for t in todo.values()}, key=lambda n: n != engine.slots):
        engine.start(port, slots)
        try:
            for name, (seed, group, n, spec) in todo.items():
                if n != slots:
                    continue
                out = data / group / name
                print(f"measuring {name} ({engine.name}, batch limit {slots}) …", flush=True)
                scenario = with_salt(build_scenario(scenario_data(engine, f"http://127.0.0.1:{port}", spec, seed)))
                summary = run_async(run_scenario(scenario, out)).summary
                ttft = summary["latency_ms"]["ttft"]
                print(f"  {summary['requests']['ok']} ok of {summary['requests']['scheduled']}, TTFT P50 {ttft['p50']:.0f} ms,"
                      f" P99 {ttft['p99']:.0f} ms · validity: {summary['validity']['reasons'] or 'ok'}", flush=True)
        finally:
            engine.stop(port)


def surgelab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "160"}
    done = subprocess.run([sys.executable, "-m", "surgelab", *args], env=env, text=True, capture_output=True)
    print(done.stdout, done.stderr, sep="", end="")
    return done


def fit(engine: Engine, data: Path) -> Path:
    twin = data / "twin"
    twin.mkdir(parents=True, exist_ok=True)
    args = ["fit", str(data / "train"), "--out", str(twin / "profile.yaml"), "--max-num-seqs", str(engine.slots)]
    if engine.base:
        base = twin / "base.yaml"
        base.write_text(yaml.safe_dump({"name": "base", "prefill_s_per_token": 0.0, "decode_base_s": 0.0,
                                        "s_per_kv_token": 0.0, "step_overhead_s": 0.0, "max_num_seqs": engine.slots,
                                        **engine.base}))  # fmt: skip
        args += ["--base", str(base)]
    done = surgelab(*args)
    (twin / "fit.txt").write_text(done.stdout + done.stderr)
    if done.returncode:
        raise SystemExit(f"surgelab fit failed ({done.returncode})")
    return twin / "profile.yaml"


def validate(engine: Engine, data: Path, profile: Path, repeat: Path | None = None) -> list[dict[str, Any]]:
    """Check the twin on every held-out run in ``data`` (and on the same scenarios measured again in
    ``repeat``, if given: how far two measurements of one scenario differ is this machine's noise floor)."""
    from surgelab.twin.validate import compare_summaries

    rows = []
    fitted = yaml.safe_load(profile.read_text())
    for name, (group, slots, _) in scenarios(engine).items():
        if group != "held-out" or not (data / group / name / "summary.json").exists():
            continue
        use = profile
        if slots != fitted["max_num_seqs"]:  # the held-out setting: the same engine with another batch limit
            use = profile.with_name(f"profile-{slots}-seqs.yaml")
            use.write_text(yaml.safe_dump({**fitted, "max_num_seqs": slots}, sort_keys=False))
        row: dict[str, Any] = {"scenario": name, "slots": slots}
        for key, where in (("first", data), ("repeat", repeat)):
            if where is None or not (where / group / name / "summary.json").exists():
                continue
            out = where / "twin" / name
            shutil.rmtree(out, ignore_errors=True)  # a check of an earlier fit
            surgelab("validate-twin", "--measured", str(where / group / name), "--profile", str(use), "--out", str(out),
                     "--p50-tolerance", str(P50_TOLERANCE), "--p99-tolerance", str(P99_TOLERANCE))  # fmt: skip
            row[key] = yaml.safe_load((out / "twin-check.yaml").read_text())
        if "repeat" in row:
            first, again = (json.loads((d / group / name / "summary.json").read_text()) for d in (data, repeat))
            row["noise"] = compare_summaries(first, again).errors
        rows.append(row)
    return rows


METRICS = {"throughput": "throughput (req/s)", "ttft_p50": "TTFT P50 (ms)", "e2e_p50": "E2E P50 (ms)",
           "ttft_p99": "TTFT P99 (ms)", "e2e_p99": "E2E P99 (ms)"}  # fmt: skip


def _pct(error: float | None, metric: str, status: str | None = None) -> str:
    """The error; bold outside the target, italic undecided (a miss inside the measured figure's 95 % interval)."""
    if error is None:
        return "–"
    if status is None:  # two measurements compared: against the target alone
        limit = P50_TOLERANCE if metric == "throughput" or metric.endswith("p50") else P99_TOLERANCE
        status = "within" if abs(error) <= limit else "outside"
    return {"within": f"{error:+.1%}", "outside": f"**{error:+.1%}**", "undecided": f"*{error:+.1%}*"}[status]


def _value(x: float | None) -> str:
    return "–" if x is None else f"{x:,.2f}" if x < 10 else f"{x:,.0f}"


def _measured(check: dict[str, Any], metric: str) -> str:
    """The measured figure with its 95 % interval (… where the interval is open)."""
    bounds = check.get("intervals", {}).get(metric)
    if not bounds:
        return _value(check["measured"][metric])
    low, high = (_value(b) if abs(b) != float("inf") else "…" for b in bounds)
    return f"{_value(check['measured'][metric])} ({low}–{high})"


def table(engine: Engine, rows: list[dict[str, Any]]) -> list[str]:
    """Per held-out scenario: measured (with its 95 % interval), the twin's prediction and its error
    (bold: outside the target, 10 % at P50 and on throughput, 25 % at P99, and outside the measured
    interval; italic: undecided); with a repeat, the second measurement, its difference from the
    first, and the twin's error against it. Ends with the count of cells of each status."""
    lines = [f"| {engine.name} | | {' | '.join(METRICS.values())} |", "|---|---|" + "---|" * len(METRICS)]
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        label = f"{row['scenario']} ({row['slots']} seqs)"
        for key, what in (("first", "measured"), ("repeat", "measured again")):
            if key not in row:
                continue
            check = row[key]
            for m in METRICS:
                tally = counts.setdefault(what, {"within": 0, "outside": 0, "undecided": 0})
                tally[check["status"][m]] += 1
            lines.append(f"| {label} | {what} | " + " | ".join(_measured(check, m) for m in METRICS) + " |")
            lines.append("| | twin | " + " | ".join(f"{_value(check['predicted'][m])} ({_pct(check['errors'][m], m, check['status'][m])})"
                                                     for m in METRICS) + " |")  # fmt: skip
            label = ""
        if "noise" in row:
            lines.append("| | 2nd − 1st measurement | " + " | ".join(_pct(row["noise"][m], m) for m in METRICS) + " |")
    lines.append("")
    for what, tally in counts.items():
        lines.append(f"Against the runs {what}: {tally['within']} cells within target, {tally['outside']} outside, "
                     f"{tally['undecided']} undecided.  ")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["measure", "fit", "validate", "all"])
    parser.add_argument("--engine", choices=sorted(ENGINES), required=True)
    parser.add_argument("--data", type=Path, required=True, help="where the measured runs go (outside the repository)")
    parser.add_argument("--port", type=int, help="the engine's port (llama.cpp 18111, vLLM 18120)")
    parser.add_argument("--only", help="measure only these scenarios (comma-separated names)")
    parser.add_argument("--longer", type=float, default=1.0,
                        help="measure: the step ramp's holds and the mixed-length and held-out-setting runs this many times longer")
    parser.add_argument("--repeat", type=Path, help="validate: the same held-out scenarios measured again (another --data)")
    parser.add_argument("--results", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = parser.parse_args()
    engine = ENGINES[args.engine]
    if args.step in ("measure", "all"):
        prioritise()
        measure(engine, args.data, args.port or {"llamacpp": 18111, "vllm": 18120}[args.engine],
                args.only.split(",") if args.only else None, args.longer)
    profile = args.data / "twin" / "profile.yaml"
    if args.step in ("fit", "all"):
        profile = fit(engine, args.data)
    if args.step in ("validate", "all"):
        lines = table(engine, validate(engine, args.data, profile, args.repeat))
        print("\n".join(lines))
        if args.results:
            stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            with ROOT.joinpath("benchmarks", "RESULTS.md").open("a", encoding="utf-8") as f:
                f.write("\n".join(["", f"### Digital twin on {engine.name} ({stamp})", "", *lines, ""]))


if __name__ == "__main__":
    main()
