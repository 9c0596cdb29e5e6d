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
    expected = engine_seconds("llama3-8b-h100", 16, 1, 120)  # about 0.9 s

    async def run() -> list:
        async with async_serve_process(profile="llama3-8b-h100") as base_url:
            root = base_url.removesuffix("/v1")
            body = {"model": "m", "prompt": "go", "max_tokens": 120, "ignore_eos": True}
            return await asyncio.to_thread(burst, root, "/v1/completions", [body] * 16)

    replies = asyncio.run(run())
    assert all(r.status == 200 for r in replies)
    slowest = max(r.seconds for r in replies)
    assert slowest == pytest.approx(expected, rel=0.25)
