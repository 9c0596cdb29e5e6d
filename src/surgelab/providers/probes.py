"""Capability probes: what a load test cannot show about an endpoint, each with its method.

A probe result says what was found (``value``, the metric a requirement reads), how it was
found (``how``) and the evidence (``details``: every check or step). The probes here are the
quick ones — OpenAI conformance, the models list, output-length control, cold start; context
length and multi-turn memory are in ``probe_memory``. ``run_probes`` runs them in a fixed
order (cold start first: it needs an endpoint nobody has woken yet), after a ``GET /models``
that tells a wrong URL (no HTTP answer at all) from a finding about the provider.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from surgelab import __version__
from surgelab.providers.probe_http import Endpoint, ProbeClient, Reply
from surgelab.providers.probe_memory import probe_context, probe_retention
from surgelab.providers.probe_network import probe_burst, probe_families, probe_network
from surgelab.providers.probe_result import ProbeResult, ProbeSettings
from surgelab.tokenizer import BuiltinTokenizer

__all__ = ["ProbeResult", "ProbeSettings", "Unreachable", "run_probes", "PROBES"]


class Unreachable(ConnectionError):
    """The endpoint gave no HTTP answer at all: a wrong URL, not a finding about a provider."""


_HELLO = [{"role": "user", "content": "Say hello in five words."}]


def _check(checks: list[dict[str, Any]], name: str, passed: bool, detail: str) -> None:
    checks.append({"check": name, "passed": bool(passed), "detail": detail})


async def probe_conformance(client: ProbeClient, _s: ProbeSettings) -> ProbeResult:
    """Non-streamed and streamed chat, ``[DONE]``, usage, ``stream_options``, error bodies."""
    checks: list[dict[str, Any]] = []
    plain = await client.chat(_HELLO, max_tokens=16)
    body = plain.body if isinstance(plain.body, dict) else {}
    choice = (body.get("choices") or [{}])[0]
    _check(checks, "chat: 200 with a chat.completion", plain.ok and body.get("object") == "chat.completion",
           f"{plain.describe()}, object={body.get('object')!r}")  # fmt: skip
    _check(checks, "chat: choices[0].message.content is text", isinstance((choice.get("message") or {}).get("content"), str),
           f"message={str(choice.get('message'))[:80]!r}")  # fmt: skip
    usage = body.get("usage") or {}
    _check(checks, "chat: usage has prompt/completion/total tokens",
           all(isinstance(usage.get(k), int) for k in ("prompt_tokens", "completion_tokens", "total_tokens")), f"usage={usage}")  # fmt: skip
    streamed = await client.chat(_HELLO, stream=True, max_tokens=16)
    chunks = streamed.chunks
    _check(checks, "stream: text/event-stream", "text/event-stream" in streamed.content_type,
           f"{streamed.describe()}, Content-Type {streamed.content_type!r}")  # fmt: skip
    _check(checks, "stream: every event is a chat.completion.chunk",
           bool(chunks) and all(c.get("object") == "chat.completion.chunk" and "choices" in c for c in chunks),
           f"{len(chunks)} events; first {str(chunks[:1])[:100]}")  # fmt: skip
    _check(checks, "stream: ends with data: [DONE]", bool(streamed.events) and streamed.events[-1] == "[DONE]",
           f"last event {streamed.events[-1][:40] if streamed.events else None!r}")  # fmt: skip
    _check(
        checks,
        "stream: a finish_reason is sent",
        streamed.finish_reason is not None,
        f"finish_reason={streamed.finish_reason!r}",
    )
    with_usage = await client.chat(_HELLO, stream=True, max_tokens=16, stream_options={"include_usage": True})
    tail = [c for c in with_usage.chunks if isinstance(c.get("usage"), dict)]
    _check(checks, "stream_options.include_usage: a usage chunk before [DONE]",
           bool(tail) and tail[-1].get("choices") == [] and with_usage.events[-1] == "[DONE]",
           f"{with_usage.describe()}; usage chunks {len(tail)}" + (f", last {tail[-1]}" if tail else ""))  # fmt: skip
    bad = await client.chat([], max_tokens=16)
    err = bad.body.get("error") if isinstance(bad.body, dict) else None
    _check(checks, "error: 4xx with {error: {message, type}} for an empty messages array",
           400 <= bad.status < 500 and isinstance(err, dict) and isinstance(err.get("message"), str) and "type" in err,
           f"{bad.describe()}; body {bad.raw[:120]!r}")  # fmt: skip
    failed = [c["check"] for c in checks if not c["passed"]]
    found = (
        f"all {len(checks)} checks passed"
        if not failed
        else f"{len(failed)} of {len(checks)} checks failed: {'; '.join(failed)}"
    )
    how = "a chat request non-streamed, streamed, streamed with stream_options, and one with an empty messages array"
    return ProbeResult("conformance", "openai_compat", 0.0 if failed else 1.0, found, how, {"checks": checks})


async def probe_models(client: ProbeClient, _s: ProbeSettings) -> ProbeResult:
    reply = await client.request("GET", "/models")
    data = reply.body.get("data") if isinstance(reply.body, dict) else None
    ids = [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    listed = client.endpoint.model in ids
    declared = next(
        (m.get("max_model_len") for m in data or [] if isinstance(m, dict) and m.get("id") == client.endpoint.model),
        None,
    )
    found = f"{len(ids)} model(s): {', '.join(ids[:8])}" + (
        "" if listed else f"; {client.endpoint.model!r} is not among them"
    )
    if not reply.ok:
        found = f"GET /models failed: {reply.describe()}"
    details = {"models": ids, "declared_max_model_len": declared}
    return ProbeResult(
        "models", "models_listed", 1.0 if listed else 0.0, found, "GET /models, looking for the model's id", details
    )


def _completion_tokens(reply: Reply) -> tuple[int, str]:
    usage = reply.usage or {}
    if isinstance(usage.get("completion_tokens"), int):
        return usage["completion_tokens"], "usage"
    return BuiltinTokenizer().count(reply.text), "counted (built-in tokenizer, approximate)"


async def probe_output_control(client: ProbeClient, _s: ProbeSettings) -> ProbeResult:
    """``max_tokens`` must cap the answer; ``ignore_eos`` (vLLM's) must make it exactly that long."""
    steps: list[dict[str, Any]] = []
    cap = await client.chat([{"role": "user", "content": "Write a long story about the sea."}], max_tokens=8)
    n, source = _completion_tokens(cap)
    capped = cap.ok and n <= 8
    steps.append({"request": "max_tokens=8", "reply": cap.describe(), "completion_tokens": n, "source": source,
                  "finish_reason": cap.finish_reason, "passed": capped})  # fmt: skip
    exact = await client.chat(_HELLO, max_tokens=48, ignore_eos=True)
    m, source = _completion_tokens(exact)
    offered = exact.ok
    forced = offered and m == 48
    steps.append({"request": "max_tokens=48, ignore_eos=true", "reply": exact.describe(), "completion_tokens": m,
                  "source": source, "passed": forced if offered else None})  # fmt: skip
    ok = capped and (forced or not offered)
    found = f"max_tokens=8 gave {n} tokens ({source})" + (
        f"; ignore_eos with max_tokens=48 gave {m}" if offered else f"; ignore_eos rejected ({exact.describe()})"
    )
    how = "a request that invites a long answer with max_tokens=8, then max_tokens=48 with ignore_eos"
    return ProbeResult("output_control", "output_control", 1.0 if ok else 0.0, found, how,
                       {"steps": steps, "ignore_eos_offered": offered})  # fmt: skip


async def probe_cold_start(client: ProbeClient, s: ProbeSettings) -> ProbeResult:
    """First request (after ``idle`` seconds of silence) against the median of warm ones."""
    if s.idle > 0:
        await asyncio.sleep(s.idle)
    first = await client.chat(_HELLO, max_tokens=4)
    warm = [await client.chat(_HELLO, max_tokens=4) for _ in range(s.warm_requests)]
    times = [r.elapsed for r in warm if r.ok]
    if not first.ok or not times:
        return ProbeResult("cold_start", "cold_start", None, f"no usable answers (first: {first.describe()})",
                           "first request vs warm requests", {"first": first.describe()})  # fmt: skip
    median = statistics.median(times)
    extra = max(first.elapsed - median, 0.0)
    found = f"first request {first.elapsed:.3f}s, warm median {median:.3f}s: {extra:.3f}s extra" + (
        " — a cold start" if extra > max(1.0, 3 * median) else ""
    )
    idle = f"after {s.idle:g}s idle, " if s.idle else ""
    how = f"{idle}one request, then {s.warm_requests} more (max_tokens=4), timed end to end"
    return ProbeResult("cold_start", "cold_start", extra, found, how, {"first_s": first.elapsed, "warm_s": times})


Probe = Callable[[ProbeClient, ProbeSettings], Awaitable[ProbeResult]]


def _registry() -> dict[str, Probe]:
    return {"cold_start": probe_cold_start, "conformance": probe_conformance, "models": probe_models,
            "output_control": probe_output_control, "context": probe_context, "retention": probe_retention,
            "network": probe_network, "families": probe_families, "burst": probe_burst}  # fmt: skip


PROBES = ("cold_start", "network", "conformance", "models", "families", "output_control", "burst", "context", "retention")


async def run_probes(endpoint: Endpoint, name: str, settings: ProbeSettings = ProbeSettings(),
                     on_result: Callable[[ProbeResult], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Every probe (or ``settings.only``) in order; the JSON document ``score`` reads."""
    registry = _registry()
    results: list[ProbeResult] = []
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    async with ProbeClient(endpoint) as client:
        hello = await client.request("GET", "/models", timeout=min(endpoint.timeout, 10.0))
        if hello.status == 0:  # not an inference request, so a cold start is still ahead of us
            raise Unreachable(f"{endpoint.url}: {hello.describe()}")
        for probe_name in PROBES:
            if settings.only and probe_name not in settings.only:
                continue
            result = await registry[probe_name](client, settings)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return {
        "kind": "surgelab-probe", "version": 1, "surgelab_version": __version__, "target": name,
        "url": endpoint.url, "model": endpoint.model, "started_at": started,
        "metrics": {r.metric: {"value": r.value, "found": r.found, "how": r.how,
                               **({"items": r.details["items"]} if "items" in r.details else {})} for r in results},
        "probes": [asdict(r) for r in results],
    }  # fmt: skip
