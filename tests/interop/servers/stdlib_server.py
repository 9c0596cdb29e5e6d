"""The scripted completion served by Python's own ``http.server``, which answers in HTTP/1.0.

``BaseHTTPRequestHandler.protocol_version`` is ``"HTTP/1.0"`` unless a server changes it, so
every answer's status line says ``HTTP/1.0 200 OK`` whatever the request's version, carries no
Content-Length and no chunked encoding, and ends when the server closes the connection: the
answer of the many small servers written on this module, and of old proxies. It is the one
stack here that answers HTTP/1.0 to an HTTP/1.1 request by itself; the matrix uses it for that
cell only (one request per connection, so there is no idle timeout or request limit to set).

    python stdlib_server.py --port 8000
"""

from __future__ import annotations

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from script import PATHS, Connections, Script, options


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    connections = Connections()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(b"ok")
            elif self.path == "/stats":
                with lock:
                    self._send(connections.report())
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            if self.path not in PATHS:
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            arrived = time.monotonic()
            with lock:
                connections.seen(self)  # one handler per connection
            stream, usage = script.asks(body)
            if not stream:
                time.sleep(max(0.0, script.due(arrived, script.tokens - 1) - time.monotonic()))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
            self.end_headers()
            for data in script.blocking_stream(arrived, usage, self.path) if stream else [script.whole()]:
                self.wfile.write(data)

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # quiet: the test reads the log only on failure
            pass

    return Handler


def main() -> None:
    args = options(__doc__).parse_args()
    if args.idle_timeout or args.max_requests:
        sys.exit("http.server in HTTP/1.0 closes every connection after one answer")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(Script(args.ttft, args.itl, args.tokens)))
    print(f"http.server listening on http://127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
