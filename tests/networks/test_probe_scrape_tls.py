"""``surgelab probe``, the telemetry scraper and the dashboard's gauges behind a private CA, mutual
TLS, another TLS name and a proxy: the same settings as the load path (``target.tls``,
``--ca-cert`` …), on an in-process HTTPS server whose certificates the test CA (``trustme``) signed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from aiohttp import web
from typer.testing import CliRunner

from surgelab.cli import app
from surgelab.dashboard.gauges import poll_gauges
from surgelab.scenario.output import Telemetry
from surgelab.scenario.target import Target
from surgelab.server.run import tls_context
from surgelab.telemetry.scrape import Scraper, scrape_sources
from surgelab.testing.connect_proxy import ConnectProxy

from .helpers import HOST, OTHER_NAME

METRICS = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
MODEL = "m"


def _app() -> web.Application:
    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text=METRICS, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    return app


@contextlib.contextmanager
def https_server(cert: str, client_ca: str | None = None) -> Iterator[int]:
    """The app over HTTPS on its own thread and loop (the CLI runs its own loop); yields the port."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(_app(), access_log=None)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, HOST, 0, ssl_context=tls_context(cert, None, client_ca))
        await site.start()
        return runner.addresses[0][1]

    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(5)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def _probe(port: int, *flags: str, out: str | None = None) -> tuple[int, str, dict]:
    args = ["probe", "--url", f"https://{HOST}:{port}/v1", "--model", MODEL, "--only", "models,network",
            "--timeout", "5s", *flags, *(["--out", out] if out else [])]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200", "NO_PROXY": "*", "no_proxy": "*"})
    doc = json.loads(Path(out).read_text()) if out and result.exit_code == 0 else {}
    return result.exit_code, result.output, doc


def test_probe_trusts_a_private_ca_only_when_given_and_times_the_handshake(pki, tmp_path) -> None:
    with https_server(str(pki.server)) as port:
        code, output, _ = _probe(port)
        assert code == 2, output
        assert "certificate verify failed" in output and "use --ca-cert FILE" in output, output

        code, output, doc = _probe(port, "--ca-cert", str(pki.ca), out=str(tmp_path / "probe.json"))
    assert code == 0, output
    assert doc["metrics"]["models_listed"]["value"] == 1.0
    network = next(p for p in doc["probes"] if p["name"] == "network")
    assert len(network["details"]["tcp_connect_s"]) == len(network["details"]["tls_connect_s"]) >= 1
    assert 0 < network["details"]["tls_handshake_s"] < 1.0, network  # the handshake, on the same connections
    assert network["value"] is not None and "TLS handshake median" in network["found"]


def test_probe_with_mutual_tls_and_another_name(pki, tmp_path) -> None:
    with https_server(str(pki.server), client_ca=str(pki.ca)) as port:
        code, output, _ = _probe(port, "--ca-cert", str(pki.ca))
        assert code == 2 and "use --client-cert FILE --client-key FILE" in output, output
        code, output, doc = _probe(port, "--ca-cert", str(pki.ca), "--client-cert", str(pki.client_cert),
                                   "--client-key", str(pki.client_key), out=str(tmp_path / "mtls.json"))  # fmt: skip
        assert code == 0, output
        assert doc["metrics"]["models_listed"]["value"] == 1.0
    with https_server(str(pki.other)) as port:  # a certificate for api.surgelab.test only, reached by IP
        code, output, _ = _probe(port, "--ca-cert", str(pki.ca))
        assert code == 2 and "use --server-name NAME" in output, output
        code, output, doc = _probe(port, "--ca-cert", str(pki.ca), "--server-name", OTHER_NAME,
                                   out=str(tmp_path / "named.json"))  # fmt: skip
    assert code == 0, output
    network = next(p for p in doc["probes"] if p["name"] == "network")  # the raw connections use the name too
    assert network["value"] is not None and network["details"]["tls_handshake_s"] > 0, network


def test_probe_goes_through_the_proxy_it_is_given(pki, tmp_path) -> None:
    with https_server(str(pki.server)) as port, ConnectProxy() as proxy:
        code, output, doc = _probe(port, "--ca-cert", str(pki.ca), "--proxy", proxy.url,
                                   out=str(tmp_path / "proxied.json"))  # fmt: skip
    assert code == 0, output
    tunnels = [t for t in proxy.tunnels if t == f"{HOST}:{port}"]
    network = next(p for p in doc["probes"] if p["name"] == "network")
    assert len(tunnels) >= 1 + len(network["details"]["tcp_connect_s"])  # the HTTP requests and the timed connections
    assert f"through the proxy {proxy.url}" in network["how"]


def test_probe_refuses_a_missing_certificate_file_in_one_line(pki, tmp_path) -> None:
    code, output, _ = _probe(1, "--ca-cert", str(tmp_path / "nope.pem"))
    assert code == 2 and "--ca-cert: " in output and "not found" in output and "Traceback" not in output, output


def _scrape(sources: list) -> dict[str, tuple[float, str]]:
    scraper = Scraper(sources, 1.0, time.perf_counter_ns, store=None)  # type: ignore[arg-type]

    async def once() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(scraper._scrape(session, s) for s in sources))

    asyncio.run(once())
    rows = scraper.buffer.take().to_pylist()
    out = {r["source"]: (r["value"], r["labels"]) for r in rows if r["metric"] == "up"}
    for r in rows:
        if r["metric"] == "vllm:num_requests_running":
            out[r["source"] + ":running"] = (r["value"], "")
    return out


def test_scrapes_take_the_targets_tls_on_its_host_or_their_own(pki, monkeypatch) -> None:
    monkeypatch.setenv("NO_PROXY", "*")
    with https_server(str(pki.server), client_ca=str(pki.ca)) as port:
        target = Target(url=f"https://{HOST}:{port}/v1", tls={"ca_cert": str(pki.ca), "client_cert": str(pki.client_cert),
                                                           "client_key": str(pki.client_key)})  # fmt: skip
        telemetry = Telemetry(sources=[
            {"url": f"https://{HOST}:{port}/metrics", "name": "same-host"},  # the target's CA and client certificate
            {"url": f"https://localhost:{port}/metrics", "name": "other-host"},  # another host: the system's trust
            {"url": f"https://localhost:{port}/metrics", "name": "own-tls", "tls": target.tls.model_dump()},
        ])  # fmt: skip
        found = _scrape(scrape_sources(telemetry, [target]))
        gauges: list[dict[str, float]] = []

        async def poll() -> None:
            task = asyncio.ensure_future(poll_gauges(scrape_sources(telemetry, [target])[:1], gauges.append, 0.05))
            while not gauges:
                await asyncio.sleep(0.01)
            task.cancel()

        asyncio.run(asyncio.wait_for(poll(), 5))
    assert found["same-host"] == (1.0, "") and found["same-host:running"][0] == 3.0
    assert found["own-tls"] == (1.0, "") and found["own-tls:running"][0] == 3.0
    value, labels = found["other-host"]
    assert value == 0.0 and "certificate verify failed" in labels and "--ca-cert" in labels, labels
    assert "other-host:running" not in found
    assert gauges[0] == {"running": 3.0}  # the dashboard's poll of the same https source
