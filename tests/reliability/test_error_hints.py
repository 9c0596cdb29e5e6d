"""The commonest mistakes get an error that names the fix (issue 29), in the pre-flight and in the
records alike: a URL without ``/v1`` or with ``/chat/completions`` pasted on (a bare "404: Not
Found"), and an HTML page or a plain JSON body answering a streaming request ("stream ended
before [DONE]"). Checked against the embedded server and small loopback apps."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from aiohttp import web
from typer.testing import CliRunner

from reliability.apps import serving
from surgelab.aio import run_async
from surgelab.cli import app
from surgelab.metrics.store import read_records
from surgelab.runner import run_scenario
from surgelab.runner.preflight import PreflightFailed, preflight
from surgelab.server.process import ServerProcess

FIX = "(target.url / --url is the API's base: everything before /chat/completions)"


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """``surgelab serve``'s root URL, without /v1."""
    with ServerProcess(profile="tiny") as server:
        yield server.root_url


@pytest.mark.parametrize("path", ["", "/", "/v1/chat/completions", "/chat/completions/"])
def test_a_url_that_is_not_the_api_base_names_the_base(served, tmp_path, path):
    result = CliRunner().invoke(app, ["run", "--url", served + path, "--model", "m", "--rate", "1", "--duration", "1s",
                                      "--out", str(tmp_path / "run")])  # fmt: skip
    assert result.exit_code == 4, result.output
    sent = served + path.rstrip("/") + "/chat/completions"  # the path given, then the endpoint's
    (line,) = result.stderr.splitlines()
    assert f"HTTP 404 at {sent}: 404: Not Found — did you mean URL {served}/v1? {FIX}" in line, line


def test_without_a_model_the_empty_listing_names_the_base(served, tmp_path):
    """Without --model the pre-flight lists /models first: its 404 under a bare URL names the base as well."""
    result = CliRunner().invoke(app, ["run", "--url", served, "--rate", "1", "--duration", "1s"])
    assert result.exit_code == 4, result.output
    assert result.stderr.splitlines() == [
        f"error: pre-flight: no model given and {served}/models lists none — did you mean URL {served}/v1? give the "
        "API's base URL, or --model NAME (--no-preflight skips this check)"
    ]


def test_the_records_of_a_run_without_preflight_name_the_base_too(served, tmp_path):
    result = CliRunner().invoke(app, ["run", "--url", served, "--model", "m", "--no-preflight", "--rate", "4",
                                      "--duration", "1s", "--out", str(tmp_path / "run"), "-q"])  # fmt: skip
    assert result.exit_code == 1, result.output
    errors = set(read_records(tmp_path / "run")["error"].to_pylist())
    assert errors == {f"HTTP 404 at {served}/chat/completions: 404: Not Found — did you mean URL {served}/v1? {FIX}"}


def test_a_url_with_a_path_of_its_own_is_not_second_guessed(served, tmp_path):
    """A 404 under a base that is neither bare nor an endpoint pasted on (a gateway's /openai/v1) says only what it said."""
    result = CliRunner().invoke(app, ["run", "--url", served + "/openai/v1", "--model", "m", "--rate", "1",
                                      "--duration", "1s", "--out", str(tmp_path / "run")])  # fmt: skip
    assert result.exit_code == 4
    assert "HTTP 404: 404: Not Found" in result.stderr and "did you mean" not in result.stderr


def _answering(body: bytes, content_type: str) -> web.Application:
    async def completions(_request: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    application = web.Application()
    application.router.add_post("/v1/chat/completions", completions)
    application.router.add_get("/v1/models", models)
    return application


LOGIN = b"<!DOCTYPE html><html><head><title>Sign in - Gateway</title></head><body><form>...</form></body></html>"
WHOLE = orjson.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "length",
                      "message": {"role": "assistant", "content": "hi"}}]})  # fmt: skip
ANSWERS = [
    ("html", LOGIN, "text/html; charset=utf-8",
     "the server answered text/html, not an event stream (a login page, or a proxy's error page?): 'Sign in - Gateway'"),
    ("json", WHOLE, "application/json",
     "the server answered a plain JSON body to a streaming request (is streaming supported? target.stream: false / "
     "--no-stream sends whole requests)"),
    ("json-error", b'{"error": {"message": "streaming is disabled for this key"}}', "application/json",
     "the server answered a JSON error to a streaming request: streaming is disabled for this key"),
    ("plain", b"upstream busy", "text/plain",
     "stream ended before [DONE] or a finish_reason (the server answered text/plain, not text/event-stream)"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "content_type", "said"), [a[1:] for a in ANSWERS], ids=[a[0] for a in ANSWERS])
def test_an_answer_that_is_not_a_stream_says_what_it_was(scenario_for, tmp_path, body, content_type, said):
    async def go():
        async with serving(_answering(body, content_type)) as root:
            with pytest.raises(PreflightFailed) as refused:
                await preflight(scenario_for(root + "/v1", "m"), quiet=True)
            run = await run_scenario(scenario_for(root + "/v1", "m", preflight=False), tmp_path / "run")
            return str(refused.value), run

    refusal, run = run_async(go())
    assert refusal.endswith(f"the first request (chat) failed: {said}"), refusal
    records = read_records(run.run_dir)
    assert set(records["state"].to_pylist()) == {"protocol_error"}
    assert set(records["error"].to_pylist()) == {said}


def test_every_adapters_path_is_one_the_hints_know() -> None:
    """A 404 on a kind's path names the API base only if the hints know that path (the Responses and
    Messages paths were missing: a bare host got no fix for them)."""
    from surgelab.client.hints import ENDPOINTS, url_fix
    from surgelab.kinds import KINDS

    paths = {getattr(spec.hook("adapter"), "path", None) for spec in KINDS if spec.adapter is not None} - {None}
    assert {"/chat/completions", "/responses", "/messages"} <= paths
    assert paths <= set(ENDPOINTS), paths - set(ENDPOINTS)
    for path in ("/responses", "/messages"):
        assert url_fix("http://127.0.0.1:8000", "http://127.0.0.1:8000" + path) == "http://127.0.0.1:8000/v1"
        assert url_fix("http://h:1/v1" + path, "http://h:1/v1" + path + path) == "http://h:1/v1"
