"""The network to a provider and its answer to a burst, measured apart from inference speed.

Seed 004 asks for network latency under 100 ms and a plan for traffic bursts. Both hide inside
a request's latency, so they are measured on their own: the TCP connect time (one round trip,
no HTTP, no model) and, over HTTPS, the TLS handshake on the same connection — made as the load
client makes its connections, with the target's TLS settings and proxy; and the slowdown of a
short burst of simultaneous requests against one request alone. The models a provider serves are read from
``GET /models`` and named by family (``deepseek``, ``qwen`` …) for a requirement such as
``model_families includes deepseek, qwen``.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from typing import Any
from urllib.parse import urlsplit

from surgelab.client.network import dial, proxy_for, ssl_context, tls_failure
from surgelab.providers.probe_http import Endpoint, ProbeClient
from surgelab.providers.probe_result import ProbeResult, ProbeSettings

__all__ = ["probe_network", "probe_burst", "probe_families", "model_families", "FAMILIES"]

FAMILIES = ("deepseek", "qwen", "llama", "mistral", "mixtral", "gemma", "phi", "glm", "yi", "baichuan", "internlm",
            "gpt", "claude", "gemini", "command", "granite", "falcon", "kimi", "minimax", "ernie", "hunyuan")  # fmt: skip
_WORD = re.compile(r"[a-z]+")


def model_families(ids: list[str]) -> list[str]:
    """The families named in model ids (``Qwen/Qwen2.5-7B-Instruct`` → ``qwen``), sorted."""
    found: set[str] = set()
    for model in ids:
        words = _WORD.findall(model.lower())
        found.update(
            f for f in FAMILIES if any(w == f or w.startswith(f) and f not in ("yi", "phi", "gpt") for w in words)
        )
    return sorted(found)


class _Opened(asyncio.Protocol):
    """Keeps the transport of a connection made only to be timed, so that it can be closed."""

    transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport


async def _connect(endpoint: Endpoint, host: str, port: int) -> tuple[float, float | None]:
    """One new connection as the load client makes it (``client/network.py``: ``dial``, with the
    endpoint's TLS context, name and proxy): seconds to connect and of the TLS handshake (None over http)."""
    https = endpoint.url.startswith("https:")
    opened, connect_ns, tls_ns = await asyncio.wait_for(
        dial(_Opened, host, port, context=ssl_context(endpoint.tls) if https else None,
             server_name=endpoint.tls.server_name, proxy=proxy_for(endpoint.url, endpoint.proxy)),
        endpoint.timeout,
    )  # fmt: skip
    transport = opened.transport if isinstance(opened, _Opened) else None
    if transport is not None:
        transport.close()
    return connect_ns / 1e9, None if tls_ns is None else tls_ns / 1e9


async def probe_network(client: ProbeClient, s: ProbeSettings) -> ProbeResult:
    """Median TCP connect time over ``network_samples`` new connections (and the TLS handshake, over HTTPS)."""
    endpoint = client.endpoint
    url = urlsplit(endpoint.url)
    host, https = url.hostname or "", url.scheme == "https"
    port = url.port or (443 if https else 80)
    proxy = proxy_for(endpoint.url, endpoint.proxy)
    how = f"{s.network_samples} new connections to {host}:{port}, timed to the connect (no HTTP, no inference)"
    if proxy is not None:
        how += f", through the proxy {proxy.url}" + (" (its CONNECT tunnel included)" if https else " (to the proxy)")
    try:
        timed = [await _connect(endpoint, host, port) for _ in range(s.network_samples)]
    except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
        why = tls_failure(exc) or f"{type(exc).__name__}: {exc}"
        return ProbeResult("network", "network_rtt", None, f"cannot connect: {why}", how)
    tcp = [connect for connect, _ in timed]
    tls = [handshake for _, handshake in timed if handshake is not None]
    rtt = statistics.median(tcp)
    details: dict[str, Any] = {"tcp_connect_s": tcp, "tls_connect_s": [c + h for c, h in zip(tcp, tls)]}
    found = f"TCP connect median {rtt * 1000:.1f} ms (min {min(tcp) * 1000:.1f}, max {max(tcp) * 1000:.1f})"
    if tls:
        handshake = statistics.median(tls)
        details["tls_handshake_s"] = handshake
        found += f"; TLS handshake median {handshake * 1000:.1f} ms on top"
        how += ", each with its TLS handshake timed apart"
    return ProbeResult("network", "network_rtt", rtt, found, how, details)


async def probe_burst(client: ProbeClient, s: ProbeSettings) -> ProbeResult:
    """``burst_size`` simultaneous requests against one alone: the median slowdown and the failures."""
    ask = [{"role": "user", "content": "Count from one to twenty."}]
    alone = [await client.chat(ask, max_tokens=16) for _ in range(2)]
    burst = await asyncio.gather(*(client.chat(ask, max_tokens=16) for _ in range(s.burst_size)))
    how = f"2 requests alone, then {s.burst_size} at once (max_tokens=16), timed end to end"
    alone_ok = [r.elapsed for r in alone if r.ok]
    burst_ok = [r.elapsed for r in burst if r.ok]
    failed = sum(1 for r in burst if not r.ok)
    details = {"alone_s": alone_ok, "burst_s": burst_ok, "burst_failed": failed}
    if not alone_ok or not burst_ok:
        first_bad = next((r for r in [*alone, *burst] if not r.ok), None)
        why = first_bad.describe() if first_bad is not None else "no answers"
        return ProbeResult("burst", "burst_slowdown", None, f"no usable answers ({why})", how, details)
    single, together = statistics.median(alone_ok), statistics.median(burst_ok)
    slowdown = together / single
    found = (f"{s.burst_size} at once: median {together:.3f}s against {single:.3f}s alone"
             f" ({slowdown:.2f}×), {failed} of {s.burst_size} failed")  # fmt: skip
    # A burst that loses requests has no slowdown worth the name: it is reported, not scored as fast.
    return ProbeResult("burst", "burst_slowdown", None if failed else slowdown, found, how, details)


async def probe_families(client: ProbeClient, _s: ProbeSettings) -> ProbeResult:
    """The model families ``GET /models`` lists."""
    reply = await client.request("GET", "/models")
    data = reply.body.get("data") if isinstance(reply.body, dict) else None
    ids = [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    families = model_families(ids)
    how = "GET /models, each id named by family"
    if not reply.ok:
        return ProbeResult("families", "model_families", None, f"GET /models failed: {reply.describe()}", how)
    found = f"{', '.join(families) or 'no known family'} among {len(ids)} model(s)"
    return ProbeResult(
        "families", "model_families", float(len(families)), found, how, {"items": families, "models": ids}
    )
