"""Capability probes against the embedded server (known context, cold start, random answers) and
against loopback fakes: one that remembers a fact for a known number of turns, one that breaks
the OpenAI streaming conventions."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable

from aiohttp import web

from surgelab.engine.profiles import load_profile
from surgelab.providers.probe_http import Endpoint
from surgelab.providers.probe_memory import recalled
from surgelab.providers.probes import ProbeSettings, run_probes
from surgelab.server.process import serve_process

FAST = ProbeSettings(context_precision=0.0, context_limit=131072, checkpoints=(2, 5, 10, 15, 20, 24))


def _by_name(doc: dict) -> dict[str, dict]:
    return {p["name"]: p for p in doc["probes"]}


def test_embedded_server_context_cold_start_conformance_and_honest_retention() -> None:
    max_len = load_profile("tiny").max_model_len
    with serve_process(["--cold-start", "1s"], profile="tiny") as url:
        doc = asyncio.run(run_probes(Endpoint(url, "surgelab-tiny", timeout=20), "tiny", FAST))
    probes = _by_name(doc)
    assert doc["kind"] == "surgelab-probe" and doc["target"] == "tiny"
    assert probes["cold_start"]["value"] >= 0.8, probes["cold_start"]  # the 1 s 'model load' of the first request
    assert probes["conformance"]["value"] == 1.0, probes["conformance"]["details"]
    assert probes["models"]["value"] == 1.0 and probes["models"]["details"]["declared_max_model_len"] == max_len
    assert probes["output_control"]["value"] == 1.0
    context = probes["context"]
    # prompt + max_tokens=1 must fit: the longest usable prompt is one token short of max_model_len
    assert context["value"] == max_len - 1, context["found"]
    assert context["details"]["rejected_at"] == max_len and "HTTP 400" in context["found"]
    assert len(context["details"]["steps"]) <= 32
    retention = probes["retention"]
    assert retention["value"] == 0.0 and "never recalled; not at turn 2" in retention["found"]
    assert doc["metrics"]["max_context"]["value"] == max_len - 1


def _fake(handler: Callable[[dict], Awaitable[web.StreamResponse]]) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        return await handler(await request.json())

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


async def _probe(app: web.Application, settings: ProbeSettings, timeout: float = 5.0) -> dict:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        return await run_probes(Endpoint(f"http://127.0.0.1:{port}/v1", "m", timeout=timeout), "fake", settings)
    finally:
        await runner.cleanup()


def _memory_server(memory_turns: int) -> web.Application:
    """Answers the code-word question right while the question is within ``memory_turns`` user turns."""

    async def handler(body: dict) -> web.Response:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        word = re.search(r"code word for later: (\S+)\.", users[0])
        answer = "OK"
        if "What was the code word" in users[-1]:
            answer = f"The code word is {word[1].lower()}!" if word and len(users) <= memory_turns else "I am not sure."
        usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        return web.json_response(
            {"object": "chat.completion", "choices": [{"message": {"content": answer}}], "usage": usage}
        )

    return _fake(handler)


def test_a_server_that_remembers_twelve_turns_is_credited_with_ten() -> None:
    doc = asyncio.run(_probe(_memory_server(12), ProbeSettings(only=("retention",), turns=24)))
    retention = _by_name(doc)["retention"]
    assert retention["value"] == 10.0, retention["found"]
    assert [c["recalled"] for c in retention["details"]["checkpoints"]] == [True, True, True, False, False, False]
    assert "not at turn 15" in retention["found"]


def test_a_server_that_remembers_everything_passes_every_checkpoint() -> None:
    doc = asyncio.run(
        _probe(_memory_server(1000), ProbeSettings(only=("retention",), turns=30, checkpoints=(2, 20, 30)))
    )
    assert _by_name(doc)["retention"]["value"] == 30.0


def test_recall_is_a_real_check() -> None:
    assert recalled("QWERTY-1234", "sure: qwerty 1234.")
    assert not recalled("QWERTY-1234", "qwerty-1243")
    assert not recalled("", "anything")


def test_broken_streaming_and_error_bodies_fail_conformance_by_name() -> None:
    async def handler(body: dict) -> web.StreamResponse:
        if not body.get("messages"):
            return web.Response(status=500, text="oops")  # not a 4xx, not a JSON error body
        if not body.get("stream"):
            return web.json_response(
                {"object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}
            )  # no usage
        chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "hi"}}]}
        text = f"data: {json.dumps(chunk)}\n\n"  # no finish_reason, no usage chunk, no [DONE]
        return web.Response(text=text, content_type="text/event-stream")

    doc = asyncio.run(_probe(_fake(handler), ProbeSettings(only=("conformance", "models"))))
    conformance = _by_name(doc)["conformance"]
    failed = {c["check"] for c in conformance["details"]["checks"] if not c["passed"]}
    assert conformance["value"] == 0.0
    assert failed == {
        "chat: usage has prompt/completion/total tokens", "stream: ends with data: [DONE]", "stream: a finish_reason is sent",
        "stream_options.include_usage: a usage chunk before [DONE]",
        "error: 4xx with {error: {message, type}} for an empty messages array",
    }  # fmt: skip
    assert _by_name(doc)["models"]["value"] == 1.0


def test_context_search_is_bounded_by_steps_and_reports_a_timeout() -> None:
    async def handler(body: dict) -> web.Response:
        if len(body["messages"][0]["content"]) > 20_000:  # 'long prompts' hang: the search must not
            await asyncio.sleep(3)
        return web.json_response({"object": "chat.completion", "choices": [{"message": {"content": "x"}}]})

    settings = ProbeSettings(only=("context",), context_steps=6, context_budget=30)
    doc = asyncio.run(_probe(_fake(handler), settings, timeout=0.5))
    context = _by_name(doc)["context"]
    steps = context["details"]["steps"]
    assert len(steps) <= 6 and any(s["outcome"] == "timed out" for s in steps)
    assert context["value"] is not None and "built-in tokenizer" in context["found"]


def test_probe_cli_probes_every_target_of_a_scenario(tmp_path, cli) -> None:
    with serve_process(profile="tiny") as url:
        targets = [{"name": n, "url": url, "model": "surgelab-tiny"} for n in ("one", "two")]
        scenario = {"targets": targets, "load": {"rate": 1, "duration": "1s"}}
        (tmp_path / "s.yaml").write_text(json.dumps(scenario))
        result = cli(
            "probe",
            "--scenario",
            str(tmp_path / "s.yaml"),
            "--only",
            "conformance,models",
            "--out",
            str(tmp_path / "p"),
        )
    assert result.returncode == 0, result.stderr
    docs = {p.name: json.loads(p.read_text()) for p in (tmp_path / "p").iterdir()}
    assert sorted(docs) == ["probe-one.json", "probe-two.json"]
    assert (
        docs["probe-two.json"]["target"] == "two" and docs["probe-two.json"]["metrics"]["openai_compat"]["value"] == 1.0
    )
    assert "probing one:" in result.stdout and "all 9 checks passed" in result.stdout
