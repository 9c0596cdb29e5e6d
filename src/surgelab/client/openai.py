"""The client a run sends through: one transport, one module per request kind, flows as chains.

One ``send`` per request fills an ``Outcome`` with timestamps from the run clock: send,
first byte (response headers), first content token, every content chunk, end. It never
raises for a failed request; the failure becomes the outcome's state. Only cancellation
(the run stopping) propagates. The kind is the spec's, else its endpoint, else the
target's endpoint (docs/kinds.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from surgelab.client.kinds import Kind, KindContext, build_kinds
from surgelab.client.retry import Retrier
from surgelab.client.transport import Transport
from surgelab.kinds import KINDS
from surgelab.metrics.record import Outcome, State
from surgelab.scenario.model import Target
from surgelab.tokenizer import Tokenizer
from surgelab.workload.request import RequestSpec

__all__ = ["OpenAIClient"]


class OpenAIClient:
    """Sends requests of every kind to one target; use as an async context manager."""

    def __init__(
        self,
        target: Target,
        clock: Callable[[], int],
        tokenizer: Tokenizer,
        api_key: str | None = None,
        pool_size: int = 0,
    ) -> None:
        self.target = target
        self._clock = clock
        self.transport = Transport(target, clock, api_key, pool_size)
        self.retrier = Retrier(target.retry)
        self.kinds: dict[str, Kind] = build_kinds(KindContext(target, clock, tokenizer))

    async def __aenter__(self) -> OpenAIClient:
        await self.transport.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.transport.__aexit__(*exc)

    def kind_of(self, spec: RequestSpec) -> str:
        return spec.kind or spec.endpoint or self.target.endpoint

    def body(self, spec: RequestSpec) -> dict[str, Any] | None:
        """The JSON body for ``spec`` (None for a request without one, an http GET); public so previews and tests can show it."""
        data = self.kinds[self.kind_of(spec)].call(spec).data
        return None if data is None else orjson.loads(data)

    async def send(self, spec: RequestSpec, out: Outcome, at_ns: int | None = None) -> None:
        """Send ``spec`` (its bytes ready, then sent at ``at_ns`` if that is still ahead) into ``out``."""
        kind = self.kind_of(spec)
        if KINDS[kind].chain:
            await self._flow(spec, out, at_ns, kind)
            return
        out.kind = kind
        out.prompt_tokens = out.intended_prompt_tokens = spec.prompt_tokens if KINDS[kind].prompt_tokens else None
        out.input_units = spec.input_units
        handler = self.kinds[kind]
        call = handler.call(spec)
        if self.target.session_header and spec.session >= 0:  # for a router that pins sessions
            call = replace(call, headers={**call.headers, self.target.session_header: str(spec.session)})
        await self.retrier.exchange(self.transport, call, out, handler.read, at_ns)
        if spec.tools and out.tool_calls is None and out.state is State.OK:  # offered, and not called
            out.tool_calls, out.tool_args_bytes = 0, 0
        if not spec.keep_text:
            out.text = None

    async def _flow(self, spec: RequestSpec, out: Outcome, at_ns: int | None, kind: str) -> None:
        """The steps one after another; the chain is one record, each step's time in ``step_ms``."""
        out.kind, out.input_units, out.step_ms = kind, float(len(spec.steps)), []
        prompt_tokens = intended = 0
        step = Outcome()
        for step_spec in spec.steps:
            step = Outcome()
            await self.send(step_spec, step, at_ns)
            at_ns = None
            if out.sent_ns is None:
                out.sent_ns, out.first_byte_ns = step.sent_ns, step.first_byte_ns
            if step.sent_ns is not None and step.end_ns is not None:
                out.step_ms.append((step.end_ns - step.sent_ns) / 1e6)
            prompt_tokens += step.prompt_tokens or 0
            intended += step.intended_prompt_tokens or 0
            out.resends += step.resends
            out.redirects += step.redirects
            for name in ("connect_ms", "tls_ms"):  # the connections this chain made, added up
                if getattr(step, name) is not None:
                    setattr(out, name, (getattr(out, name) or 0.0) + getattr(step, name))
            if step.ratelimit_requests is not None or step.ratelimit_tokens is not None or step.retry_after_s is not None:
                out.ratelimit_requests, out.ratelimit_tokens = step.ratelimit_requests, step.ratelimit_tokens
                out.ratelimit_reset_s, out.retry_after_s = step.ratelimit_reset_s, step.retry_after_s
            if step.state is not State.OK:
                out.fail(step.state, f"step {step_spec.request_class}: {step.error}", step.end_ns or self._clock())
                out.http_status = step.http_status
                return
        out.prompt_tokens, out.output_tokens = prompt_tokens, step.output_tokens
        out.intended_prompt_tokens = intended
        out.first_token_ns, out.token_ns, out.end_ns = step.first_token_ns, step.token_ns, step.end_ns
        out.http_status, out.usage_source, out.output_units = step.http_status, step.usage_source, step.output_units
        out.text = step.text if spec.keep_text else None
        out.state = State.OK
