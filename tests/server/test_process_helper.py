"""``surgelab.server.process``: a real child process, health-gated, always cleaned up."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from http_helpers import Http

import surgelab.engine
import surgelab.server
from surgelab.server.process import ServerProcess, ServerStartError, serve_process


def test_sync_helper_yields_the_v1_base_url_and_stops_the_child():
    with ServerProcess() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert Http(server.root_url).get("/health").status == 200
    assert server.process.returncode is not None
    with serve_process() as base_url:
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")


def test_a_child_that_cannot_start_raises_with_its_log():
    start = time.monotonic()
    with pytest.raises(ServerStartError, match="exited with 2.*unknown profile"), ServerProcess(profile="h9000"):
        pass
    assert time.monotonic() - start < 15


def test_client_disconnect_mid_stream_frees_the_engine():
    with ServerProcess(profile="llama3-8b-h100") as server:

        async def run() -> str:
            body = {"prompt": "go", "max_tokens": 2000, "ignore_eos": True, "stream": True}
            async with aiohttp.ClientSession() as session:
                async with session.post(server.base_url + "/completions", json=body) as reply:
                    await reply.content.readuntil(b"\n\n")
                await asyncio.sleep(0.3)
                async with session.get(server.root_url + "/metrics") as metrics:
                    return await metrics.text()

        text = asyncio.run(run())
    assert 'vllm:num_requests_running{engine="0",model_name="meta-llama' in text
    running = next(line for line in text.splitlines() if line.startswith("vllm:num_requests_running{"))
    assert running.endswith(" 0.0")


def test_public_names_are_pinned():
    assert sorted(surgelab.engine.__all__) == sorted(
        [
            "GPU",
            "GPUS",
            "PROFILES",
            "Architecture",
            "ArchitectureError",
            "Deployment",
            "Efficiency",
            "Engine",
            "EngineProfile",
            "EngineRequest",
            "ProfileError",
            "RequestRejected",
            "StepResult",
            "find_model",
            "load_profile",
            "model_names",
            "prefix_block_hashes",
            "sequences_that_fit",
            "step_batch",
            "profile_names",
        ]
    )
    assert sorted(surgelab.server.__all__) == sorted(
        ["ConfigError", "FaultConfig", "InferenceServer", "ServerConfig", "build_app", "read_fault_file", "serve"]
    )
