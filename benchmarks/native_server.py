"""A native zero-delay streaming server for the ceiling benchmarks: nginx answering a fixed body.

The ceiling benchmarks ask how fast a *client* can go, so the server must not be what stops
it. The Python scripted server (``surgelab.testing.scripted_server``, aiohttp) needs most of a
core at 2,000–4,000 req/s; on a 2-core machine that caps every tool and leaves no core for a
second client worker. nginx (Debian package, one worker process) answers every completion
request with the same pre-built OpenAI-style stream from memory, at a small fraction of
that CPU, so the reference server costs almost nothing and cannot be the limit.

The body is built here, not kept in a file: ``tokens`` chat-completion chunks, one word each
(the words the scripted server streams, so the benchmarks' local tokenizer knows them), the
last with ``finish_reason: "length"``, then a usage chunk and ``data: [DONE]``. nginx's
``return 200 "<text>"`` reads and discards the request body and sends the text with a
Content-Length, so ``max_tokens`` and ``stream_options`` are ignored: every request gets
``tokens`` tokens and the usage chunk. The whole stream leaves in one write (2.5 kB for 16
tokens), where the scripted server writes each chunk on its own, so a client sees the same
events in fewer reads. ``/v1/models`` and ``/health`` answer too, for tools
that probe them.

nginx runs as a foreground child (``daemon off``) with its prefix, config, pid file, error log
and temp paths in a temporary directory, listening on 127.0.0.1 on a free port; it is stopped
when the context exits.

    from native_server import reference_server
    with reference_server("nginx") as url:  # http://127.0.0.1:PORT/v1
        ...

``python benchmarks/native_server.py [--tokens 16]`` starts it and waits (Ctrl-C or SIGTERM stops it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SERVERS = ("nginx", "scripted")
PROMPT_TOKENS = 64


# -- Debian packages --------------------------------------------------------------------------


def find_executable(name: str) -> str | None:
    """``name`` on PATH, or in the sbin directories a non-root PATH may lack (nginx lives there)."""
    found = shutil.which(name)
    if found:
        return found
    for folder in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        if os.access(f"{folder}/{name}", os.X_OK):
            return f"{folder}/{name}"
    return None


def ensure_debian(executable: str, packages: tuple[str, ...]) -> tuple[str | None, str]:
    """(path of ``executable``, "") once installed; each of ``packages`` is tried with apt-get as root.

    Without root or apt-get nothing is installed: (None, what to run by hand).
    """
    path = find_executable(executable)
    if path:
        return path, ""
    hint = f"{executable} is not installed (apt-get install -y {packages[0]})"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, hint
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for refresh in (False, True):  # a fresh image may have no package lists yet
        if refresh:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
        for package in packages:
            subprocess.run(["apt-get", "install", "-y", "-q", package], capture_output=True, env=env, timeout=900)
            path = find_executable(executable)
            if path:
                return path, ""
    return None, hint + ": apt-get install failed"


def nginx_version(exe: str) -> str:
    out = subprocess.run([exe, "-v"], capture_output=True, text=True)
    return (out.stderr or out.stdout).strip().rpartition("/")[2] or "?"


# -- the body ---------------------------------------------------------------------------------


def sse_body(chat: bool = True, tokens: int = 16, prompt_tokens: int = PROMPT_TOKENS) -> str:
    """The whole event stream of one streaming completion of ``tokens`` tokens."""
    from surgelab.tokenizer import VOCABULARY

    def chunk(choices: list, **extra) -> str:
        body = {"id": "x", "object": "chat.completion.chunk" if chat else "text_completion", "created": 0,
                "model": "ok", "choices": choices, **extra}  # fmt: skip
        return "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"

    parts = []
    for k in range(tokens):
        word = " " + VOCABULARY[k % len(VOCABULARY)]
        finish = "length" if k == tokens - 1 else None
        choice = {"index": 0, "delta": {"content": word}} if chat else {"index": 0, "text": word}
        parts.append(chunk([{**choice, "finish_reason": finish}]))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens}
    parts.append(chunk([], usage=usage))
    parts.append("data: [DONE]\n\n")
    return "".join(parts)


def nginx_string(text: str) -> str:
    """``text`` as a double-quoted nginx config string (nginx turns \\n, \\" and \\\\ back into bytes).

    A ``$`` would start a variable in ``return``'s text, so it is refused rather than escaped.
    """
    if "$" in text:
        raise ValueError("nginx would read '$' in a return text as a variable")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped + '"'


# -- nginx ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_conf(prefix: Path, port: int, tokens: int, built: str = "") -> str:
    """The whole nginx.conf; every path nginx writes to is under ``prefix`` (no root needed)."""
    temp = "".join(
        f"    {kind}_temp_path {prefix / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        if kind == "client_body" or f"--without-http_{kind}_module" not in built
    )
    models = json.dumps({"object": "list", "data": [{"id": "ok", "object": "model", "owned_by": "surgelab"}]})
    return f"""\
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{
    worker_connections 16384;
    multi_accept on;
}}
http {{
    access_log off;
    server_tokens off;
{temp}    keepalive_requests 1000000;
    keepalive_timeout 75s;
    client_max_body_size 16m;
    types {{ }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /v1/chat/completions {{
            default_type text/event-stream;
            add_header Cache-Control no-cache;
            return 200 {nginx_string(sse_body(True, tokens))};
        }}
        location = /v1/completions {{
            default_type text/event-stream;
            add_header Cache-Control no-cache;
            return 200 {nginx_string(sse_body(False, tokens))};
        }}
        location = /v1/models {{
            default_type application/json;
            return 200 {nginx_string(models)};
        }}
        location = /health {{
            default_type text/plain;
            return 200 "ok";
        }}
        location / {{
            return 404;
        }}
    }}
}}
"""


@contextlib.contextmanager
def nginx_server(tokens: int = 16, timeout: float = 10.0) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT/v1``) of an nginx child serving the fixed stream."""
    exe, why = ensure_debian("nginx", ("nginx-light", "nginx"))
    if exe is None:
        raise RuntimeError(why)
    built = subprocess.run([exe, "-V"], capture_output=True, text=True).stderr
    with tempfile.TemporaryDirectory(prefix="surgelab-nginx-") as tmp:
        prefix = Path(tmp)
        for attempt in range(3):  # the free port may be taken between the probe and nginx's bind
            port = free_port()
            (prefix / "nginx.conf").write_text(nginx_conf(prefix, port, tokens, built))
            cmd = [exe, "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf"), "-e", str(prefix / "error.log"),
                   "-g", "daemon off;"]  # fmt: skip
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + timeout
                while proc.poll() is None and time.monotonic() < deadline:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                            if r.read() == b"ok":
                                break
                    except OSError:
                        time.sleep(0.05)
                else:
                    error_log = prefix / "error.log"
                    log = error_log.read_text(errors="replace")[-500:] if error_log.exists() else ""
                    if proc.poll() is not None and "Address already in use" in log and attempt < 2:
                        continue
                    raise RuntimeError(f"nginx did not start: {log.strip() or 'no error log'}")
                yield f"http://127.0.0.1:{port}/v1"
                return
            finally:
                if proc.poll() is None:
                    proc.terminate()  # SIGTERM: nginx's fast shutdown, the worker goes with the master
                    try:
                        proc.wait(5)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(5)


@contextlib.contextmanager
def reference_server(kind: str = "nginx", tokens: int = 16) -> Iterator[str]:
    """The zero-delay reference server of the ceiling benchmarks: ``nginx`` (native) or ``scripted`` (Python).

    Yields its base URL ending in ``/v1``.
    """
    if kind == "nginx":
        with nginx_server(tokens) as url:
            yield url
    elif kind == "scripted":
        from surgelab.testing.process import scripted_server

        with scripted_server() as url:
            yield url
    else:
        raise ValueError(f"unknown server {kind!r}: one of {', '.join(SERVERS)}")


def describe(kind: str) -> str:
    """One line for a benchmark's header: which reference server, and its version."""
    if kind == "nginx":
        exe = find_executable("nginx")
        return f"nginx {nginx_version(exe) if exe else '?'} (native, 1 worker process, fixed body from memory)"
    return "surgelab.testing.scripted_server (Python, aiohttp)"


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Start the nginx zero-delay streaming server and wait.")
    parser.add_argument("--tokens", type=int, default=16, help="output tokens in every streamed answer")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))  # stop nginx too
    with nginx_server(args.tokens) as url:
        print(f"listening on {url[: -len('/v1')]}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
