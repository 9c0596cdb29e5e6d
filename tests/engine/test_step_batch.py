"""One coalescing rule for the embedded server (wall clock) and the simulator (virtual clock)."""

from __future__ import annotations

from surgelab.engine import Engine, EngineRequest, load_profile, step_batch


def _engine() -> Engine:
    engine = Engine(load_profile("llama3-8b-h100"))
    for i in range(8):
        engine.add(EngineRequest(f"r{i}", 64, 400))
    return engine


def test_virtual_time_runs_steps_until_their_time_reaches_the_coalescing_span() -> None:
    engine = _engine()
    results, total = step_batch(engine, 0.05)
    assert total >= 0.05 and total - results[-1].duration < 0.05  # the step that crossed it ends the batch
    assert total == sum(r.duration for r in results)


def test_a_batch_already_ahead_of_the_clock_stops_sooner() -> None:
    alone, _ = step_batch(_engine(), 0.05)
    ahead, total = step_batch(_engine(), 0.05, ahead_s=0.04)
    assert len(ahead) < len(alone) and total >= 0.01


def test_in_wall_time_the_cpu_spent_stepping_ends_the_batch_too() -> None:
    now = [0.0]

    def clock() -> float:  # every step costs 10 ms of CPU: stepping itself, not the steps' time, ends the batch
        now[0] += 0.010
        return now[0]

    results, total = step_batch(_engine(), 0.05, clock=clock)
    assert len(results) == 5  # 50 ms of stepping, however short the steps' own time
    assert total < 0.05 + max(r.duration for r in results)


def test_an_idle_engine_gives_an_empty_batch() -> None:
    assert step_batch(Engine(load_profile("llama3-8b-h100")), 0.05) == ([], 0.0)
