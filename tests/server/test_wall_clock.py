"""The wall-clock driver keeps the engine's time: measured latency matches the step times."""

from __future__ import annotations

import asyncio

import pytest
from http_helpers import burst

from surgelab.engine import Engine, EngineRequest, load_profile
from surgelab.server.process import async_serve_process


def engine_seconds(profile_name: str, requests: int, prompt: int, output: int) -> float:
    engine = Engine(load_profile(profile_name))
    for i in range(requests):
        engine.add(EngineRequest(str(i), prompt, output))
    total = 0.0
    while engine.has_work:
        total += engine.step().duration
    return total


def test_latency_follows_the_profiles_step_times():
    """Never faster than the engine's steps, and within 25 % of them on one of two tries.

    A loaded machine can only make the server late (CI once measured 1.14 s against 0.84 s),
    so a late first try is measured again; an early one fails at once.
    """
    expected = engine_seconds("llama3-8b-h100", 16, 1, 120)  # about 0.85 s

    async def run() -> list:
        async with async_serve_process(profile="llama3-8b-h100") as base_url:
            root = base_url.removesuffix("/v1")
            body = {"prompt": "go", "max_tokens": 120, "ignore_eos": True}
            return await asyncio.to_thread(burst, root, "/v1/completions", [body] * 16)

    tries = []
    for _ in range(2):
        replies = asyncio.run(run())
        assert all(r.status == 200 for r in replies)
        slowest = max(r.seconds for r in replies)
        assert slowest >= expected * 0.95, f"{slowest:.3f} s is faster than the engine's {expected:.3f} s"
        tries.append(slowest)
        if slowest <= expected * 1.25:
            break
    assert min(tries) == pytest.approx(expected, rel=0.25)
