"""When a worker dies mid-run: what it took with it, recorded request by request.

Every worker builds the same schedule from the same seed, so the driver knows what a dead
worker's shard planned, and the worker's flushed records are already in the run directory.
Each planned open-loop request of its shard that left no record gets one in state ``lost``:
*in flight* when it was due before the driver saw the worker gone (sent, or about to be; its
outcome died with the worker, in flight or not yet flushed), *not sent* when it was due after,
up to where the run stopped. A closed-loop user of a dead worker simply stops: requests it
had issued that left no record (gaps in the worker's id sequence) are lost in flight; what
it would have sent next was never planned, so it is not counted (the reason names the users).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from surgelab.load.identity import meta_for
from surgelab.load.phases import TURN_SHIFT, PhasePlan, open_loop_offsets
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordBuffer, RecordMeta, RecordStore, recorded_ids
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND

__all__ = ["WorkerLoss", "record_losses", "account_losses"]


@dataclass
class WorkerLoss:
    """One worker that ended without finishing its shard."""

    worker: int
    died_at_ns: int  # on the run clock, when the driver saw it gone
    cause: str  # e.g. "exit code -9 (SIGKILL)" or "ActorDiedError"
    not_sent: int = 0
    in_flight: int = 0
    users: int = 0  # closed-loop users that stopped with it

    def reason(self) -> str:
        parts = [f"{self.not_sent} planned requests not sent", f"{self.in_flight} in flight or unflushed lost"]
        if self.users:
            parts.insert(0, f"its {self.users} closed-loop users stopped")
        return f"worker {self.worker} died at {self.died_at_ns / SECOND:.1f} s: " + ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """What run.json records of the loss (the summary's validity reason is ``reason``)."""
        return {
            "worker": self.worker, "died_at_s": round(self.died_at_ns / SECOND, 3), "cause": self.cause,
            "not_sent": self.not_sent, "in_flight_lost": self.in_flight, "closed_loop_users": self.users,
            "reason": self.reason(),
        }  # fmt: skip


def record_losses(
    scenario: Scenario, plans: list[PhasePlan], run_dir: Path, loss: WorkerLoss, count: int, cut_ns: int
) -> WorkerLoss:
    """Write a ``lost`` record for every request of worker ``loss.worker`` (of ``count``) that left none;
    requests due at or after ``cut_ns`` (where the run stopped) were never due, and are left out."""
    have = np.unique(recorded_ids(run_dir, loss.worker))
    buffer = RecordBuffer(worker=loss.worker)
    for plan in plans:
        if plan.phase.load.mode == "open":
            _open_loop(scenario, plan, loss, count, cut_ns, have, buffer)
        else:
            _closed_loop(plan, loss, count, have, buffer)
    RecordStore(run_dir, worker=loss.worker, writer="lost-").write(buffer.take())
    return loss


def account_losses(
    scenario: Scenario, plans: list[PhasePlan], run_dir: Path, info: dict[str, Any], losses: list[WorkerLoss],
    count: int, reason: str, stop_at_ns: int | None,
) -> str:  # fmt: skip
    """Record what every dead worker took with it, note the losses in ``info`` (run.json) and
    return the run's stop reason, which says the run went on without them."""
    run_end = int(info["planned_duration_s"] * SECOND)
    cut = min(stop_at_ns, run_end) if stop_at_ns is not None else run_end
    losses = sorted(losses, key=lambda loss: loss.worker)
    for loss in losses:
        record_losses(scenario, plans, run_dir, loss, count, cut)
    info["worker_losses"] = [loss.as_dict() for loss in losses]
    if reason == "completed":
        gone = ", ".join(f"worker {loss.worker} died at {loss.died_at_ns / SECOND:.1f} s" for loss in losses)
        reason = f"completed by the other workers ({gone})"
    return reason


def _open_loop(
    scenario: Scenario,
    plan: PhasePlan,
    loss: WorkerLoss,
    count: int,
    cut_ns: int,
    have: np.ndarray,
    buffer: RecordBuffer,
) -> None:
    offsets = open_loop_offsets(scenario, plan.index) + plan.start_ns
    indices = np.arange(loss.worker, len(offsets), count)
    intended = offsets[indices]
    missing = ~np.isin(plan.id_base + indices, have) & (intended < min(cut_ns, plan.end_ns))
    for i, at in zip(indices[missing].tolist(), intended[missing].tolist()):
        spec = plan.sampler.spec(i)
        turn = 1 if plan.sampler.conversation(i) is not None else 0
        meta = meta_for(plan, i, spec, at, -1, turn)
        _lost(buffer, meta, loss, sent=at < loss.died_at_ns)


def _closed_loop(plan: PhasePlan, loss: WorkerLoss, count: int, have: np.ndarray, buffer: RecordBuffer) -> None:
    users = len(range(loss.worker, int(np.ceil(plan.phase.load.shape.peak)), count))
    loss.users += users
    mine = have[(have >= plan.id_base) & (have < plan.id_base + (1 << TURN_SHIFT))] - plan.id_base
    if not mine.size:
        return
    issued = np.arange(loss.worker, int(mine.max()) + 1, count)
    for i in issued[~np.isin(issued, mine)].tolist():  # issued (a later one came back) but never recorded
        meta = RecordMeta(
            id=plan.request_id(i), intended_ns=loss.died_at_ns, warmup=loss.died_at_ns < plan.warmup_end_ns,
            phase=plan.phase.name,
        )  # fmt: skip
        _lost(buffer, meta, loss, sent=True)


def _lost(buffer: RecordBuffer, meta: RecordMeta, loss: WorkerLoss, sent: bool) -> None:
    if sent:
        loss.in_flight += 1
        why = f"worker {loss.worker} died ({loss.cause}) with this request in flight or its record not yet flushed"
    else:
        loss.not_sent += 1
        why = f"worker {loss.worker} died ({loss.cause}) before sending it"
    buffer.add(meta, Outcome(state=State.LOST, error=why, attempts=1 if sent else 0))
