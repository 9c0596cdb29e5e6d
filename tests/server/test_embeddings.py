"""Batched embeddings: each input is checked against the context (as vLLM does), the batch costs their sum."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from http_helpers import Http

from surgelab.server.process import ServerProcess

MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"


@pytest.fixture(scope="module")
def h100() -> Iterator[Http]:
    """The profile examples/mixed-production.yaml is run against: an 8,192-token context."""
    with ServerProcess(profile="llama3-8b-h100") as server:
        yield Http(server.root_url)


def _prefilled(http: Http) -> float:
    text = http.get("/metrics").body.decode()
    return float(re.search(r"^vllm:prompt_tokens_total\{[^}]*\} (\S+)$", text, re.MULTILINE).group(1))


def test_a_batch_longer_than_the_context_is_served_when_each_input_fits(h100):
    before = _prefilled(h100)
    reply = h100.post("/v1/embeddings", {"model": MODEL, "input": [[7] * 300] * 32})  # 9,600 tokens in all
    assert reply.status == 200, reply.body
    body = reply.json()
    assert [d["index"] for d in body["data"]] == list(range(32))
    assert body["usage"]["prompt_tokens"] == 9_600
    assert _prefilled(h100) - before == 9_600  # the engine still prefills every input


def test_one_input_beyond_the_context_is_refused_with_vllms_message(h100):
    reply = h100.post("/v1/embeddings", {"model": MODEL, "input": [[7] * 10, [7] * 8_193]})
    assert reply.status == 400
    error = reply.json()["error"]
    assert error["param"] == "input[1]"
    assert error["message"] == (
        "This model's maximum context length is 8192 tokens. However, you requested 8193 tokens "
        "in the input for embedding generation. Please reduce the length of the input."
    )
    assert h100.post("/v1/embeddings", {"model": MODEL, "input": [7] * 8_192}).status == 200  # exactly the context
