"""Compare mode: the identical schedule sent to every named target, side by side.

Each target gets an ordinary run directory (``RUN/<target>/``) from the same seed — so the
same requests at the same intended times — either all at once (each with its own connection
pool) or one after another. With ``record_responses`` the answers are kept and compared
request by request, exactly and after normalisation: the parallel-run check a team does
before migrating from one provider to another (use deterministic sampling for it).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surgelab.metrics.record import Outcome, State
from surgelab.metrics.rundir import write_json
from surgelab.metrics.store import RecordMeta
from surgelab.runner.interrupts import Interrupts
from surgelab.runner.preflight import ready
from surgelab.runner.protocols import Observer
from surgelab.runner.run import RunResult, run_scenario, with_salt
from surgelab.scenario.model import Scenario, Target

__all__ = ["run_compare", "CompareRun", "agreement"]

_WORDS = re.compile(r"[^\w]+", re.UNICODE)


@dataclass
class CompareRun:
    run_dir: Path
    results: dict[str, RunResult]

    @property
    def stop_reason(self) -> str:
        reasons = [r.stop_reason for r in self.results.values() if r.stop_reason != "completed"]
        return reasons[0] if reasons else "completed"


class _Responses:
    """An observer that writes each successful answer as a JSON line (id, text)."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")

    def observe(self, meta: RecordMeta, out: Outcome) -> None:
        if out.state is State.OK and out.text is not None:
            self.file.write(json.dumps({"id": meta.id, "text": out.text}) + "\n")

    def update(self, snapshot: Any) -> None:
        pass

    def close(self) -> None:
        self.file.close()


def _normalise(text: str) -> str:
    return " ".join(_WORDS.sub(" ", text.lower()).split())


def agreement(a: Path, b: Path) -> dict[str, Any]:
    """How often two targets answered the same request identically (exactly / normalised)."""

    def load(path: Path) -> dict[int, str]:
        return {row["id"]: row["text"] for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())}

    left, right = load(a), load(b)
    common = sorted(set(left) & set(right))
    exact = sum(left[i] == right[i] for i in common)
    normal = sum(_normalise(left[i]) == _normalise(right[i]) for i in common)
    n = len(common)
    return {"compared": n, "exact": exact / n if n else None, "normalised": normal / n if n else None}


def _single(scenario: Scenario, name: str) -> Scenario:
    """The scenario as it would be written for one of its targets."""
    named = next(t for t in scenario.targets or [] if t.name == name)
    target = Target(**named.model_dump(exclude={"name", "weight", "price"}))
    return scenario.model_copy(update={"target": target, "targets": None, "name": f"{scenario.name}-{name}"})


async def run_compare(
    scenario: Scenario, run_dir: Path, *, record_responses: bool = False, handle_signals: bool = False, on_tick: Any = None,
    observers: Sequence[Observer] = (),
) -> CompareRun:  # fmt: skip
    """Every target's run; the live view and ``observers`` follow one target at a time, as the
    terminal does: the first when they run at once, each in turn when one after another."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    scenario = with_salt(scenario)  # one salt for all: every target gets the very same prompts
    first = scenario.targets[0] if scenario.targets else None
    first_key = os.environ.get(first.api_key_env) if first is not None and first.api_key_env else None
    scenario = await ready(scenario, first_key)  # every target checked; one tokenizer for all, learned from the first
    names = [t.name for t in scenario.targets or []]
    stop, hurry = asyncio.Event(), asyncio.Event()
    interrupts = Interrupts(scenario, lambda _reason: stop.set(), hurry.set, enabled=handle_signals, observers=observers).install()
    recorders = {n: _Responses(run_dir / f"responses-{n}.jsonl") for n in names} if record_responses else {}

    async def one(name: str, followed: bool) -> RunResult:
        target = next(t for t in scenario.targets or [] if t.name == name)
        key = os.environ.get(target.api_key_env) if target.api_key_env else None
        watching = [*([recorders[name]] if name in recorders else []), *(observers if followed else ())]
        return await run_scenario(
            _single(scenario, name), run_dir / name, api_key=key, stop_event=stop, hurry_event=hurry, observers=watching,
            on_tick=on_tick if followed else None, keep_text=record_responses,
        )  # fmt: skip

    try:
        if scenario.routing.order == "concurrent":
            done = await asyncio.gather(*(one(n, k == 0) for k, n in enumerate(names)))
            results = dict(zip(names, done))
        else:
            results = {}
            for name in names:
                if stop.is_set():
                    break
                results[name] = await one(name, True)
    finally:
        interrupts.remove()
        for recorder in recorders.values():
            recorder.close()
    index: dict[str, Any] = {"targets": names, "order": scenario.routing.order, "runs": {n: n for n in results}}
    if record_responses and len(results) > 1:
        base = names[0]
        index["agreement"] = {
            n: agreement(run_dir / f"responses-{base}.jsonl", run_dir / f"responses-{n}.jsonl") for n in names[1:] if n in results
        }
    write_json(run_dir / "compare-index.json", index)
    return CompareRun(run_dir, results)
