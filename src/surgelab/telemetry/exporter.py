"""surgelab's own live metrics in Prometheus format, for long soaks and monitoring probes.

``surgelab run --prometheus-port 9464`` serves them on 127.0.0.1 (another host only when
asked). Latency histograms use buckets that resolve both fast tokens and slow first tokens;
``surgelab grafana`` and ``surgelab alerts`` are written against these names.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app, start_http_server
from prometheus_client.exposition import ThreadingWSGIServer

from surgelab.exposure import token_matches
from surgelab.metrics.live import LiveSnapshot
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordMeta

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment  # Python 3.11+

__all__ = ["Exporter", "METRIC_NAMES"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120)
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5)
_LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

METRIC_NAMES = (
    "surgelab_requests_total", "surgelab_ttft_seconds", "surgelab_itl_seconds", "surgelab_e2e_seconds",
    "surgelab_schedule_lag_seconds", "surgelab_output_tokens_total", "surgelab_in_flight",
    "surgelab_send_rate", "surgelab_completion_rate", "surgelab_run_elapsed_seconds",
)  # fmt: skip


class Exporter:
    """An observer of the run: counts every recorded request and mirrors the live snapshot."""

    def __init__(self, run_name: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r, run = self.registry, {"run": run_name}
        self.requests = Counter("surgelab_requests", "Requests by final state.", ["run", "state", "phase", "request_class"], registry=r)
        self.output_tokens = Counter("surgelab_output_tokens", "Output tokens of successful requests.", ["run"], registry=r)
        self.ttft = Histogram("surgelab_ttft_seconds", "Time to first token from the intended send.", ["run"], buckets=_LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram("surgelab_e2e_seconds", "End-to-end latency from the intended send.", ["run"], buckets=_LATENCY_BUCKETS, registry=r)
        self.itl = Histogram("surgelab_itl_seconds", "Gaps between streamed chunks.", ["run"], buckets=_ITL_BUCKETS, registry=r)
        self.lag = Histogram("surgelab_schedule_lag_seconds", "Actual minus intended send time.", ["run"], buckets=_LAG_BUCKETS, registry=r)
        self.in_flight = Gauge("surgelab_in_flight", "Requests sent and not yet answered.", ["run"], registry=r)
        self.send_rate = Gauge("surgelab_send_rate", "Sends per second, last few seconds.", ["run"], registry=r)
        self.completion_rate = Gauge("surgelab_completion_rate", "Completions per second, last few seconds.", ["run"], registry=r)
        self.elapsed = Gauge("surgelab_run_elapsed_seconds", "Time since the run started.", ["run"], registry=r)
        self._run = run
        self._tokens = self.output_tokens.labels(**run)  # the run's own series, looked up once
        self._ttft, self._e2e, self._itl, self._lag = (m.labels(**run) for m in (self.ttft, self.e2e, self.itl, self.lag))

    def serve(self, port: int, host: str = "127.0.0.1", token: str | None = None) -> None:
        """Start the /metrics HTTP server (a daemon thread that ends with the process).

        With ``token``, a scrape must send ``Authorization: Bearer TOKEN`` (Prometheus:
        ``authorization: {credentials: TOKEN}``); anything else gets 401."""
        if token is None:
            start_http_server(port, addr=host, registry=self.registry)
            return
        metrics = make_wsgi_app(self.registry)

        def guarded(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            if not token_matches(environ.get("HTTP_AUTHORIZATION"), token):
                start_response("401 Unauthorized", [("Content-Type", "text/plain")])
                return [b"unauthorized: send Authorization: Bearer TOKEN\n"]
            return metrics(environ, start_response)

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

        server = make_server(host, port, guarded, ThreadingWSGIServer, handler_class=Quiet)
        threading.Thread(target=server.serve_forever, daemon=True, name="surgelab-exporter").start()

    def observe(self, meta: RecordMeta, out: Outcome) -> None:
        self.requests.labels(state=out.state.value, phase=meta.phase, request_class=meta.request_class, **self._run).inc()
        if out.sent_ns is not None:
            self._lag.observe((out.sent_ns - meta.intended_ns) / 1e9)
        if out.state is not State.OK:
            return
        if out.first_token_ns is not None:
            self._ttft.observe((out.first_token_ns - meta.intended_ns) / 1e9)
        if out.end_ns is not None:
            self._e2e.observe((out.end_ns - meta.intended_ns) / 1e9)
        tokens = out.token_ns
        itl = self._itl
        for i in range(1, len(tokens)):
            itl.observe((tokens[i] - tokens[i - 1]) / 1e9)
        if out.output_tokens:
            self._tokens.inc(out.output_tokens)

    def update(self, snapshot: LiveSnapshot) -> None:
        run = self._run
        self.in_flight.labels(**run).set(snapshot.in_flight)
        self.send_rate.labels(**run).set(snapshot.send_rate)
        self.completion_rate.labels(**run).set(snapshot.completion_rate)
        self.elapsed.labels(**run).set(snapshot.elapsed_s)
