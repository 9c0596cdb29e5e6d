"""Real vLLM runs on H100 GPUs (``shared/data/vllm-h100/runs.csv``) and surgelab's prediction of each.

A run is one experiment of the BLIS team's validation set: a model on ``tp`` H100s under
vLLM v0.15.1 with its limits, driven by inference-perf's shared-prefix workload in one or
two load stages. ``predict`` simulates the very run with ``surgelab.sim.simulate`` (the
command ``surgelab simulate`` runs): a one-replica fleet whose profile is the physics of the
deployment, and the run's stages as phases, under one *reading* of how its arrivals were
spaced:

- ``uniform``: the stage's rate × duration requests at independent uniform times over the stage,
  what inference-perf sends for its load type ``constant`` (the runs' own: its ``ConstantLoadTimer``
  draws exponential gaps and scales them to fill the stage, since August 2025; before, plain
  exponential gaps: never evenly spaced);
  the reading surgelab's figures are judged and its error bars written under;
- ``constant``: evenly spaced open-loop arrivals at the stage's rate (what the name suggests, and
  how these runs were read before the timer's source was checked);
- ``poisson``: Poisson arrivals at that rate;
- ``sessions``: groups of users sharing a system prompt, each sending its next question only
  after its previous answer, the stage's ``uniform`` schedule dealt out to them in turn
  (inference-perf with multi-turn chat; BLIS's adapter reads sessions too, paced by a think time).
"""

from __future__ import annotations

import csv
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from surgelab.engine import GPUS, Deployment, EngineProfile, find_model
from surgelab.engine.calibration import Efficiency
from surgelab.scenario.loader import build_scenario
from surgelab.sim import build_fleet, simulate

__all__ = ["METRICS", "READINGS", "CLAIMED", "RealRun", "load_runs", "new_run", "add_peer", "finish_runs", "deployment", "predict", "DATA"]

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "vllm-h100" / "runs.csv"
METRICS = ("e2e_mean", "e2e_p90", "e2e_p99", "ttft_mean", "ttft_p90", "ttft_p99", "itl_mean", "itl_generated")
"""``itl_mean`` is the data's own: (E2E − TTFT) ÷ (output − 1) with the output counted by re-tokenising the text
(inference-perf's way); ``itl_generated`` counts every generated token (the runs force the output length), so
it follows the engine's steps even where re-tokenising counts fewer (both Llama-2-7B runs: 22 % fewer)."""
READINGS = ("uniform", "constant", "poisson", "sessions")
CLAIMED = "uniform"
"""The reading the runs were made under (inference-perf's load type ``constant``): the one judged."""

# workload: (system prompt, question, output) tokens and its published stage rates (README of the data)
_WORKLOADS = {
    "general": (100, 447, 248, (8, 20)),
    "codegen": (100, 466, 247, (5, 10)),
    "roleplay": (100, 650, 251, (6,)),
    "reasoning": (100, 934, 1448, (4,)),
}
# the "-lite" runs and their own rates (README: 3 then 6 for most, 2 then 3 for 60 and 65, 2 then 4 for 62)
_LITE_RATES = {"general": (3, 6), "reasoning": (1,)}
_LITE_EXCEPTIONS = {"60": (2, 3), "65": (2, 3), "62": (2, 4)}
_GPU_NAMES = {"H100": "h100", "A100-80GB": "a100", "L40S": "l40s"}
_STAGE_S = 600.0  # two stages of 600 s, or one of 1,200 s
_SHARED_PROMPTS, _USERS_PER_PROMPT = (
    10,
    10,
)  # inference-perf's shipped shared-prefix examples: 10 system prompts × 10 users


@dataclass
class RealRun:
    """One experiment: its deployment, its load, what the real server gave and what peers predicted."""

    name: str
    model: str
    tp: int
    precision: str
    batched_tokens: int
    workload: str
    rates: tuple[float, ...]
    gpu: str = "h100"
    memory_utilization: float = 0.9
    rates_assumed: bool = False
    """The stage rates were not published for this run (a held-out "-lite" run): the training set's usual ones."""
    actual: dict[tuple[int, str], float] = field(default_factory=dict)
    peers: dict[str, dict[tuple[int, str], float]] = field(default_factory=lambda: defaultdict(dict))

    @property
    def key(self) -> str:
        return self.name.split("-")[0] if not self.name.startswith("2026") else "llama2-codegen"

    @property
    def lengths(self) -> tuple[int, int, int]:
        system, question, output, _ = _WORKLOADS[self.workload]
        return system, question, output

    @property
    def stage_seconds(self) -> float:
        return _STAGE_S if len(self.rates) > 1 else 2 * _STAGE_S

    def consistency(self) -> float:
        """Real E2E ÷ (TTFT + ITL × (output − 1)) of the whole run: 1 when the ITL column counts every token."""
        _, _, output = self.lengths
        return self.actual[(-1, "e2e_mean")] / (
            self.actual[(-1, "ttft_mean")] + self.actual[(-1, "itl_mean")] * (output - 1)
        )


def load_runs(path: Path = DATA) -> list[RealRun]:
    """Every experiment of ``runs.csv`` (the Llama-2-7B codegen run's copies under other labels dropped, as its README says)."""
    runs: dict[str, RealRun] = {}
    with open(path, newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            name, workload = row["experiment"], row["workload"]
            if name.startswith("2026") and workload != "codegen":
                continue  # the same actuals repeated under other workload labels
            run = runs.get(name) or runs.setdefault(name, new_run(row))
            stage, metric = int(row["stage_index"]), row["metric"]
            run.actual[(stage, metric)] = float(row["actual"])
            add_peer(run, row["simulator"], (stage, metric), float(row["predicted"]))
    return finish_runs(runs.values())


def new_run(row: dict[str, str]) -> RealRun:
    """A run from one of its rows (``runs.csv`` or the held-out file): its deployment and its stages' rates."""
    name = row["experiment"]
    workload = row["workload"].removesuffix("-lite")
    key = name.split("-")[0]
    lite = "-lite" in name
    rates = _LITE_EXCEPTIONS.get(key) or (_LITE_RATES.get(workload) if lite else None) or _WORKLOADS[workload][3]
    return RealRun(
        name, row["model"], int(row["tp"]), row["precision"], int(row["max_num_batched_tokens"]), workload,
        tuple(float(r) for r in rates), gpu=_GPU_NAMES[row["hardware"]],
        memory_utilization=float(row.get("gpu_mem_util") or 0.9),
    )  # fmt: skip


def add_peer(run: RealRun, simulator: str, row: tuple[int, str], predicted: float) -> None:
    run.peers[simulator][row] = predicted
    if row[1] == "itl_mean":  # a peer's ITL is its engine's, per generated token
        run.peers[simulator][(row[0], "itl_generated")] = predicted


def finish_runs(runs: Iterable[RealRun]) -> list[RealRun]:
    """Add each stage's ITL per generated token, (E2E − TTFT) ÷ (output − 1), beside the file's own."""
    for run in runs:
        output = run.lengths[2]
        for stage in {s for s, _ in run.actual}:
            e2e, ttft = run.actual[(stage, "e2e_mean")], run.actual[(stage, "ttft_mean")]
            run.actual[(stage, "itl_generated")] = (e2e - ttft) / (output - 1)
    return list(runs)


def deployment(run: RealRun, efficiency: Efficiency | None = None) -> Deployment:
    """The run's vLLM server as surgelab's physics sees it (README: max_model_len 4096, 128 sequences)."""
    return Deployment(
        find_model(run.model), GPUS[run.gpu], tp=run.tp, weights="fp8" if run.precision == "FP8" else "",
        max_num_seqs=128, max_num_batched_tokens=run.batched_tokens, max_model_len=4096,
        gpu_memory_utilization=run.memory_utilization, efficiency=efficiency,
    )  # fmt: skip


def _scenario(run: RealRun, reading: str, seed: int, scale: float) -> dict:
    system, question, output = run.lengths
    seconds = run.stage_seconds * scale
    phases = []
    for i, rate in enumerate(run.rates):
        load: dict = {"rate": rate, "duration": f"{seconds}s", "max_in_flight": 1_000_000, "grace": "3600s"}
        if reading == "sessions":  # inference-perf's own schedule (its default load type), dealt to its users
            load["users"] = _SHARED_PROMPTS * _USERS_PER_PROMPT
            load["arrival"] = "uniform"
        else:
            load["arrival"] = reading
        phases.append({"name": f"stage{i}", "start": f"{i * seconds}s", "load": load})
    workload = {"system_prompt_tokens": system, "prompt_tokens": question, "output_tokens": output}
    if reading == "sessions":
        workload["system_prompts"] = _SHARED_PROMPTS
    return {
        "name": f"h100-{run.key}-{reading}",
        "seed": seed,
        "target": {
            "url": "http://127.0.0.1:9/v1",
            "model": run.model,
            "timeouts": {"first_token": "3600s", "total": "3600s"},
        },
        "phases": phases,
        "workload": workload,
    }


def predict(run: RealRun, reading: str, profile: EngineProfile | Efficiency | None = None, *, seed: int = 0,
            scale: float = 1.0, fast: bool = True) -> tuple[dict[tuple[int, str], float], dict]:  # fmt: skip
    """surgelab's figures for the run's rows (``(stage, metric)``, ms) and the simulation's summary.

    ``profile``: the engine's figures, or efficiencies for the run's deployment (the shipped ones
    by default). ``scale`` shortens every stage (for quick checks); 1 simulates the run's full length.
    """
    if not isinstance(profile, EngineProfile):
        profile = deployment(run, profile).profile(f"h100-{run.key}")
    scenario = build_scenario(_scenario(run, reading, seed, scale))
    _, _, output = run.lengths
    with tempfile.TemporaryDirectory() as tmp:
        profile_file = Path(tmp) / "profile.yaml"
        profile_file.write_text(yaml.safe_dump(profile.to_dict()), encoding="utf-8")
        fleet = build_fleet(
            {"name": "one", "pools": [{"replicas": 1, "profile": str(profile_file)}], "cache": {"prefix": True}}
        )
        result = simulate(scenario, fleet, Path(tmp) / "run", fast=fast)
    summary = result.summary
    figures: dict[tuple[int, str], float] = {}
    blocks = [(-1, summary)] + [(i, summary["by_phase"][f"stage{i}"]) for i in range(len(run.rates))]
    for stage, block in blocks:
        latency = block["latency_ms"]
        for metric in METRICS:
            kind, stat = metric.split("_")
            if kind == "itl":  # (E2E − TTFT) ÷ (output − 1), of the means: every token counted, as generated
                figures[(stage, metric)] = (latency["e2e"]["mean"] - latency["ttft"]["mean"]) / (output - 1)
            else:
                figures[(stage, metric)] = latency[kind][stat]
    return figures, summary
