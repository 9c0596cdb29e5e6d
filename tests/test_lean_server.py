"""The lean server: a full OpenAI-style stream at zero delay, and its own clock as the truth with delays."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from surgelab.aio import run_async
from surgelab.client.openai import OpenAIClient
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Target
from surgelab.testing.process import scripted_server
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.request import RequestSpec


def _send(url: str, stream: bool, n: int = 4) -> list[Outcome]:
    async def main() -> list[Outcome]:
        client = OpenAIClient(Target(url=url, model="ok", stream=stream), time.perf_counter_ns, BuiltinTokenizer())
        outs = []
        async with client:
            for _ in range(n):
                out = Outcome()
                await client.send(RequestSpec(prompt="one two three", prompt_tokens=3, max_tokens=9), out)
                outs.append(out)
        return outs

    return run_async(main())


@pytest.mark.parametrize("stream", [True, False])
def test_zero_delay_answers_are_whole_and_counted(stream):
    with scripted_server(lean=True) as url:
        outs = _send(url, stream)
    assert [o.state for o in outs] == [State.OK] * 4
    assert {(o.output_tokens, o.usage_source) for o in outs} == {(9, "server")}
    if stream:
        assert all(len(o.token_ns) == 9 for o in outs)


def test_with_delays_the_server_reports_what_it_did():
    with scripted_server(0.05, 0.01, lean=True) as url:
        outs = _send(url, True, n=3)
        with urllib.request.urlopen(url.removesuffix("/v1") + "/truth", timeout=10) as resp:
            truth = json.loads(resp.read())
    assert len(truth["ttft_ms"]) == 3
    assert all(50 <= t < 60 for t in truth["ttft_ms"])  # a timer may land late, never early
    assert all(9 <= g < 11 for g in truth["itl_ms"])
    for out, server_ttft in zip(outs, truth["ttft_ms"]):
        client_ttft = (out.first_token_ns - out.sent_ns) / 1e6
        assert server_ttft <= client_ttft < server_ttft + 20  # the client's figure includes the hop, nothing else
