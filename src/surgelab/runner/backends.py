"""Where a run's load is sent from, behind one interface: this process, worker processes, Ray
actors, or one run per named target side by side (compare mode).

``backend_for`` picks one from the scenario and the caller's choices (``--workers``, ``--ray``);
each backend has one ``run`` coroutine that leaves the run directory behind and returns what
it measured: a ``RunResult``, or for compare mode a ``CompareRun`` (a run directory per target).
Whoever watches the run (the terminal's ``on_tick``, the exporter and the dashboard as
``observers``) is handed to ``run``, so every backend feeds them: records and live snapshots
from this process, or from the shards through their coordinator (``runner.coordinator``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from surgelab.metrics.live import LiveSnapshot
from surgelab.runner.compare import CompareRun, run_compare
from surgelab.runner.protocols import Observer
from surgelab.runner.ray_backend import run_on_ray
from surgelab.runner.run import RunResult, run_scenario
from surgelab.runner.workers import run_with_workers
from surgelab.scenario.model import Scenario

__all__ = ["Backend", "InProcess", "Workers", "OnRay", "Compare", "backend_for"]

OnTick = Callable[[LiveSnapshot], None]


class Backend(Protocol):
    async def run(
        self,
        scenario: Scenario,
        run_dir: Path,
        *,
        api_key: str | None = None,
        on_tick: OnTick | None = None,
        observers: Sequence[Observer] = (),
    ) -> RunResult | CompareRun: ...


@dataclass(frozen=True)
class InProcess:
    """Every request from this process's event loop."""

    handle_signals: bool = False

    async def run(
        self, scenario: Scenario, run_dir: Path, *, api_key: str | None = None, on_tick: OnTick | None = None,
        observers: Sequence[Observer] = (),
    ) -> RunResult:  # fmt: skip
        return await run_scenario(
            scenario, run_dir, api_key=api_key, on_tick=on_tick, handle_signals=self.handle_signals, observers=observers
        )


@dataclass(frozen=True)
class Workers:
    """``count`` worker processes on this machine, each with its shard of the schedule."""

    count: int
    handle_signals: bool = False

    async def run(
        self, scenario: Scenario, run_dir: Path, *, api_key: str | None = None, on_tick: OnTick | None = None,
        observers: Sequence[Observer] = (),
    ) -> RunResult:  # fmt: skip
        return await run_with_workers(
            scenario, run_dir, self.count, api_key=api_key, on_tick=on_tick, handle_signals=self.handle_signals,
            observers=observers,
        )  # fmt: skip


@dataclass(frozen=True)
class OnRay:
    """``workers`` Ray actors spread over a cluster (``address``: a cluster, ``auto`` or ``local``)."""

    workers: int
    address: str = "auto"
    handle_signals: bool = False

    async def run(
        self, scenario: Scenario, run_dir: Path, *, api_key: str | None = None, on_tick: OnTick | None = None,
        observers: Sequence[Observer] = (),
    ) -> RunResult:  # fmt: skip
        return await run_on_ray(
            scenario, run_dir, self.workers, self.address, api_key=api_key, on_tick=on_tick,
            handle_signals=self.handle_signals, observers=observers,
        )  # fmt: skip


@dataclass(frozen=True)
class Compare:
    """The identical schedule to every named target, one run directory each; every target's
    key comes from its own ``api_key_env``, so ``api_key`` is not used. The live view and the
    observers follow the target the terminal shows (the first, or each in turn)."""

    record_responses: bool = False
    handle_signals: bool = False

    async def run(
        self, scenario: Scenario, run_dir: Path, *, api_key: str | None = None, on_tick: OnTick | None = None,
        observers: Sequence[Observer] = (),
    ) -> CompareRun:  # fmt: skip
        return await run_compare(
            scenario, run_dir, record_responses=self.record_responses, handle_signals=self.handle_signals,
            on_tick=on_tick, observers=observers,
        )  # fmt: skip


def backend_for(scenario: Scenario, *, workers: int = 1, ray: str | None = None, handle_signals: bool = False) -> Backend:
    """Compare mode when the scenario asks for it; else Ray when given an address, else worker
    processes when more than one, else this process."""
    if scenario.targets and scenario.routing.mode == "compare":
        return Compare(scenario.routing.record_responses, handle_signals)
    if ray is not None:
        return OnRay(workers, ray, handle_signals)
    if workers > 1:
        return Workers(workers, handle_signals)
    return InProcess(handle_signals)
