"""The cheapest fleet that meets the SLO: a deployment space searched by physics first, simulation after.

For every configuration of the space (``space.SearchSpace``):

1. **Physics prunes.** Weights that do not fit, a context longer than the model or the KV cache
   holds, and a capacity far below the peak are reasons, not simulations: the steady-state
   analysis (``engine.steady``) gives the highest rate one replica holds with its *mean*
   latency inside the objective's bounds, and a mean never exceeds the P90/P99 it bounds, so
   ``ceil(peak ÷ that rate)`` replicas is a floor no passing fleet goes under.
2. **Cheapest first.** Configurations are simulated in order of their floor's cost; once one
   passes, a configuration whose floor costs more than ``band`` times the best is not
   simulated (it cannot win; it is left off the front).
3. **Fewest replicas by simulation.** From the floor up (+1, +2, +4 …, then bisection), each
   count simulated on the scenario's own schedule at the peak; a simulation stops as soon as
   its objective is lost (more requests over a P99 bound than 1 % of the run, more errors
   than the error-rate bound allows).
   An autoscaled configuration (``autoscale`` in the space) is one simulation instead: its
   HPA starts at ``min`` on the workload's own load shape, and it costs its mean replicas.
4. **Robust answers.** Passing configurations, cheapest first, are simulated again with other
   seeds and at the slow end of the engine model's measured error (every time × (1 + E2E
   error)); a count that fails there grows until it holds, and the checks go on while a
   configuration's nominal cost is below the best robust one (at equal cost, while it is faster).
   The winner is the cheapest robust one, the fastest at P99 E2E among equals.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from surgelab.conditions import Threshold
from surgelab.engine.accuracy import error_bar
from surgelab.engine.profile import EngineProfile, ProfileError
from surgelab.engine.profiles import load_profile
from surgelab.engine.steady import steady_state
from surgelab.load.phases import open_loop_offsets, plan_phases
from surgelab.metrics.record import State
from surgelab.plan.space import Candidate, SearchSpace
from surgelab.ray_cluster import connect
from surgelab.scenario.loader import load_scenario
from surgelab.scenario.model import Scenario
from surgelab.sim import build_fleet, simulate
from surgelab.sim.traffic import Traffic
from surgelab.units import SECOND

__all__ = ["Outcome", "SearchResult", "Trial", "mean_lengths", "prune", "search", "trial", "workload"]

_BAND = 1.5
"""Configurations whose floor costs more than this many times the best passing one are not simulated."""


@dataclass
class Trial:
    """One simulation: a configuration at a replica count, one seed, nominal or pessimistic physics."""

    replicas: int
    passed: bool
    why: str
    """The failed bounds (``p99(ttft) 612 ms ≥ 500 ms``), or why it stopped early; empty when it passed."""
    p99_ttft_ms: float | None
    p99_e2e_ms: float | None
    seed: int
    pessimistic: bool = False
    stopped_early: bool = False
    cpu_s: float = 0.0
    in_flight_per_replica: float | None = None
    mean_replicas: float | None = None
    """Replicas over the run on average (what an autoscaled fleet pays for)."""
    peak_replicas: int | None = None
    """The most replicas provisioned at once (an autoscaled fleet's size at its peak)."""


@dataclass
class Outcome:
    """What the search found for one configuration."""

    candidate: Candidate
    status: str
    """``pruned`` (physics), ``skipped`` (its floor costs too much to win), ``passed`` or ``failed``."""
    reason: str = ""
    floor: int = 0
    """Fewest replicas the steady-state analysis allows at the peak."""
    bound_cost: float = 0.0
    """The least it could cost per hour and pass (physics): the order of simulation, and the skip rule."""
    replicas: int | None = None
    """Fewest replicas that passed, nominal physics and the scenario's seed."""
    robust_replicas: int | None = None
    """Fewest that also passed with other seeds and at the model's slow end (finalists only)."""
    mean_replicas: float | None = None
    """Autoscaled: the mean replicas of its passing simulation (the robust checks' highest once checked)."""
    peak_replicas: int | None = None
    """Autoscaled: the most replicas its HPA provisioned at once (the robust checks' highest once checked)."""
    trials: list[Trial] = field(default_factory=list)

    @property
    def cost_per_hour(self) -> float | None:
        n = self.mean_replicas if self.candidate.autoscale else self.robust_replicas or self.replicas
        return None if n is None else n * self.candidate.replica_hour

    @property
    def replicas_text(self) -> str:
        """``7``, or for an autoscaled one ``HPA 2–24, mean 6.3``."""
        if self.candidate.autoscale is None:
            n = self.robust_replicas or self.replicas
            return "" if n is None else str(n)
        _, _, low, high = self.candidate.autoscale
        return f"HPA {low}–{high}" + (f", mean {self.mean_replicas:.1f}" if self.mean_replicas is not None else "")

    @property
    def latency(self) -> Trial | None:
        """The passing nominal trial at the chosen count."""
        return next((t for t in self.trials if t.passed and not t.pessimistic and t.replicas == self.replicas), None)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "candidate": {**asdict(self.candidate), "label": self.candidate.label()},
                "cost_per_hour": self.cost_per_hour, "replicas_text": self.replicas_text}  # fmt: skip


@dataclass
class SearchResult:
    space: SearchSpace
    outcomes: list[Outcome]
    winner: Outcome | None
    front: list[Outcome]
    error_text: str
    simulations: int
    wall_s: float
    peak: float

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for o in self.outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
        return {
            "name": self.space.name, "peak_rps": self.peak, "slo": [t.expr for t in self.space.slo],
            "configurations": len(self.outcomes), "by_status": counts, "simulations": self.simulations,
            "wall_s": self.wall_s, "model_error": self.error_text,
            "winner": self.winner.to_dict() if self.winner else None,
            "front": [o.candidate.label() for o in self.front],
            "outcomes": [o.to_dict() for o in self.outcomes],
        }  # fmt: skip


# -- the workload -------------------------------------------------------------------------------


def workload(space: SearchSpace, base: Path) -> Scenario:
    """The scenario the search simulates: the space's workload (a scenario file, or a run directory's own
    scenario: its traffic again, from its seed), its steady rate set to the peak, its objective the space's."""
    path = base / space.workload
    if path.is_dir():
        path = path / "scenario.yaml"
    overrides: dict[str, tuple[str, Any]] = {}
    if space.peak is not None:
        overrides["load.rate"] = ("peak", space.peak)
    if space.duration is not None:
        overrides["load.duration"] = ("duration", f"{space.duration}s")
    scenario = load_scenario(path, overrides)
    return scenario.model_copy(update={"thresholds": list(space.slo), "name": f"{space.name}-trial"})


def _expected(scenario: Scenario) -> int:
    """Requests the open-loop phases schedule (what a pNN budget is a share of); closed loops: unbounded."""
    phases = scenario.phase_list
    if any(p.load.mode != "open" for p in phases):
        return 1 << 40
    return sum(len(open_loop_offsets(scenario, i)) for i in range(len(phases)))


def mean_lengths(scenario: Scenario, n: int = 2000) -> tuple[float, float, int]:
    """Mean prompt and output tokens of the first requests, and the longest prompt + output among them."""
    prompts, outputs = [], []
    for plan in plan_phases(scenario):
        for i in range(n):
            spec = plan.sampler.spec(i, False)
            prompts.append(spec.prompt_tokens)
            outputs.append(spec.max_tokens)
    total = max(p + o for p, o in zip(prompts, outputs))
    return float(np.mean(prompts)), float(np.mean(outputs)), int(total)


def _rates(scenario: Scenario) -> tuple[float, float]:
    """The highest rate the scenario plans, and its mean over the run (req/s; closed loops count 0)."""
    traffic = Traffic(scenario, texts=False)
    length = traffic.end_ns / SECOND
    planned = sum(len(s.offsets) for s in traffic.sources if s.offsets is not None)
    return traffic.planned_peak(0.0, length), planned / length if length > 0 else 0.0


# -- physics first --------------------------------------------------------------------------------


def _mean_bounds(slo: Iterable[Threshold]) -> dict[str, float]:
    """Latency bounds a mean must meet for a P90+ (or mean) objective to be possible, in seconds."""
    bounds: dict[str, float] = {}
    for t in slo:
        agg = t.aggregation or ""
        if (
            t.metric in ("ttft", "e2e", "itl", "tpot")
            and t.op in ("<", "<=")
            and (agg == "mean" or (agg.startswith("p") and float(agg[1:]) >= 90))
        ):
            bounds[t.metric] = min(bounds.get(t.metric, math.inf), t.value)
    return bounds


def _held(profile: EngineProfile, rate: float, prompt: float, output: float, bounds: dict[str, float]) -> bool:
    state = steady_state(profile, rate, max(round(prompt), 1), max(round(output), 1))
    if state.overloaded:
        return False
    means = {"ttft": state.ttft, "e2e": state.e2e, "itl": state.itl, "tpot": state.itl}
    return all(means[m] <= bound for m, bound in bounds.items())


def replica_rate(profile: EngineProfile, prompt: float, output: float, bounds: dict[str, float]) -> float | None:
    """The highest rate one replica holds with its means inside ``bounds`` (None: no rate at all)."""
    low, high = 0.0, 1.0
    while _held(profile, high, prompt, output, bounds):  # the first rate it cannot hold
        low, high = high, high * 2
        if high > 1e6:
            return math.inf
    if low == 0.0 and not _held(profile, 1e-3, prompt, output, bounds):
        return None
    low = max(low, 1e-3)
    for _ in range(30):
        mid = (low + high) / 2
        low, high = (mid, high) if _held(profile, mid, prompt, output, bounds) else (low, mid)
    return low


def floor_replicas(
    profile: EngineProfile, peak: float, prompt: float, output: float, bounds: dict[str, float]
) -> int | None:
    """Fewest replicas the steady-state analysis allows (None: not even one request a second… at all)."""
    rate = replica_rate(profile, prompt, output, bounds)
    return None if rate is None else max(math.ceil(peak / rate - 1e-9), 1)


def prune(
    space: SearchSpace, base: Path, candidate: Candidate, peak: float, lengths: tuple[float, float, int],
    mean_rate: float = 0.0,
) -> Outcome:
    """The configuration's floor and least cost, or the physical reason it cannot serve the workload.

    An autoscaled one pays at least its ``min`` and, on average, the mean rate's share of a replica's
    capacity; it cannot pass when its ``max`` is below the floor at the peak."""
    try:
        profile = load_profile(candidate.deployment(space.max_model_len, base), base)
    except ProfileError as exc:
        return Outcome(candidate, "pruned", f"memory: {exc}")
    prompt, output, longest = lengths
    limit = min(profile.max_model_len, profile.kv_capacity_tokens)
    if longest > limit:
        return Outcome(candidate, "pruned", f"context: a request of {longest:,} tokens exceeds {limit:,}")
    rate = replica_rate(profile, prompt, output, _mean_bounds(space.slo))
    if rate is None:
        return Outcome(candidate, "pruned", "capacity: one replica cannot meet the objective's means at any rate")
    floor = max(math.ceil(peak / rate - 1e-9), 1)
    if candidate.autoscale is not None:
        _, _, low, high = candidate.autoscale
        if floor > high:
            return Outcome(candidate, "pruned", f"capacity: the peak needs at least {floor} replicas, the HPA's max is {high}", floor)
        least = max(low, mean_rate / rate) * candidate.replica_hour
        return Outcome(candidate, "candidate", floor=floor, bound_cost=least)
    floor = max(floor, space.replicas.min)
    if floor > space.replicas.max:
        return Outcome(
            candidate, "pruned", f"capacity: needs at least {floor} replicas (max {space.replicas.max})", floor
        )
    return Outcome(candidate, "candidate", floor=floor, bound_cost=floor * candidate.replica_hour)


# -- simulation ---------------------------------------------------------------------------------


def fleet_data(candidate: Candidate, replicas: int, profile: dict[str, Any] | str, name: str = "search") -> dict[str, Any]:
    """The fleet file's data for ``replicas`` of the configuration (an autoscaled one starts at its min)."""
    pool: dict[str, Any] = {"name": "replica", "replicas": replicas, "profile": profile,
                            "cost_per_hour": round(candidate.replica_hour, 6)}  # fmt: skip
    hpa = candidate.hpa()
    if hpa is not None:
        pool.update(replicas=hpa["min"], autoscale=hpa)
        if candidate.cold_start:
            pool["cold_start"] = candidate.cold_start
    return {"name": name, "pools": [pool], "router": {"policy": candidate.router}}


def _watch(scenario: Scenario, expected: int) -> Callable[..., str | None]:
    """Stop a simulation once its objective is lost for good: more over a pNN bound than 100 − NN % of the run."""
    budgets: list[tuple[str, float, int, Threshold]] = []
    for t in scenario.thresholds:
        agg = t.aggregation or ""
        if t.metric in ("ttft", "e2e") and agg.startswith("p") and t.op in ("<", "<="):
            budgets.append((t.metric, t.value, int((1 - float(agg[1:]) / 100) * expected), t))
        elif t.metric == "error_rate" and t.op in ("<", "<="):
            budgets.append(("error", t.value, int(t.value * expected), t))
    over = [0] * len(budgets)

    def watch(meta, out) -> str | None:
        if meta.warmup:
            return None
        sent = meta.intended_ns
        ok = out.state is State.OK
        for k, (metric, bound, budget, t) in enumerate(budgets):
            if metric == "error":
                bad = not ok
            else:
                end = out.first_token_ns if metric == "ttft" else out.end_ns
                bad = not ok or end is None or (end - sent) / SECOND > bound
            if bad:
                over[k] += 1
                if over[k] > budget:
                    return f"{t.expr} lost: {over[k]:,} of {expected:,} requests past it"
        return None

    return watch


def trial(scenario: Scenario, candidate: Candidate, replicas: int, profile: dict[str, Any] | str, seed: int,
          pessimistic: bool = False) -> Trial:  # fmt: skip
    """Simulate ``replicas`` of the configuration on the scenario (with ``seed``) and judge it."""
    started = time.process_time()
    scenario = scenario.model_copy(update={"seed": seed})
    fleet = build_fleet(fleet_data(candidate, replicas, profile))
    expected = _expected(scenario)
    with tempfile.TemporaryDirectory() as tmp:
        result = simulate(scenario, fleet, Path(tmp) / "trial", stop=_watch(scenario, expected))
        stopped = _stop_reason(Path(tmp) / "trial")
    summary = result.summary
    failed = [f"{r['expr']} (observed {_observed(r)})" for r in summary.get("thresholds", []) if not r["passed"]]
    passed = not stopped and not failed
    latency = summary.get("latency_ms", {})
    p99 = {k: latency.get(k, {}).get("p99") for k in ("ttft", "e2e")}
    why = stopped or "; ".join(failed)
    in_flight = summary.get("concurrency", {}).get("mean_in_flight")
    mean = summary.get("fleet", {}).get("average_instances")
    per = in_flight / (mean or replicas) if in_flight is not None else None
    peak = sum(p.get("peak_replicas", 0) for p in result.fleet.get("pools", {}).values())
    return Trial(replicas, passed, why, p99["ttft"], p99["e2e"], seed, pessimistic, bool(stopped),
                 time.process_time() - started, per, mean, peak or None)  # fmt: skip


def _stop_reason(run_dir: Path) -> str:
    """Why the simulation ended early — the search's own early stop, or a stop rule or abort guard of
    the workload's (the simulator keeps them as a run does): a trial that did not run its course
    does not pass on what it saw before. Empty when it completed."""
    info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    reason = str(info.get("stop_reason", "completed"))
    return "" if reason == "completed" else reason.removeprefix("stopped: ")


def _observed(row: dict[str, Any]) -> str:
    value = row.get("observed")
    if value is None:
        return "no data"
    if row.get("metric", "").startswith(("p", "mean")) or "(" in row.get("expr", ""):
        return f"{value * 1e3:,.0f} ms"
    return f"{value:.3g}"


def _fewest(scenario: Scenario, outcome: Outcome, max_replicas: int, cap: float | None, seed: int,
            profile: dict[str, Any]) -> Outcome:  # fmt: skip
    """Fewest replicas that pass, from the floor: +1, +2, +4 … then bisection; stops past ``cap`` cost."""
    cand = outcome.candidate
    failed, n, step = outcome.floor - 1, outcome.floor, 1
    passed_at = None
    while n <= max_replicas:
        if cap is not None and n * cand.replica_hour > cap:
            outcome.status, outcome.reason = (
                "skipped",
                f"not passed below {n} replicas, which cost more than the best × {_BAND}",
            )
            return outcome
        t = trial(scenario, cand, n, profile, seed)
        outcome.trials.append(t)
        if t.passed:
            passed_at = n
            break
        failed, n, step = n, n + step, step * 2
    if passed_at is None:
        outcome.status, outcome.reason = "failed", f"not passed at {max_replicas} replicas: {outcome.trials[-1].why}"
        return outcome
    while passed_at - failed > 1:  # bisection between the last failure and the first pass
        mid = (passed_at + failed) // 2
        t = trial(scenario, cand, mid, profile, seed)
        outcome.trials.append(t)
        passed_at, failed = (mid, failed) if t.passed else (passed_at, mid)
    outcome.status, outcome.replicas = "passed", passed_at
    return outcome


def _autoscaled(scenario: Scenario, outcome: Outcome, seed: int, profile: dict[str, Any]) -> Outcome:
    """One simulation: the HPA from its min on the workload's load shape; it costs its mean replicas."""
    t = trial(scenario, outcome.candidate, outcome.candidate.autoscale[2], profile, seed)  # type: ignore[index]
    outcome.trials.append(t)
    if t.passed:
        outcome.status, outcome.replicas, outcome.mean_replicas = "passed", t.replicas, t.mean_replicas
        outcome.peak_replicas = t.peak_replicas
    else:
        outcome.status, outcome.reason = "failed", t.why
    return outcome


def _evaluate(args: tuple) -> Outcome:
    scenario, outcome, max_replicas, cap, seed, profile = args
    if outcome.candidate.autoscale is not None:
        return _autoscaled(scenario, outcome, seed, profile)
    return _fewest(scenario, outcome, max_replicas, cap, seed, profile)


def _robust(scenario: Scenario, outcome: Outcome, space: SearchSpace, base: Path) -> Outcome:
    """The finalist checked with other seeds and at the model's slow end: a fixed count grows until it
    holds; an autoscaled one holds as it is or fails (its HPA decides the count), and costs the highest
    mean replicas among its checks."""
    cand = outcome.candidate
    deployment = cand.deployment(space.max_model_len, base)
    nominal = load_profile(deployment, base)
    bar = error_bar(nominal)
    slow = nominal.slowed(1 + (bar.e2e if bar else 0.0) / 100).to_dict()
    checks = [(scenario.seed + k + 1, deployment, False) for k in range(space.seeds)] + [(scenario.seed, slow, True)]
    hpa = cand.autoscale
    n = hpa[2] if hpa is not None else outcome.replicas or outcome.floor
    while n <= space.replicas.max or hpa is not None:
        results = [trial(scenario, cand, n, profile, seed, pessimistic) for seed, profile, pessimistic in checks]
        outcome.trials.extend(results)
        lost = next((t for t in results if not t.passed), None)
        if lost is None:
            outcome.robust_replicas = n
            if hpa is not None:
                outcome.mean_replicas = max(t.mean_replicas or 0.0 for t in outcome.trials)
                outcome.peak_replicas = max(t.peak_replicas or 0 for t in outcome.trials) or None
            return outcome
        if hpa is not None:
            where = "at the model's slow end" if lost.pessimistic else f"with seed {lost.seed}"
            outcome.status, outcome.reason = "failed", f"does not hold {where}: {lost.why}"
            return outcome
        n += 1
    outcome.status, outcome.reason = "failed", "no count up to the space's max holds at the model's slow end"
    return outcome


def _pareto(outcomes: list[Outcome]) -> list[Outcome]:
    """Passing configurations no other beats on both cost and P99 E2E."""
    points = [(_cost(o), _p99_e2e(o), o) for o in outcomes if o.status == "passed"]
    points.sort(key=lambda p: (p[0], p[1]))
    front, best = [], math.inf
    for _, latency, o in points:
        if latency < best:
            front.append(o)
            best = latency
    return front


def search(space: SearchSpace, base: Path, scenario: Scenario, *, workers: int = 1, ray: str | None = None,
           on_progress: Callable[[str], None] | None = None) -> SearchResult:  # fmt: skip
    """Search ``space`` for the cheapest fleet that meets its objective on ``scenario`` (``workload()``).

    ``workers`` simulations at a time: in this process (1), in worker processes, or with ``ray`` (a
    cluster address, as ``run --ray`` takes) in one Ray actor per CPU of the cluster."""
    say = on_progress or (lambda _m: None)
    pool, workers = _pool(workers, ray)
    started = time.perf_counter()
    planned_peak, mean_rate = _rates(scenario)
    peak = space.peak or planned_peak
    lengths = mean_lengths(scenario)
    outcomes = [prune(space, base, c, peak, lengths, mean_rate) for c in space.candidates()]
    alive = sorted((o for o in outcomes if o.status == "candidate"), key=lambda o: (o.bound_cost, o.candidate.label()))
    say(
        f"{len(outcomes)} configurations: {len(outcomes) - len(alive)} pruned by physics, {len(alive)} to simulate, the least they could cost first"
    )
    best: float | None = None
    done: list[Outcome] = []
    with pool:
        pending = list(alive)
        while pending:
            batch, pending = pending[:workers], pending[workers:]
            cap = best * _BAND if best is not None else None
            runnable = []
            for o in batch:
                if cap is not None and o.bound_cost > cap:
                    o.status, o.reason = "skipped", f"its least cost ({o.bound_cost:,.2f}/h) is more than the best × {_BAND}"
                    done.append(o)
                else:
                    runnable.append(o)
            jobs = [(scenario, o, space.replicas.max, cap, scenario.seed, o.candidate.deployment(space.max_model_len, base))
                    for o in runnable]  # fmt: skip
            for o in pool.map(_evaluate, jobs):
                done.append(o)
                if o.status == "passed":
                    cost = _cost(o)
                    best = cost if best is None else min(best, cost)
                    say(f"  {o.candidate.label()}: {o.replicas_text} replicas pass ({cost:,.2f}/h)")
    by_label = {o.candidate.label(): o for o in done}
    outcomes = [by_label.get(o.candidate.label(), o) for o in outcomes]
    # robust counts, cheapest nominal first, until no one left could beat the best robust one (robust >= nominal);
    # a tie at its cost is checked only if it is faster, as the winner among equals is the fastest
    winner: Outcome | None = None
    for o in sorted(
        (o for o in outcomes if o.status == "passed"), key=lambda o: (_cost(o), o.candidate.label())
    ):
        if winner is not None and (_cost(o), _p99_e2e(o)) >= (_cost(winner), _p99_e2e(winner)):
            if _cost(o) > _cost(winner):
                break
            continue
        _robust(scenario, o, space, base)
        if o.robust_replicas is not None:
            say(f"  {o.candidate.label()}: {o.replicas_text} replicas hold at the model's slow end and other seeds")
            if winner is None or (_cost(o), _p99_e2e(o)) < (_cost(winner), _p99_e2e(winner)):
                winner = o
    simulations = sum(len(o.trials) for o in outcomes)
    bar = error_bar(load_profile(winner.candidate.deployment(space.max_model_len, base), base)) if winner else None
    return SearchResult(space, outcomes, winner, _pareto(outcomes), bar.describe() if bar else "", simulations,
                        time.perf_counter() - started, peak)  # fmt: skip


def _cost(outcome: Outcome) -> float:
    """What a configuration costs per hour, for ranking: one without a count (never passed) last."""
    cost = outcome.cost_per_hour
    return math.inf if cost is None else cost


def _p99_e2e(outcome: Outcome) -> float:
    """Its passing trial's P99 E2E, for ranking: none (or a trial without one) last."""
    latency = outcome.latency
    return math.inf if latency is None or latency.p99_e2e_ms is None else latency.p99_e2e_ms


def _pool(workers: int, ray: str | None) -> tuple[Any, int]:
    """What maps the simulations, and how many go at once."""
    if ray:
        cluster = connect(ray)  # RayUnavailable without Ray (pip install 'surgelab[ray]') or a cluster
        from ray.util.multiprocessing import Pool  # optional, as ray itself: only with --ray

        workers = max(int(cluster.cluster_resources().get("CPU", 1)), 1)  # an actor per CPU: more would wait
        return Pool(processes=workers), workers
    return (ProcessPoolExecutor(workers) if workers > 1 else _Inline()), workers


class _Inline:
    """``ProcessPoolExecutor``'s ``map`` in this process (one worker: no process to start)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Callable, items: Iterable) -> Iterable:
        return map(fn, items)
