"""The network between surgelab and a target: TLS trust, proxies, and new connections timed by phase.

A new connection is made in two timed steps, so the records can tell them apart
(docs/records.md): ``connect_ms`` is the TCP connection — to the proxy, and through it the
``CONNECT`` tunnel to the target, when one is used — and ``tls_ms`` the TLS handshake on top.
A pooled connection that is reused has neither, which is what connection reuse saves.

Proxies are read from the environment as curl, Python's ``urllib`` and aiohttp (``trust_env``)
read them: ``HTTPS_PROXY`` for https:// targets, ``HTTP_PROXY`` for http:// ones (either in
lower case too), unless ``NO_PROXY`` names the host. ``target.proxy`` overrides that: a URL,
or ``none``. The side traffic that goes through aiohttp — the ``/tokenize`` probe, health
checks, ``surgelab probe`` and the telemetry scrapes — takes its keywords from
``request_options``: the same context, TLS name and proxy as the load path.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket
import ssl
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from time import perf_counter_ns
from typing import Any
from urllib.parse import unquote, urlsplit

from surgelab.scenario.target import Target, Tls

__all__ = [
    "TLS_CLOSED", "Proxy", "ProxyError", "dial", "proxy_for", "proxy_url", "request_options", "ssl_context", "target_ssl",
    "tls_failure",
]  # fmt: skip

_MAX_PROXY_HEAD = 16384
TLS_CLOSED = (
    "the server closed a new TLS connection before answering, as servers that require a client certificate do "
    "(mutual TLS): use --client-cert FILE --client-key FILE, signed by a CA the server trusts"
)
"""What a new TLS connection closed before any answer most likely means (TLS 1.3 sends no alert first)."""


class ProxyError(ConnectionError):
    """The proxy refused or failed the tunnel (its status line is the message)."""


@dataclass(frozen=True, slots=True)
class Proxy:
    """An HTTP proxy: where to connect, and the ``Proxy-Authorization`` header its URL's credentials make."""

    url: str  # as configured, credentials removed (safe to show)
    host: str
    port: int
    authorization: bytes  # b"" or b"Proxy-Authorization: Basic ...\r\n"


@lru_cache(maxsize=64)
def _parse_proxy(url: str) -> Proxy:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"proxy {url!r}: only http:// proxies are supported")
    auth = b""
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        auth = b"Proxy-Authorization: Basic " + base64.b64encode(pair) + b"\r\n"
    shown = f"http://{parts.hostname}:{parts.port or 80}"
    return Proxy(shown, parts.hostname, parts.port or 80, auth)


def proxy_url(url: str, setting: str = "env") -> str | None:
    """The proxy URL a request to ``url`` goes through (credentials included), or None for a direct connection."""
    if setting == "none" or setting == "":
        return None
    if setting != "env":
        return setting
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    chosen = proxies.get(parts.scheme)
    if not chosen:
        return None
    if urllib.request.proxy_bypass_environment(parts.netloc, proxies):  # type: ignore[attr-defined]  # CPython's, not in typeshed
        return None
    return chosen


def proxy_for(url: str, setting: str = "env") -> Proxy | None:
    """``proxy_url`` parsed: host, port and the authorization header."""
    chosen = proxy_url(url, setting)
    return _parse_proxy(chosen) if chosen else None


@lru_cache(maxsize=32)
def ssl_context(tls: Tls) -> ssl.SSLContext:
    """The context for https:// targets: the system's trust plus ``ca_cert``, the client certificate, or no checks."""
    context = ssl.create_default_context()
    if tls.ca_cert:
        context.load_verify_locations(cafile=tls.ca_cert)
    if tls.client_cert:
        context.load_cert_chain(tls.client_cert, tls.client_key)
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def target_ssl(target: Target) -> ssl.SSLContext | None:
    """The context for ``target``, None for http://."""
    return ssl_context(target.tls) if target.base_url.startswith("https:") else None


def request_options(url: str, tls: Tls, proxy: str = "env") -> dict[str, Any]:
    """aiohttp's request keywords for ``url``: the context of ``tls`` (https://), its TLS name, and the
    proxy the ``proxy`` setting chooses (``env``, ``none`` or a URL) — what the load path uses."""
    https = url.startswith("https:")
    options: dict[str, Any] = {"ssl": ssl_context(tls) if https else True, "proxy": proxy_url(url, proxy)}
    if https and tls.server_name:
        options["server_hostname"] = tls.server_name
    return options


async def _tcp(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket; numeric addresses are not sent through the resolver."""
    addresses: list[tuple[socket.AddressFamily, tuple[Any, ...]]]
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        addresses = [(family, (str(ip), port))]
    except ValueError:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [(info[0], info[4]) for info in infos]
    error: OSError | None = None
    for family, address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
    raise error or OSError(f"cannot resolve {host}")


async def _tunnel(loop: asyncio.AbstractEventLoop, sock: socket.socket, host: str, port: int, proxy: Proxy) -> None:
    """``CONNECT host:port`` through ``proxy`` on ``sock``; raises ProxyError unless it answers 2xx."""
    shown = f"[{host}]" if ":" in host else host
    request = b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n" % (
        shown.encode("idna"), port, shown.encode("idna"), port, proxy.authorization
    )  # fmt: skip
    await loop.sock_sendall(sock, request)
    head = b""
    while b"\r\n\r\n" not in head:
        data = await loop.sock_recv(sock, 4096)
        if not data:
            raise ProxyError(f"proxy {proxy.url} closed the connection instead of answering CONNECT {shown}:{port}")
        head += data
        if len(head) > _MAX_PROXY_HEAD:
            raise ProxyError(f"proxy {proxy.url} sent an over-long answer to CONNECT")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    fields = status_line.split(" ", 2)
    if len(fields) < 2 or not fields[1].startswith("2"):
        raise ProxyError(f"proxy {proxy.url} refused CONNECT {shown}:{port}: {status_line}")


async def dial(
    factory: Callable[[], asyncio.Protocol],
    host: str,
    port: int,
    *,
    context: ssl.SSLContext | None,
    server_name: str | None,
    proxy: Proxy | None,
) -> tuple[asyncio.Protocol, int, int | None]:
    """A new connection to ``host:port``: the protocol, the nanoseconds to connect (TCP, and the
    proxy's tunnel when there is one) and those of the TLS handshake (None without TLS)."""
    loop = asyncio.get_running_loop()
    started = perf_counter_ns()
    sock = await _tcp(loop, proxy.host if proxy else host, proxy.port if proxy else port)
    try:
        if proxy is not None and context is not None:
            await _tunnel(loop, sock, host, port, proxy)
        connected = perf_counter_ns()
        _, protocol = await loop.create_connection(
            factory, sock=sock, ssl=context, server_hostname=(server_name or host) if context else None
        )
    except BaseException:
        sock.close()
        raise
    done = perf_counter_ns()
    return protocol, connected - started, (done - connected) if context is not None else None


def tls_failure(exc: BaseException) -> str | None:
    """What to do about a TLS failure, in one line; None when ``exc`` is not one.

    A wrapping library's error is looked into: aiohttp keeps the ssl error in ``certificate_error``
    or ``os_error``, others chain it as the cause."""
    for inner in (getattr(exc, "certificate_error", None), getattr(exc, "os_error", None), exc.__cause__):
        if isinstance(inner, BaseException) and inner is not exc:
            found = tls_failure(inner)
            if found is not None:
                return found
    text = str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or text
        if "mismatch" in why.lower():
            return (
                f"certificate verify failed: {why}: use --server-name NAME (a name on the server's certificate), "
                "or --insecure for a test bench"
            )
        return f"certificate verify failed: {why}: use --ca-cert FILE (or --insecure for a test bench)"
    lowered = text.lower()
    if "certificate required" in lowered or "certificate_required" in lowered:
        return f"the server asks for a client certificate ({text}): use --client-cert FILE --client-key FILE"
    if "no required ssl certificate was sent" in lowered:
        return "the server asks for a client certificate: use --client-cert FILE --client-key FILE"
    if isinstance(exc, ssl.SSLError):
        if "wrong version number" in lowered or "record layer failure" in lowered:
            return f"TLS failed ({text}): is the target plain HTTP? Use an http:// URL"
        return f"TLS failed: {text}"
    return None
