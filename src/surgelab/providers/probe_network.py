"""The network to a provider and its answer to a burst, measured apart from inference speed.

Seed 004 asks for network latency under 100 ms and a plan for traffic bursts. Both hide inside
a request's latency, so they are measured on their own: the TCP connect time (one round trip,
no HTTP, no model) and, over HTTPS, the TLS handshake; and the slowdown of a short burst of
simultaneous requests against one request alone. The models a provider serves are read from
``GET /models`` and named by family (``deepseek``, ``qwen`` …) for a requirement such as
``model_families includes deepseek, qwen``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import statistics
import time
from urllib.parse import urlsplit

from surgelab.providers.probe_http import ProbeClient
from surgelab.providers.probe_result import ProbeResult, ProbeSettings

__all__ = ["probe_network", "probe_burst", "probe_families", "model_families", "FAMILIES"]

FAMILIES = ("deepseek", "qwen", "llama", "mistral", "mixtral", "gemma", "phi", "glm", "yi", "baichuan", "internlm",
            "gpt", "claude", "gemini", "command", "granite", "falcon", "kimi", "minimax", "ernie", "hunyuan")  # fmt: skip
_WORD = re.compile(r"[a-z]+")


def model_families(ids: list[str]) -> list[str]:
    """The families named in model ids (``Qwen/Qwen2.5-7B-Instruct`` → ``qwen``), sorted."""
    found = set()
    for model in ids:
        words = _WORD.findall(model.lower())
        found.update(
            f for f in FAMILIES if any(w == f or w.startswith(f) and f not in ("yi", "phi", "gpt") for w in words)
        )
    return sorted(found)


async def _connect(host: str, port: int, tls: ssl.SSLContext | None, timeout: float) -> float:
    started = time.perf_counter()
    _, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None), timeout
    )
    elapsed = time.perf_counter() - started
    writer.close()
    with contextlib.suppress(OSError, TimeoutError, asyncio.TimeoutError, ssl.SSLError):
        await asyncio.wait_for(writer.wait_closed(), 1.0)
    return elapsed


async def probe_network(client: ProbeClient, s: ProbeSettings) -> ProbeResult:
    """Median TCP connect time over ``network_samples`` connections (and the TLS handshake, over HTTPS)."""
    url = urlsplit(client.endpoint.url)
    host, https = url.hostname or "", url.scheme == "https"
    port = url.port or (443 if https else 80)
    how = f"{s.network_samples} TCP connections to {host}:{port}, timed to the connect (no HTTP, no inference)"
    try:
        tcp = [await _connect(host, port, None, client.endpoint.timeout) for _ in range(s.network_samples)]
        tls = [await _connect(host, port, ssl.create_default_context(), client.endpoint.timeout)
               for _ in range(s.network_samples)] if https else []  # fmt: skip
    except (OSError, TimeoutError, asyncio.TimeoutError, ssl.SSLError) as exc:
        return ProbeResult("network", "network_rtt", None, f"cannot connect: {type(exc).__name__}: {exc}", how)
    rtt = statistics.median(tcp)
    details = {"tcp_connect_s": tcp, "tls_connect_s": tls}
    found = f"TCP connect median {rtt * 1000:.1f} ms (min {min(tcp) * 1000:.1f}, max {max(tcp) * 1000:.1f})"
    if tls:
        handshake = max(statistics.median(tls) - rtt, 0.0)
        details["tls_handshake_s"] = handshake
        found += f"; TLS handshake median {handshake * 1000:.1f} ms on top"
        how += ", then as many TLS connections"
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
