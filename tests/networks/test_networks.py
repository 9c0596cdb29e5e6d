"""The networks users have (issue 24), on real servers on loopback: TLS with a private CA (a
Python server and nginx), mutual TLS, a name override, a forward proxy, redirects, and a hosted
API's rate-limit headers. Every certificate is made by the test (``trustme``)."""

from __future__ import annotations

import json
import re
import time

import pytest

from surgelab.runner.preflight import PreflightFailed
from surgelab.testing.connect_proxy import ConnectProxy
from surgelab.testing.process import ScriptedServerProcess

from .helpers import OTHER_NAME, NginxTls

ONE_SECOND = {"rate": 20, "arrival": "constant", "duration": "0.5s"}  # ten requests


@pytest.fixture(scope="module")
def tls_server(pki):
    """The scripted server over HTTPS, its certificate signed by the test CA (no system trusts it)."""
    with ScriptedServerProcess(extra=("--cert", str(pki.server)), startup_timeout=15) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(pki):
    """The same, asking every client for a certificate the test CA signed."""
    extra = ("--cert", str(pki.server), "--client-ca", str(pki.ca))
    with ScriptedServerProcess(extra=extra, startup_timeout=15) as server:
        yield server


def _states(records) -> set[str]:
    return set(records.column("state").to_pylist())


def _errors(records) -> set[str]:
    return set(records.column("error").to_pylist())


def test_a_private_ca_fails_with_what_to_do_and_passes_once_given(
    tls_server, pki, scenario_for, run, reconciled, tmp_path
):
    assert tls_server.base_url.startswith("https://127.0.0.1:")
    # The pre-flight stops the run before any load, with what to do ...
    started = time.monotonic()
    with pytest.raises(PreflightFailed) as failed:
        run(scenario_for(tls_server.base_url, load=ONE_SECOND), tmp_path / "checked")
    assert time.monotonic() - started < 10
    assert "certificate verify failed" in str(failed.value)
    assert "use --ca-cert FILE (or --insecure for a test bench)" in str(failed.value)
    # ... and without it every request says the same, in the records, the summary and the warnings.
    untrusted = run(scenario_for(tls_server.base_url, load=ONE_SECOND, preflight=False), tmp_path / "untrusted")
    records = reconciled(untrusted.summary, untrusted.run_dir)
    assert _states(records) == {"connection_error"} and records.num_rows == 10
    (error,) = _errors(records)
    assert error.startswith("certificate verify failed")
    assert "use --ca-cert FILE (or --insecure for a test bench)" in error
    assert (
        untrusted.summary["network"]["tls_failures"] == 10
    )  # said in the terminal and the report, not only the records
    assert f"10 requests failed on TLS: {error}" in untrusted.summary["warnings"]

    trusted = run(scenario_for(tls_server.base_url, target={"tls": {"ca_cert": str(pki.ca)}}, load=ONE_SECOND),
                  tmp_path / "trusted")  # fmt: skip
    records = reconciled(trusted.summary, trusted.run_dir)
    assert _states(records) == {"ok"} and records.num_rows == 10
    network = trusted.summary["network"]
    assert network["tls"] == {"https": True, "verified": True, "insecure": False, "ca_cert": str(pki.ca),
                              "client_cert": False, "server_name": None}  # fmt: skip
    # keep-alive at 10 requests/s: one connection, one handshake; the other nine reuse it and pay none
    handshakes = [t for t in records.column("tls_ms").to_pylist() if t is not None]
    connects = [t for t in records.column("connect_ms").to_pylist() if t is not None]
    assert len(handshakes) == len(connects) == network["new_connections"] >= 1
    assert network["reused_connections"] == 10 - network["new_connections"] >= 8
    assert all(t > 0 for t in handshakes) and network["tls_ms"]["p50"] > 0
    assert not trusted.summary["warnings"]


def test_a_new_connection_per_request_pays_a_handshake_every_time(tls_server, pki, scenario_for, run, tmp_path):
    target = {"tls": {"ca_cert": str(pki.ca)}, "connection": "close"}
    result = run(scenario_for(tls_server.base_url, target=target, load=ONE_SECOND), tmp_path / "close")
    network = result.summary["network"]
    assert result.summary["requests"]["ok"] == 10
    assert network["new_connections"] == 10 and network["reused_connections"] == 0
    assert network["tls_ms"]["p50"] > 0 and network["connect_ms"]["p50"] > 0


def test_mutual_tls_with_the_python_server(mtls_server, pki, scenario_for, run, reconciled, tmp_path):
    trust = {"ca_cert": str(pki.ca)}
    refused = run(scenario_for(mtls_server.base_url, target={"tls": trust}, load=ONE_SECOND, preflight=False),
                  tmp_path / "refused")  # fmt: skip
    records = reconciled(refused.summary, refused.run_dir)
    assert _states(records) == {"connection_error"}
    assert all("use --client-cert FILE --client-key FILE" in e for e in _errors(records)), _errors(records)

    tls = {**trust, "client_cert": str(pki.client_cert), "client_key": str(pki.client_key)}
    accepted = run(scenario_for(mtls_server.base_url, target={"tls": tls}, load=ONE_SECOND), tmp_path / "accepted")
    assert _states(reconciled(accepted.summary, accepted.run_dir)) == {"ok"}
    assert accepted.summary["network"]["tls"]["client_cert"] is True


def test_nginx_tls_name_override_and_mutual_tls(pki, zero_server, scenario_for, run, reconciled, tmp_path):
    upstream = zero_server.root_url.removeprefix("http://")
    (tmp_path / "nginx").mkdir()
    with NginxTls(pki, upstream, tmp_path / "nginx") as nginx:
        other = f"https://127.0.0.1:{nginx.other_port}/v1"
        trust = {"ca_cert": str(pki.ca)}
        wrong_name = run(scenario_for(other, target={"tls": trust}, load=ONE_SECOND, preflight=False),
                         tmp_path / "wrong-name")  # fmt: skip
        records = reconciled(wrong_name.summary, wrong_name.run_dir)
        assert _states(records) == {"connection_error"}
        (error,) = _errors(records)
        assert "certificate verify failed" in error and "use --server-name NAME" in error

        named = {**trust, "server_name": OTHER_NAME}
        right_name = run(scenario_for(other, target={"tls": named}, load=ONE_SECOND), tmp_path / "right-name")
        assert _states(reconciled(right_name.summary, right_name.run_dir)) == {"ok"}

        mtls = f"https://127.0.0.1:{nginx.mtls_port}/v1"
        no_cert = run(scenario_for(mtls, target={"tls": trust}, load=ONE_SECOND, preflight=False), tmp_path / "no-cert")
        records = reconciled(no_cert.summary, no_cert.run_dir)
        assert set(records.column("http_status").to_pylist()) == {400}  # nginx answers, in plain words
        assert all(e.endswith("use --client-cert FILE --client-key FILE") for e in _errors(records)), _errors(records)

        tls = {**trust, "client_cert": str(pki.client_cert), "client_key": str(pki.client_key)}
        with_cert = run(scenario_for(mtls, target={"tls": tls}, load=ONE_SECOND), tmp_path / "with-cert")
        assert _states(reconciled(with_cert.summary, with_cert.run_dir)) == {"ok"}
        assert with_cert.summary["network"]["tls_ms"]["p50"] > 0


PROXY_DELAY_S = 0.05


def test_https_through_a_connect_proxy_from_the_environment(tls_server, pki, scenario_for, run, monkeypatch, tmp_path):
    target = {"tls": {"ca_cert": str(pki.ca)}, "connection": "close"}
    with ConnectProxy(delay=PROXY_DELAY_S) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        proxied = run(scenario_for(tls_server.base_url, target=target, load=ONE_SECOND), tmp_path / "proxied")
        tunnels = [t for t in proxy.tunnels if t == f"127.0.0.1:{tls_server.port}"]
        assert proxied.summary["requests"]["ok"] == 10
        assert len(tunnels) >= 10  # every new connection went through it (and the /tokenize probe's too)
        # the proxy's added latency is in the connect phase, not in the handshake
        assert proxied.summary["network"]["connect_ms"]["p50"] >= PROXY_DELAY_S * 1000
        assert proxied.summary["network"]["tls_ms"]["p50"] < PROXY_DELAY_S * 1000

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        before = len(proxy.tunnels)
        direct = run(scenario_for(tls_server.base_url, target=target, load=ONE_SECOND), tmp_path / "direct")
        assert direct.summary["requests"]["ok"] == 10 and len(proxy.tunnels) == before
        assert direct.summary["network"]["connect_ms"]["p50"] < PROXY_DELAY_S * 1000


def test_plain_http_through_the_scenarios_proxy_with_credentials(zero_server, scenario_for, run, tmp_path):
    with ConnectProxy() as proxy:
        target = {"proxy": f"http://tester:s3cret@127.0.0.1:{proxy.port}"}
        result = run(scenario_for(zero_server.url, target=target, load=ONE_SECOND), tmp_path / "r")
        assert result.summary["requests"]["ok"] == 10
        # the request line in absolute form; the /tokenize probe (side traffic) took the same way
        assert f"{zero_server.url}/chat/completions" in proxy.forwarded
        assert f"{zero_server.root_url}/tokenize" in proxy.forwarded
        assert set(proxy.auth) == {"Basic dGVzdGVyOnMzY3JldA=="}
        assert result.summary["network"]["proxy"] == f"http://127.0.0.1:{proxy.port}"  # no credentials


def test_redirects_are_recorded_with_a_hint_or_followed(zero_server, scenario_for, run, reconciled, tmp_path):
    moved = zero_server.root_url + "/moved/v1"
    off = run(scenario_for(moved, load=ONE_SECOND, preflight=False), tmp_path / "off")
    records = reconciled(off.summary, off.run_dir)
    assert set(records.column("http_status").to_pylist()) == {307} and _states(records) == {"http_error"}
    (error,) = _errors(records)
    assert error.startswith(f"HTTP 307 redirect to {zero_server.url}/chat/completions: not followed")
    assert "--follow-redirects N" in error

    followed = run(scenario_for(moved, target={"redirects": 2}, load=ONE_SECOND), tmp_path / "followed")
    records = reconciled(followed.summary, followed.run_dir)
    assert _states(records) == {"ok"} and set(records.column("redirects").to_pylist()) == {1}
    assert followed.summary["network"]["redirects_followed"] == 10

    post_301 = run(scenario_for(zero_server.root_url + "/moved-301/v1", target={"redirects": 2}, load=ONE_SECOND, preflight=False),
                   tmp_path / "301")  # fmt: skip
    (error,) = _errors(reconciled(post_301.summary, post_301.run_dir))
    assert "a 301 would turn this POST into a GET" in error


def test_a_providers_quota_is_kept_per_request_and_named_in_the_summary(
    zero_server, scenario_for, run, reconciled, tmp_path
):
    load = {"rate": 20, "arrival": "constant", "duration": "1s"}
    # no pre-flight: its one request would take one of the quota's five a second
    result = run(scenario_for(zero_server.url, model="quota-5", load=load, preflight=False), tmp_path / "quota")
    records = reconciled(result.summary, result.run_dir).to_pylist()
    ok = [r for r in records if r["state"] == "ok"]
    throttled = [r for r in records if r["http_status"] == 429]
    assert len(ok) + len(throttled) == 20 and 5 <= len(ok) <= 10  # 5 a second, in one or two windows
    assert {r["ratelimit_requests"] for r in ok} <= {0, 1, 2, 3, 4} and min(r["ratelimit_requests"] for r in ok) == 0
    assert all(r["ratelimit_requests"] == 0 and r["retry_after_s"] == 1.0 for r in throttled)
    assert all(0 < r["ratelimit_reset_s"] <= 1.0 for r in records)
    assert all(r["ratelimit_tokens"] < 100_000 for r in records)
    limits = result.summary["rate_limits"]
    assert limits["reported"] == 20 and limits["throttled"] == len(throttled) and limits["remaining_requests_min"] == 0
    assert limits["quota_limited"] and limits["retry_after_max_s"] == 1.0
    assert limits["verdict"].startswith(
        f"limited by the provider's quota, not its speed: {len(throttled)} of 20 requests"
    )
    assert limits["verdict"] in result.summary["warnings"]

    # score and compare say it: the provider's quota, not its speed, set this run's pace
    from typer.testing import CliRunner

    from surgelab.cli import app
    from surgelab.report.compare import compare_runs

    (tmp_path / "r.yaml").write_text("core_performance:\n  - require: p90(e2e) <= 3s\n")
    scored = CliRunner().invoke(app, ["score", f"hosted={result.run_dir}", "--requirements", str(tmp_path / "r.yaml")])
    said = " ".join(scored.output.split())
    assert "hosted was limited by its provider's quota, not its speed" in said and limits["verdict"] in said
    free = run(scenario_for(zero_server.url, load=ONE_SECOND), tmp_path / "free")
    notes = compare_runs([free.run_dir, result.run_dir]).notes
    assert notes == [f"quota was {limits['verdict']}"]


def test_rate_limit_headers_of_openai_anthropic_and_the_ietf_drafts():
    from surgelab.client.ratelimit import read_limits

    openai = read_limits([(b"x-ratelimit-remaining-requests", b"4999"), (b"x-ratelimit-remaining-tokens", b"159976"),
                          (b"x-ratelimit-reset-requests", b"12ms"), (b"x-ratelimit-reset-tokens", b"6m0s")])  # fmt: skip
    assert (openai.remaining_requests, openai.remaining_tokens, openai.reset_s) == (4999, 159976, 360.0)
    anthropic = read_limits([(b"anthropic-ratelimit-requests-remaining", b"999"),
                             (b"anthropic-ratelimit-input-tokens-remaining", b"80000"),
                             (b"anthropic-ratelimit-output-tokens-remaining", b"16000"),
                             (b"anthropic-ratelimit-tokens-reset", b"2000-01-01T00:00:00Z"), (b"retry-after", b"7")])  # fmt: skip
    assert (anthropic.remaining_requests, anthropic.remaining_tokens, anthropic.reset_s) == (999, 16000, 0.0)
    assert anthropic.retry_after_s == 7.0
    ietf = read_limits([(b"RateLimit", b'"default";r=50;t=30'), (b"x-ms-retry-after-ms", b"1500")])
    assert (ietf.remaining_requests, ietf.reset_s, ietf.retry_after_s) == (50, 30.0, 1.5)
    assert read_limits([(b"content-type", b"text/event-stream")]) is None
    assert read_limits([(b"x-ratelimit-remaining-tokens", b"-1")]).remaining_tokens is None  # Azure: not reported


def test_a_scenario_naming_a_missing_certificate_is_one_clear_line(tmp_path):
    from surgelab.scenario.loader import ScenarioError, build_scenario

    data = {"target": {"url": "https://127.0.0.1:9/v1", "model": "m", "tls": {"ca_cert": "nowhere.pem"}},
            "load": {"rate": 1, "duration": "1s"}}  # fmt: skip
    with pytest.raises(ScenarioError) as caught:
        build_scenario(data, source="s.yaml", base_dir=tmp_path)
    assert f"tls.ca_cert not found: {tmp_path / 'nowhere.pem'}" in str(caught.value)


def test_the_command_line_takes_the_options_and_says_insecure_out_loud(tls_server, pki, cli, tmp_path):
    """``surgelab run --insecure``: a red line in the terminal and a warning in summary.json and report.html;
    the quota a provider signalled is kept and drawn in the report."""
    out = tmp_path / "run"
    done = cli("run", "--url", tls_server.base_url, "--model", "quota-3", "--rate", "20", "--duration", "0.5s",
               "--insecure", "--out", str(out), "--quiet", "--threshold", "error_rate < 100%")  # fmt: skip
    assert done.returncode == 0, done.stderr  # the quota's 429s are the point here: a threshold of its own
    terminal = " ".join((done.stdout + done.stderr).split())
    assert f"INSECURE: the certificate of {tls_server.base_url} is not verified" in terminal
    summary = json.loads((out / "summary.json").read_text())
    assert summary["network"]["tls"]["insecure"] and summary["rate_limits"]["quota_limited"]
    page = (out / "report.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)[1])
    assert any(w.startswith("INSECURE:") for w in data["summary"]["warnings"])
    series = data["extensions"]["rate_limits"]
    assert min(v for v in series["remaining_requests"] if v is not None) == 0 and sum(series["throttled_per_s"]) >= 4


def test_every_run_flag_lands_in_the_scenario(pki):
    from surgelab.cli.commands_run import _overrides
    from surgelab.scenario.loader import build_scenario

    flags = _overrides(url="https://10.0.0.5/v1", model="m", ca_cert=pki.ca, client_cert=pki.client_cert,
                       client_key=pki.client_key, server_name=OTHER_NAME, insecure=True, proxy="http://127.0.0.1:3128",
                       follow_redirects=3)  # fmt: skip
    target = build_scenario({"load": {"rate": 1, "duration": "1s"}}, overrides=flags).target
    assert target.tls.model_dump() == {"ca_cert": str(pki.ca), "client_cert": str(pki.client_cert),
                                       "client_key": str(pki.client_key), "server_name": OTHER_NAME, "insecure": True}  # fmt: skip
    assert (target.proxy, target.redirects) == ("http://127.0.0.1:3128", 3)


def test_a_redirect_to_another_origin_does_not_take_the_key_along(zero_server, scenario_for, run, tmp_path):
    key = "sk-surgelab-test-key-1234"
    load = {"rate": 10, "arrival": "constant", "duration": "0.3s"}
    same = run(scenario_for(zero_server.root_url + "/moved/v1", target={"redirects": 1}, load=load), tmp_path / "same",
               api_key=key)  # fmt: skip
    assert same.summary["requests"]["ok"] == 3 and zero_server.stats()["authorization"] == f"Bearer {key}"
    away = run(scenario_for(zero_server.root_url + "/moved-away/v1", target={"redirects": 1}, load=load, preflight=False),
               tmp_path / "away", api_key=key)  # fmt: skip
    assert away.summary["requests"]["ok"] == 3 and away.summary["network"]["redirects_followed"] == 3
    assert zero_server.stats()["authorization"] is None  # localhost is another origin than 127.0.0.1
