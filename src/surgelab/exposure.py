"""Safe by default: surgelab's own servers (``serve``, the Prometheus exporter, the dashboard) bind
to loopback; one told to listen anywhere else must be given an access token."""

from __future__ import annotations

import hmac
import ipaddress
import os

__all__ = ["is_loopback", "exposure_error", "token_from_env", "token_matches"]


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def exposure_error(host: str, token: str | None, what: str, flag: str) -> str | None:
    """Why ``what`` may not listen on ``host`` without a token (None when it may)."""
    if is_loopback(host) or token:
        return None
    return f"{what} on {host} would be reachable from other machines: give an access token with {flag} (or bind to 127.0.0.1)"


def token_from_env(name: str | None) -> str | None:
    """The token in environment variable ``name`` (tokens are never passed on a command line)."""
    return os.environ.get(name) or None if name else None


def token_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer TOKEN`` (or the bare token) in constant time."""
    given = (header or "").removeprefix("Bearer ").strip()
    return hmac.compare_digest(given.encode(), token.encode())
