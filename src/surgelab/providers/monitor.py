"""Monitoring over days: a small probe scenario against each target, on a schedule, into the history.

The seed watched five providers for two weeks, once an hour, with special attention to the
morning peak. A round runs the scenario once per target (one after another, so the targets do
not compete for this machine), appends one ``Sample`` per target and refreshes the Prometheus
gauges. Rounds start at ``start + k × every`` plus a random jitter in ``[0, jitter)`` — a
late round never shifts the later ones — and the loop ends after ``rounds`` or on ``stop``.
"""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from surgelab.providers.history import History, Sample, sample_from_summary
from surgelab.runner.run import run_scenario
from surgelab.scenario.model import Scenario, Target

__all__ = ["MonitorSettings", "Gauges", "run_round", "monitor", "single_targets"]


@dataclass(frozen=True)
class MonitorSettings:
    every: float = 3600.0
    jitter: float = 300.0
    rounds: int | None = None  # None: until stopped
    keep_runs: Path | None = None  # keep each round's run directory under here
    seed: int | None = None  # jitter RNG


def single_targets(scenario: Scenario) -> dict[str, Scenario]:
    """The scenario as it would be written for each of its targets (or its one target)."""
    if not scenario.targets:
        name = scenario.name
        return {name: scenario}
    out = {}
    for named in scenario.targets:
        target = Target(**named.model_dump(exclude={"name", "weight", "price"}))
        out[named.name] = scenario.model_copy(
            update={"target": target, "targets": None, "name": f"{scenario.name}-{named.name}"}
        )
    return out


class Gauges:
    """The latest round's values in Prometheus form, served over HTTP and/or written to a textfile."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["target"]
        self.p90 = Gauge(
            "surgelab_monitor_e2e_p90_seconds", "E2E P90 of the latest round", labels, registry=self.registry
        )
        self.ttft = Gauge(
            "surgelab_monitor_ttft_p90_seconds", "TTFT P90 of the latest round", labels, registry=self.registry
        )
        self.errors = Gauge(
            "surgelab_monitor_error_rate", "Failed / finished in the latest round", labels, registry=self.registry
        )
        self.speed = Gauge("surgelab_monitor_output_tokens_per_second", "Output tokens/s of the latest round", labels,
                           registry=self.registry)  # fmt: skip
        self.last = Gauge("surgelab_monitor_last_round_timestamp_seconds", "Unix time of the latest round", labels,
                          registry=self.registry)  # fmt: skip

    def update(self, sample: Sample) -> None:
        nan = float("nan")
        self.p90.labels(sample.target).set(nan if sample.e2e_p90_ms is None else sample.e2e_p90_ms / 1000)
        self.ttft.labels(sample.target).set(nan if sample.ttft_p90_ms is None else sample.ttft_p90_ms / 1000)
        self.errors.labels(sample.target).set(sample.error_rate)
        self.speed.labels(sample.target).set(nan if sample.output_tokens_per_s is None else sample.output_tokens_per_s)
        self.last.labels(sample.target).set(sample.ts)

    def write(self, path: Path) -> None:
        """node_exporter's textfile-collector format (atomic replace)."""
        write_to_textfile(str(path), self.registry)


async def run_round(scenario: Scenario, db: History, *, keep_runs: Path | None = None, gauges: Gauges | None = None,
                    clock: Callable[[], float] = time.time, stop: asyncio.Event | None = None) -> list[Sample]:  # fmt: skip
    """Run the scenario once against each target and append the samples."""
    keys = {t.name: t.api_key_env for t in scenario.targets or []}
    samples = []
    with tempfile.TemporaryDirectory(prefix="surgelab-monitor-") as scratch:
        for name, single in single_targets(scenario).items():
            if stop is not None and stop.is_set():
                break
            ts = clock()
            stamp = datetime.fromtimestamp(ts, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            run_dir = (keep_runs or Path(scratch)) / name / stamp
            env = keys.get(name) or single.target.api_key_env
            note = ""
            try:
                # no pre-flight: a round against a provider that is down is a measurement (its failures), not an error
                single = single.model_copy(update={"preflight": False}) if single.target.model else single
                result = await run_scenario(
                    single, run_dir, api_key=os.environ.get(env) if env else None, stop_event=stop
                )
                summary = result.summary
                if result.stop_reason != "completed":
                    note = result.stop_reason
            except (OSError, ValueError) as exc:  # the round is lost, not the monitor
                summary, note = {}, f"round failed: {exc}"
            sample = sample_from_summary(ts, name, summary, note)
            db.append(sample)
            if gauges is not None:
                gauges.update(sample)
            samples.append(sample)
    return samples


async def monitor(scenario: Scenario, db: History, settings: MonitorSettings, *, gauges: Gauges | None = None,
                  on_round: Callable[[int, list[Sample]], None] | None = None, stop: asyncio.Event | None = None,
                  clock: Callable[[], float] = time.monotonic) -> int:  # fmt: skip
    """Rounds on the schedule until ``settings.rounds`` or ``stop``; returns the number run."""
    rng = random.Random(settings.seed)
    stop = stop or asyncio.Event()
    start, done = clock(), 0
    while settings.rounds is None or done < settings.rounds:
        due = start + done * settings.every + (rng.uniform(0, settings.jitter) if done and settings.jitter else 0.0)
        try:
            await asyncio.wait_for(stop.wait(), timeout=max(due - clock(), 0.0))
            break  # stopped while waiting
        except asyncio.TimeoutError:
            pass
        samples = await run_round(scenario, db, keep_runs=settings.keep_runs, gauges=gauges, stop=stop)
        done += 1
        if on_round is not None:
            on_round(done, samples)
        if stop.is_set():
            break
    return done
