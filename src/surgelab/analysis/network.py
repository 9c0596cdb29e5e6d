"""The summary's ``network`` and ``rate_limits`` blocks: what connections cost, and whose quota set the pace.

``network`` counts the new connections the run made and what they took (``connect_ms``: TCP,
and a proxy's tunnel; ``tls_ms``: the handshake), so connection reuse can be judged over TLS,
and says how the target was trusted (an ``insecure`` run says so in ``warnings``).

``rate_limits`` reduces the provider's rate-limit headers (``client/ratelimit.py``) to the
lowest quota left and the 429s it answered. ``quota_limited`` is true when at least 1 % of the
measured requests (and at least one) were answered 429: the provider's quota, not its speed,
set the pace of the run, and its latencies describe a throttled service.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from surgelab.analysis.columns import ColumnSource, labels
from surgelab.scenario.model import Scenario

__all__ = ["network_block", "rate_limit_block", "QUOTA_SHARE"]

QUOTA_SHARE = 0.01  # 429s on at least this share of the measured requests: limited by the quota
_TLS_ADVICE = ("--ca-cert FILE", "--client-cert FILE", "--server-name NAME", "is the target plain HTTP?")


def _stats(values: np.ndarray) -> dict[str, float | None]:
    values = values[np.isfinite(values)]
    if not values.size:
        return {"mean": None, "p50": None, "p99": None, "max": None}
    return {
        "mean": float(values.mean()),
        "p50": float(np.percentile(values, 50)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
    }


def network_block(source: ColumnSource, measured: np.ndarray, scenario: Scenario, failed: np.ndarray) -> dict[str, Any]:
    """New connections and their set-up times over the measured requests; how TLS was configured;
    the requests that failed on TLS and what to do about it (the commonest such error)."""
    target = scenario.target
    connect = source.floats("connect_ms")[measured]
    handshake = source.floats("tls_ms")[measured]
    redirects = source.floats("redirects")[measured]
    https = target.base_url.startswith("https:")
    tls = target.tls
    return {
        "new_connections": int(np.isfinite(connect).sum()),
        "reused_connections": int(
            (~np.isfinite(connect) & np.isfinite(source.floats("first_byte_ns")[measured])).sum()
        ),
        "connect_ms": _stats(connect),
        "tls_ms": _stats(handshake),
        "redirects_followed": int(np.nansum(redirects)),
        "tls": {
            "https": https,
            "verified": https and not tls.insecure,
            "insecure": https and tls.insecure,
            "ca_cert": tls.ca_cert,
            "client_cert": bool(tls.client_cert),
            "server_name": tls.server_name,
        },
        "proxy": _shown_proxy(target.proxy),
        **_tls_failures(source, failed),
    }


def _tls_failures(source: ColumnSource, failed: np.ndarray) -> dict[str, Any]:
    """Failed requests whose error says what to do about TLS (``client/network.py``), and the commonest such error."""
    if not failed.any():
        return {"tls_failures": 0, "tls_failure": None}
    counts = labels(source, "error")[failed].counts()
    advised = {text: n for text, n in counts.items() if any(advice in text for advice in _TLS_ADVICE)}
    if not advised:
        return {"tls_failures": 0, "tls_failure": None}
    return {"tls_failures": sum(advised.values()), "tls_failure": max(advised, key=lambda t: advised[t])}


def _shown_proxy(setting: str) -> str:
    """The proxy setting without credentials."""
    if "@" in setting:
        scheme, _, rest = setting.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]}"
    return setting


def rate_limit_block(source: ColumnSource, measured: np.ndarray) -> dict[str, Any]:
    """The provider's quota as its headers said, and its 429s; ``quota_limited`` with a sentence why."""
    requests = source.floats("ratelimit_requests")[measured]
    tokens = source.floats("ratelimit_tokens")[measured]
    reset = source.floats("ratelimit_reset_s")[measured]
    retry_after = source.floats("retry_after_s")[measured]
    status = source.floats("http_status")[measured]
    ends = source.floats("end_ns")[measured] / 1e9
    reported = np.isfinite(requests) | np.isfinite(tokens) | np.isfinite(reset) | np.isfinite(retry_after)
    exhausted = (requests == 0) | (tokens == 0)
    throttled = status == 429
    n, n_throttled = int(measured.sum()), int(throttled.sum())
    first = float(np.nanmin(ends[throttled])) if n_throttled and np.isfinite(ends[throttled]).any() else None
    limited = n_throttled > 0 and n_throttled >= QUOTA_SHARE * n
    block: dict[str, Any] = {
        "reported": int(reported.sum()),
        "remaining_requests_min": _min(requests),
        "remaining_tokens_min": _min(tokens),
        "exhausted": int(exhausted.sum()),
        "throttled": n_throttled,
        "throttled_share": n_throttled / n if n else 0.0,
        "first_throttled_s": first,
        "retry_after_max_s": float(np.nanmax(retry_after)) if np.isfinite(retry_after).any() else None,
        "quota_limited": limited,
        "verdict": None,
    }
    if limited:
        quota = ""
        if block["exhausted"]:
            left = [
                w
                for w, v in (("requests", block["remaining_requests_min"]), ("tokens", block["remaining_tokens_min"]))
                if v == 0
            ]
            quota = f"; its {' and '.join(left) or 'quota'} left reached 0 on {block['exhausted']} answers"
        wait = (
            f"; it asked to wait up to {block['retry_after_max_s']:g} s"
            if block["retry_after_max_s"] is not None
            else ""
        )
        when = f", the first {first:.1f} s into the run" if first is not None else ""
        block["verdict"] = (
            f"limited by the provider's quota, not its speed: {n_throttled} of {n} requests "
            f"({block['throttled_share']:.1%}) were answered 429{when}{quota}{wait} — "
            "its latencies describe a throttled service"
        )
    return block


def _min(values: np.ndarray) -> int | None:
    finite = values[np.isfinite(values)]
    return int(finite.min()) if finite.size else None
