"""The HTTP stacks of the interoperability matrix: what each needs, how it is built and
started, which version it is, and which cells it cannot serve (and why).

Each server takes the same command line (``servers/script.py``: ``--port``, ``--ttft``,
``--itl``, ``--tokens``, ``--idle-timeout``, ``--max-requests``) and maps the last two onto
the stack's own settings; a stack without such a setting has that cell marked n/a here
rather than imitated in the handler. Compiled servers (Go, C++) are built once per session.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .process import free_port

__all__ = ["STACKS", "Command", "Settings", "Stack", "SERVERS"]

SERVERS = Path(__file__).parent / "servers"
IDLE_S = 0.3  # the idle timeout of the idle-close cell, for stacks that take fractions of a second

_NO_LIMIT = "no per-connection request limit"
_NO_GZIP = "the server compresses nothing itself (a middleware or the handler would: not the stack)"
_ASKED_VERSION = "answers an HTTP/1.1 request with HTTP/1.1"
_LLAMA = {"llama-close": "llama.cpp's quirk of cpp-httplib (a provider that returns false after done())"}


@dataclass(frozen=True)
class Settings:
    """What a server is started with: the script, and the stack's idle timeout and request limit (0: its default)."""

    ttft: float
    itl: float
    tokens: int
    idle_s: float = 0.0
    max_requests: int = 0
    close_after_stream: bool = False
    gzip_streams: bool = False  # nginx only (others ignore these two): gzip text/event-stream too
    proxy_buffering: bool = False  # ... and buffer upstream answers (nginx's default), so gzip holds a stream whole

    def script_flags(self) -> list[str]:
        return ["--ttft", str(self.ttft), "--itl", str(self.itl), "--tokens", str(self.tokens)]

    def flags(self) -> list[str]:
        idle = ["--idle-timeout", str(self.idle_s)] if self.idle_s else []
        limit = ["--max-requests", str(self.max_requests)] if self.max_requests else []
        close = ["--close-after-stream", "1"] if self.close_after_stream else []
        return self.script_flags() + idle + limit + close


@dataclass(frozen=True)
class Command:
    """One process to start, ready when ``GET /health`` on ``port`` answers."""

    argv: list[str]
    port: int
    label: str


@dataclass(frozen=True)
class Stack:
    name: str
    needs: str  # what to install when it is missing
    na: Mapping[str, str] = field(default_factory=dict)  # behaviour -> why this stack cannot show it
    idle_s: float = IDLE_S

    def missing(self) -> str | None:
        """Why this stack cannot run here, or None."""
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def build(self, workdir: Path) -> None:
        """Compile what the stack needs into ``workdir`` (once per session)."""

    def commands(self, port: int, settings: Settings, workdir: Path) -> list[Command]:
        """The processes serving the script on ``port``, in start order."""
        raise NotImplementedError


def _dist(name: str) -> str:
    return f"{name} {importlib.metadata.version(name)}"


def _output(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return (done.stdout + done.stderr).strip()


def _compile(argv: list[str], env: Mapping[str, str] | None = None) -> None:
    """Run a compiler in ``servers/``; its own message when it fails."""
    done = subprocess.run(argv, cwd=SERVERS, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")


def _executable(name: str) -> str | None:
    """``name`` on PATH or in an sbin directory a non-root PATH may lack (nginx lives there)."""
    return shutil.which(name) or next(
        (f"{d}/{name}" for d in ("/usr/sbin", "/usr/local/sbin", "/sbin") if os.access(f"{d}/{name}", os.X_OK)), None
    )


@dataclass(frozen=True)
class PythonStack(Stack):
    """A server file in ``servers/`` run by this interpreter; ``modules`` must import."""

    file: str = ""
    args: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()

    def missing(self) -> str | None:
        absent = [m for m in self.modules if importlib.util.find_spec(m) is None]
        return f"{', '.join(absent)} not installed ({self.needs})" if absent else None

    def version(self) -> str:
        if not self.modules:
            return f"Python {platform.python_version()}"
        return ", ".join(_dist(m) for m in self.modules)

    def commands(self, port: int, settings: Settings, workdir: Path) -> list[Command]:
        return [
            Command([sys.executable, self.file, *self.args, "--port", str(port), *settings.flags()], port, self.name)
        ]


@dataclass(frozen=True)
class ToolStack(Stack):
    """A server in another language: ``tool`` runs (or builds) it."""

    tool: str = ""
    source: str = ""

    def missing(self) -> str | None:
        return None if _executable(self.tool) else f"{self.tool} not found ({self.needs})"

    def binary(self, workdir: Path) -> Path:
        return workdir / f"interop-{self.name}"


class GoStack(ToolStack):
    def version(self) -> str:
        return _output("go", "version").split()[2]  # "go version go1.19.8 linux/amd64"

    def build(self, workdir: Path) -> None:
        # standard library only: nothing to download, and no newer toolchain either (Go >= 1.21 would try)
        env = {**os.environ, "GOPROXY": "off", "GOTOOLCHAIN": "local"}
        if "HOME" not in env and "GOCACHE" not in env:  # go derives its build cache from HOME
            env["GOCACHE"] = str(workdir / "go-cache")
        _compile(["go", "build", "-o", str(self.binary(workdir)), self.source], env)

    def commands(self, port: int, settings: Settings, workdir: Path) -> list[Command]:
        return [Command([str(self.binary(workdir)), "--port", str(port), *settings.flags()], port, self.name)]


class NodeStack(ToolStack):
    def version(self) -> str:
        return "Node.js " + _output("node", "--version")

    def commands(self, port: int, settings: Settings, workdir: Path) -> list[Command]:
        return [Command(["node", self.source, "--port", str(port), *settings.flags()], port, self.name)]


class CppStack(ToolStack):
    def missing(self) -> str | None:
        if not _executable("g++") or not _executable("pkg-config"):
            return f"g++ or pkg-config not found ({self.needs})"
        if subprocess.run(["pkg-config", "--exists", "cpp-httplib"]).returncode:
            return f"cpp-httplib not found by pkg-config ({self.needs})"
        return None

    def version(self) -> str:
        return "cpp-httplib " + _output("pkg-config", "--modversion", "cpp-httplib")

    def build(self, workdir: Path) -> None:
        flags = _output("pkg-config", "--cflags", "--libs", "cpp-httplib").split()
        _compile(["g++", "-std=c++17", self.source, *flags, "-pthread", "-o", str(self.binary(workdir))])

    def commands(self, port: int, settings: Settings, workdir: Path) -> list[Command]:
        return [Command([str(self.binary(workdir)), "--port", str(port), *settings.flags()], port, self.name)]


class NginxStack(ToolStack):
    """nginx as a reverse proxy (``proxy_buffering off`` unless asked) in front of the aiohttp server.

    nginx re-frames the upstream's answer and owns the client's connection: its chunked
    encoding, its keep-alive (``keepalive_timeout``, ``keepalive_requests``) and its gzip
    module are what the client meets. The upstream is asked for identity bodies, so any
    gzip is nginx's own.
    """

    def version(self) -> str:
        return (
            _output(str(_executable("nginx")), "-v").rpartition(":")[2].strip() + " (upstream " + _dist("aiohttp") + ")"
        )

    def commands(self, port: int, settings: Settings, workdir: Path) -> list[Command]:
        upstream = free_port()
        prefix = workdir / f"nginx-{port}"
        prefix.mkdir(parents=True, exist_ok=True)
        (prefix / "nginx.conf").write_text(_nginx_conf(prefix, port, upstream, settings))
        nginx = str(_executable("nginx"))
        return [
            Command(
                [sys.executable, "aiohttp_server.py", "--port", str(upstream), *settings.script_flags()],
                upstream,
                "nginx's upstream (aiohttp)",
            ),
            Command([nginx, "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"], port, "nginx"),
        ]


def _nginx_conf(prefix: Path, port: int, upstream: int, settings: Settings) -> str:
    temp = "".join(
        f"    {kind}_temp_path {prefix / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    idle = f"    keepalive_timeout {round(settings.idle_s * 1000)}ms;\n" if settings.idle_s else ""
    limit = f"    keepalive_requests {settings.max_requests};\n" if settings.max_requests else ""
    return f"""\
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
{temp}{idle}{limit}    gzip on;
    gzip_types application/json{" text/event-stream" if settings.gzip_streams else ""};
    gzip_min_length 1;
    gzip_proxied any;
    upstream script {{ server 127.0.0.1:{upstream}; keepalive 4; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://script;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Accept-Encoding "";
            proxy_set_header X-Conn $connection;
            proxy_buffering {"on" if settings.proxy_buffering else "off"};
        }}
    }}
}}
"""


_H11 = "h11 writes HTTP/1.1 on every status line"
STACKS: list[Stack] = [
    PythonStack("uvicorn-h11", "pip install uvicorn h11", file="asgi_server.py", args=("--server", "uvicorn-h11"),
                modules=("uvicorn", "h11"),
                na={**_LLAMA, "max-requests": _NO_LIMIT + " (limit_max_requests stops the whole server)", "http10": _H11,
                    "gzip": _NO_GZIP}),
    PythonStack("uvicorn-httptools", "pip install uvicorn httptools", file="asgi_server.py",
                args=("--server", "uvicorn-httptools"), modules=("uvicorn", "httptools"),
                na={**_LLAMA, "max-requests": _NO_LIMIT + " (limit_max_requests stops the whole server)",
                    "http10": "uvicorn's httptools protocol writes HTTP/1.1 on every status line", "gzip": _NO_GZIP}),
    PythonStack("hypercorn", "pip install hypercorn", file="asgi_server.py", args=("--server", "hypercorn"),
                modules=("hypercorn", "h11"),
                na={**_LLAMA, "max-requests": _NO_LIMIT + " (max_requests restarts the worker)", "http10": _H11,
                    "gzip": _NO_GZIP}),
    PythonStack("granian", "pip install granian", file="asgi_server.py", args=("--server", "granian"),
                modules=("granian",),
                na={**_LLAMA, "max-requests": _NO_LIMIT, "http10": "hyper " + _ASKED_VERSION, "gzip": _NO_GZIP}),
    PythonStack("aiohttp", "pip install aiohttp", file="aiohttp_server.py", modules=("aiohttp",),
                na={**_LLAMA, "max-requests": _NO_LIMIT, "http10": _ASKED_VERSION}),
    PythonStack("tornado", "pip install tornado", file="tornado_server.py", modules=("tornado",),
                na={**_LLAMA, "max-requests": _NO_LIMIT, "http10": "tornado writes HTTP/1.1 on every status line"}),
    NginxStack("nginx", "apt-get install nginx", tool="nginx",
               na={**_LLAMA, "http10": "nginx writes HTTP/1.1 on every status line"}),
    GoStack("go", "apt-get install golang-go", tool="go", source="server.go",
            na={**_LLAMA, "max-requests": _NO_LIMIT, "http10": "net/http " + _ASKED_VERSION, "gzip": _NO_GZIP}),
    NodeStack("node", "apt-get install nodejs", tool="node", source="server.js",
              na={**_LLAMA, "http10": "the http module writes HTTP/1.1 on every status line", "gzip": _NO_GZIP}),
    CppStack("cpp-httplib", "apt-get install g++ pkg-config libcpp-httplib-dev", tool="g++", source="server.cpp",
             na={"http10": "cpp-httplib writes HTTP/1.1 on every status line"},
             idle_s=1.0),  # set_keep_alive_timeout takes whole seconds
    PythonStack("http.server", "Python's standard library", file="stdlib_server.py",
                na={b: "answers HTTP/1.0 only: one request per connection, no chunked encoding (see http10)"
                    for b in ("stream", "stream-close", "length", "length-close", "idle-close", "max-requests", "gzip",
                              "llama-close", "responses", "messages")}),
]  # fmt: skip
