"""Pre-flight: before any load, check that the target answers, and stop within seconds when it does not.

For each target of the run: ``GET {base}/models`` (the only model listed is picked when the
scenario names none; a model that is not listed is named with the choices when its request
fails), then one real request of the run's first kind, sent through the very client the load
goes through (``client/``: its TLS, headers and API key), with a short prompt of its own so that
nothing of the run's prompts is in the server's prefix cache before the run. The request is not
a record of the run. A target that cannot be reached, answers with an HTTP error, or does not speak HTTP ends
the run before it starts with ``PreflightFailed`` holding the client's own message
(``HTTP 401: …``, ``ConnectionRefusedError: …``). ``preflight: false`` in the scenario (``surgelab
run --no-preflight``) skips it; the model must then be given.
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from secrets import token_hex
from typing import Any

import orjson

from surgelab.client.hints import url_fix
from surgelab.client.http1 import Response
from surgelab.client.openai import OpenAIClient
from surgelab.client.transport import HttpCall, Transport, read_body
from surgelab.load.phases import plan_phases
from surgelab.metrics.record import Outcome, State
from surgelab.redact import redact_text, redact_url
from surgelab.runner.tokenizer import with_tokenizer
from surgelab.scenario.model import Scenario, Target, Timeouts
from surgelab.tokenizer import BuiltinTokenizer
from surgelab.workload.context import context_warnings
from surgelab.workload.request import RequestSpec

__all__ = ["PreflightFailed", "preflight", "ready", "preflight_request", "EXIT_PREFLIGHT", "LISTING_TIMEOUT_S", "REQUEST_TIMEOUT_S"]

EXIT_PREFLIGHT = 4  # ``surgelab run``'s exit code when the target fails its pre-flight
LISTING_TIMEOUT_S = 10.0  # GET /models: a target that cannot list its models this fast is not answering
REQUEST_TIMEOUT_S = 30.0  # the one real request (first token and total), at most
_MAX_TOKENS = 1  # the real request asks for one output token: quick, and still a real answer
_LISTING_BYTES = 1 << 20


Served = Callable[[int, str], None]
"""Told a model's context as its server lists it, and where that was read."""


class PreflightFailed(RuntimeError):
    """The target did not pass its pre-flight; the message says why, in the server's or the client's words."""


async def preflight(scenario: Scenario, api_key: str | None = None, quiet: bool = False) -> Scenario:
    """The scenario with every target checked and its model resolved; raises ``PreflightFailed``.

    Done once: a scenario that passed (or that skips it) comes back as it is, so a sweep or a
    comparison that runs it again does not ask again.
    """
    if scenario.preflight_done:
        return scenario
    say = (lambda _text: None) if quiet else (lambda text: print(f"pre-flight: {text}", file=sys.stderr))
    if not scenario.preflight:  # the model is then required (Scenario checks it)
        return scenario.mark_preflight_done()
    spec = preflight_request(scenario)

    def too_long(limit: int, where: str) -> None:  # the served context, where /models names it (vLLM, surgelab serve)
        for warning in context_warnings(scenario, limit, where):
            say(f"warning: {warning}")

    if scenario.targets:
        return await _many(scenario, spec, say, too_long)
    target = await _check(scenario.target, api_key, spec, say, too_long)
    return scenario.model_copy(update={"target": target}).mark_preflight_done()


def _targets(scenario: Scenario, api_key: str | None) -> list[tuple[Target, str | None]]:
    if not scenario.targets:
        return [(scenario.target, api_key)]
    return [(t, os.environ.get(t.api_key_env) if t.api_key_env else None) for t in scenario.targets]


async def _many(scenario: Scenario, spec: RequestSpec, say: Callable[[str], None], too_long: Served) -> Scenario:
    """Compare mode: every target must answer. Route mode: one is enough (failover is what is tested), the rest are named."""
    named = scenario.targets or []
    results = await asyncio.gather(
        *(_check(t, key, spec, say, too_long) for t, key in _targets(scenario, None)), return_exceptions=True
    )
    failed = [(t.name, r) for t, r in zip(named, results) if isinstance(r, PreflightFailed)]
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, PreflightFailed):
            raise r
    if failed and (scenario.routing.mode == "compare" or len(failed) == len(named)):
        raise PreflightFailed("; ".join(f"target {name}: {exc}" for name, exc in failed))
    for name, exc in failed:
        say(f"target {name} does not answer ({exc}); the run starts with it, as routing.failover allows")
    checked = [r if isinstance(r, Target) else t for t, r in zip(named, results)]
    targets = [t.model_copy(update={"model": c.model}) for t, c in zip(named, checked)]
    first = (
        scenario.target.model_copy(update={"model": targets[0].model}) if not scenario.target.model else scenario.target
    )
    return scenario.model_copy(update={"targets": targets, "target": first}).mark_preflight_done()


def preflight_request(scenario: Scenario) -> RequestSpec:
    """The run's first request as the load would send it (its kind, endpoint, fields and payload), with a
    short prompt of its own and a few output tokens: no prefix it shares with the run's prompts reaches
    the server's prefix cache before the run, and the check is quick."""
    return _short(plan_phases(scenario)[0].sampler.spec(0), token_hex(4))


def _short(spec: RequestSpec, tag: str) -> RequestSpec:
    prompt = f"surgelab pre-flight {tag}: answer with one word."
    return replace(
        spec, prompt=prompt, prompt_tokens=BuiltinTokenizer().count(prompt), system_prompt="", history=(),
        max_tokens=min(spec.max_tokens, _MAX_TOKENS), steps=tuple(_short(s, tag) for s in spec.steps),
    )  # fmt: skip


def _bounded(target: Target) -> Target:
    """The target with the pre-flight's time bounds and no retries: a dead target is said within seconds."""
    t = target.timeouts
    timeouts = Timeouts(
        connect=min(t.connect, LISTING_TIMEOUT_S),
        first_token=min(t.first_token, REQUEST_TIMEOUT_S),
        total=min(t.total, REQUEST_TIMEOUT_S),
    )
    return target.model_copy(update={"timeouts": timeouts, "retry": None})


async def _check(
    target: Target, api_key: str | None, spec: RequestSpec, say: Callable[[str], None], too_long: Served | None = None
) -> Target:
    """One target: its models, then one real request. Returns the target with its model resolved;
    ``too_long`` is told the model's context where the listing gives it (``max_model_len``)."""
    base = redact_url(target.base_url)
    started = time.perf_counter_ns()

    def clock() -> int:
        return time.perf_counter_ns() - started

    bounded = _bounded(target)
    async with Transport(bounded, clock, api_key, pool_size=1) as transport:
        listed = await _models(transport, target, base)
    models = None if listed is None else [str(m["id"]) for m in listed]
    model = target.model
    if not model:
        if not models:
            why = "the server lists no models" if models is not None else f"{base}/models lists none"
            fix = url_fix(target.base_url, f"{target.base_url}/models") if models is None else None
            if fix is not None:  # no listing under a bare URL: the base is more likely wrong than the model missing
                raise PreflightFailed(f"no model given and {why} — did you mean URL {redact_url(fix)}? give the API's "
                                      "base URL, or --model NAME")  # fmt: skip
            raise PreflightFailed(f"no model given and {why}: give --model NAME")
        if len(models) > 1:
            raise PreflightFailed(
                f"no model given and {base} serves {len(models)}: {_choices(models)}; give --model NAME"
            )
        model = models[0]
        say(f"{base} serves one model, {model!r}: using it")
    served = next((m.get("max_model_len") for m in listed or () if str(m["id"]) == model), None)
    if too_long is not None and isinstance(served, int) and not isinstance(served, bool) and served > 0:
        too_long(served, f"the max_model_len {base} serves {model!r} with")
    checked = bounded.model_copy(update={"model": model})
    out = Outcome()
    async with OpenAIClient(checked, clock, BuiltinTokenizer(), api_key, pool_size=1) as client:
        await client.send(spec, out)
    if out.state is not State.OK:
        unlisted = (
            f" (model {model!r} is not among the models {base} lists: {_choices(models)})"
            if models and model not in models
            else ""
        )
        raise PreflightFailed(f"{base}: the first request ({client.kind_of(spec)}) failed: {_said(out)}{unlisted}")
    took = (out.end_ns or clock()) - (out.sent_ns or 0)
    say(f"{base} answered a {client.kind_of(spec)} request for {model!r} in {took / 1e6:.0f} ms")
    return target.model_copy(update={"model": model})


async def _models(transport: Transport, target: Target, base: str) -> list[dict[str, Any]] | None:
    """The models ``GET /models`` lists (each with its ``id``); None when there is no such route (404, 405) or no list in the answer."""
    got: list[bytes] = []

    async def read(resp: Response, out: Outcome, first: Callable[[], None]) -> None:
        got.append(await read_body(resp, _LISTING_BYTES))
        first()

    out = Outcome()
    call = HttpCall(f"{target.base_url}/models", method="GET")
    try:
        await asyncio.wait_for(transport.exchange(call, out, read), LISTING_TIMEOUT_S)
    except asyncio.TimeoutError:  # noqa: UP041 - 3.10's wait_for raises this, not the builtin
        raise PreflightFailed(f"{base}: no answer to GET /models within {LISTING_TIMEOUT_S:g}s") from None
    if out.state is State.HTTP_ERROR and out.http_status in (404, 405):
        return None  # no listing here; the real request says whether the target works
    if out.state is not State.OK:
        what = {State.HTTP_ERROR: "GET /models", State.PROTOCOL_ERROR: "no valid HTTP answer to GET /models",
                State.TIMEOUT: "no answer to GET /models"}.get(out.state, "cannot reach it")  # fmt: skip
        if out.state is State.CONNECTION_ERROR and "ServerDisconnected" in (out.error or ""):
            what = "no answer to GET /models"  # it connected, then hung up
        raise PreflightFailed(f"{base}: {what}: {_said(out)}")
    return _listed(got[0] if got else b"")


def _listed(body: bytes) -> list[dict[str, Any]] | None:
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    return [m for m in items if isinstance(m, dict) and m.get("id") is not None]


def _choices(models: list[str] | None) -> str:
    if not models:
        return "none"
    shown = ", ".join(repr(m) for m in models[:10])
    return shown + (f" and {len(models) - 10} more" if len(models) > 10 else "")


_HTML = re.compile(r"<(!doctype|html|head|body|title|h\d|p|div|pre)\b", re.I)
_TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S | re.I)


def _said(out: Outcome) -> str:
    """The request's error as one line: an HTML error page reduced to its words, credentials removed."""
    text = out.error or out.state.value
    if _HTML.search(text):
        text = html.unescape(_TAG.sub(" ", text))
    text = " ".join(text.split())
    return redact_text(text if len(text) <= 300 else text[:297] + "...")


async def ready(scenario: Scenario, api_key: str | None = None, quiet: bool = False) -> Scenario:
    """What happens before any load, in this order: the pre-flight, then the target's tokenizer (``tokenizer: auto``)."""
    return await with_tokenizer(await preflight(scenario, api_key, quiet), api_key, quiet)
