"""Guard rails: caps on rate, users and duration; abort conditions; servers that stay on
loopback unless given a token."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from surgelab.aio import run_async
from surgelab.exposure import exposure_error, is_loopback
from surgelab.load.guards import AbortGuard
from surgelab.metrics.record import Outcome, State
from surgelab.metrics.store import RecordMeta
from surgelab.runner import run_scenario
from surgelab.scenario.loader import ScenarioError, build_scenario
from surgelab.scenario.model import Abort, Slo
from surgelab.server.process import ServerProcess, free_port

TARGET = {"url": "http://127.0.0.1:9/v1", "model": "m"}


@pytest.mark.parametrize(
    ("load", "guards", "message"),
    [
        ({"rate": 2500, "duration": "1s"}, {}, "load: a peak of 2500 req/s is above guards.max_rate (2000)"),
        ({"concurrency": 6000, "duration": "1s"}, {}, "load: 6000 users is above guards.max_concurrency (5000)"),
        ({"rate": 1, "duration": "25h"}, {}, "load: 90000s is longer than guards.max_duration (86400s)"),
        ({"rate": {"type": "step", "start": 100, "step": 1000, "max": 2100, "hold": "1s"}}, {}, "peak of 2100 req/s"),
        ({"rate": 500, "duration": "1s"}, {"max_rate": 100}, "above guards.max_rate (100)"),
    ],
)
def test_caps_refuse_a_scenario_with_the_field_and_the_way_out(load, guards, message) -> None:
    with pytest.raises(ScenarioError) as caught:
        build_scenario({"target": TARGET, "load": load, "guards": guards}, source="s.yaml")
    assert message in str(caught.value) and "--i-know-what-i-am-doing" in str(caught.value)


def test_caps_are_lifted_only_explicitly() -> None:
    assert build_scenario({"target": TARGET, "load": {"rate": 2500, "duration": "1s"}, "guards": {"max_rate": 3000}})
    assert build_scenario({"target": TARGET, "load": {"rate": 1e5, "duration": "48h"}, "guards": {"unlimited": True}})
    phases = [{"name": f"p{i}", "load": {"rate": 800, "duration": "1s"}} for i in range(3)]
    with pytest.raises(ScenarioError, match="peak of 2400 req/s"):
        build_scenario({"target": TARGET, "phases": phases})


def _feed(guard: AbortGuard, states: list[State], e2e_s: float = 0.01, step_ns: int = 1_000_000) -> None:
    for i, state in enumerate(states):
        out = Outcome(state=state, sent_ns=i * step_ns, first_token_ns=i * step_ns + int(e2e_s * 1e9) // 2,
                      end_ns=i * step_ns + int(e2e_s * 1e9))  # fmt: skip
        guard.clock = lambda i=i: i * step_ns + int(e2e_s * 1e9)
        guard.observe(RecordMeta(id=i, intended_ns=i * step_ns, warmup=False), out)


def test_abort_guard_conditions() -> None:
    reasons: list[str] = []
    guard = AbortGuard(Abort(consecutive_failures=5, error_rate=None), Slo(), reasons.append, lambda: 0)
    _feed(guard, [State.HTTP_ERROR] * 4 + [State.OK] + [State.DROPPED, State.CANCELLED] * 10 + [State.TIMEOUT] * 4)
    assert reasons == [], "an ok breaks the run; dropped and cancelled never count"
    _feed(guard, [State.CONNECTION_ERROR])
    assert reasons == ["aborted: guard: 5 consecutive failures (guards.abort.consecutive_failures: 5)"]

    reasons.clear()
    guard = AbortGuard(Abort(consecutive_failures=None, error_rate=0.5, min_requests=40, window=10), Slo(), reasons.append, lambda: 0)
    _feed(guard, [State.OK, State.HTTP_ERROR] * 10 + [State.OK] * 200)
    assert reasons == [], "too few requests in the window to judge, then healthy"
    _feed(guard, [State.HTTP_ERROR, State.HTTP_ERROR, State.OK] * 100, step_ns=100_000_000)
    assert len(reasons) == 1 and reasons[0].startswith("aborted: guard: error rate ") and "over the last 10s" in reasons[0]

    reasons.clear()
    abort = Abort(consecutive_failures=None, error_rate=None, p99_over_slo=10, min_requests=20)
    guard = AbortGuard(abort, Slo(e2e=0.1), reasons.append, lambda: 0)
    _feed(guard, [State.OK] * 50, e2e_s=0.5)
    assert reasons == [], "5 × the SLO is slow, not an outage"
    _feed(guard, [State.OK] * 500, e2e_s=2.0)
    assert len(reasons) == 1 and reasons[0].startswith("aborted: guard: P99 e2e") and "over 10 × its SLO of 100 ms" in reasons[0]


def test_a_run_against_a_failing_target_stops_itself(scenario_for, reconciled, tmp_path, timed_server) -> None:
    scenario = scenario_for(
        timed_server.url, "status-500", load={"rate": 20, "arrival": "constant", "duration": "10s", "grace": "2s"},
        guards={"abort": {"consecutive_failures": 10}}, preflight=False,
    )  # fmt: skip
    result = run_async(run_scenario(scenario, tmp_path / "run"))
    assert result.stop_reason == "aborted: guard: 10 consecutive failures (guards.abort.consecutive_failures: 10)"
    table = reconciled(result.summary, result.run_dir)
    assert table.num_rows < 100, "stopped long before the planned 200 requests"


def test_a_run_far_beyond_its_slo_stops_itself(scenario_for, reconciled, tmp_path, timed_server) -> None:
    scenario = scenario_for(
        timed_server.url, "ok", load={"rate": 20, "arrival": "constant", "duration": "10s", "grace": "2s"},
        slo={"ttft": "10ms"}, guards={"abort": {"p99_over_slo": 5, "min_requests": 10, "window": "2s"}},
    )  # fmt: skip
    result = run_async(run_scenario(scenario, tmp_path / "run"))
    assert result.stop_reason.startswith("aborted: guard: P99 ttft") and "over 5 × its SLO of 10 ms" in result.stop_reason
    reconciled(result.summary, result.run_dir)


def test_cli_caps_and_the_explicit_override(cli) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    refused = cli("run", "--url", dead, "--model", "m", "--rate", "2500", "--duration", "1s", "-q", timeout=60)
    assert refused.returncode == 2 and "guards.max_rate" in refused.stderr and "Traceback" not in refused.stderr
    # Explicitly lifted: it runs, against a port nobody listens on, and the failure guard stops it.
    lifted = cli("run", "--url", dead, "--model", "m", "--rate", "2500", "--duration", "2s", "-q", "--grace", "1s",
                 "--i-know-what-i-am-doing", "--no-preflight", "--out", str(__import__("tempfile").mkdtemp()), timeout=90)  # fmt: skip
    assert lifted.returncode == 1, lifted.stderr[-2000:]
    assert "Traceback" not in lifted.stderr


def test_loopback_is_free_and_anything_else_needs_a_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("example.com")
    assert exposure_error("127.0.0.1", None, "x", "--t") is None and exposure_error("0.0.0.0", "s3cret", "x", "--t") is None
    assert "give an access token with --t" in exposure_error("0.0.0.0", None, "x", "--t")


def test_serve_and_exporter_refuse_other_hosts_without_a_token(cli) -> None:
    serve = cli("serve", "--host", "0.0.0.0", "--port", "0", "--profile", "tiny", timeout=30)
    assert serve.returncode == 2 and "--token-env" in serve.stderr
    run = cli("run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--rate", "1", "--duration", "1s",
              "--prometheus-port", "0", "--prometheus-host", "0.0.0.0", timeout=30)  # fmt: skip
    assert run.returncode == 2 and "--prometheus-token-env" in run.stderr
    from surgelab.dashboard import Dashboard, DashboardSettings

    with pytest.raises(PermissionError, match="the dashboard on 0.0.0.0"):
        Dashboard(DashboardSettings(host="0.0.0.0")).start()


def _get(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_token_protects_serve_and_the_exporter(monkeypatch, scenario_for, tmp_path) -> None:
    monkeypatch.setenv("SURGELAB_TEST_SERVE_TOKEN", "serve-token-0123456789")
    with ServerProcess(["--token-env", "SURGELAB_TEST_SERVE_TOKEN"], profile="tiny") as server:
        assert _get(server.root_url + "/health") == 200
        assert _get(server.base_url + "/models") == 401
        assert _get(server.base_url + "/models", "wrong") == 401
        assert _get(server.base_url + "/models", "serve-token-0123456789") == 200
        scenario = scenario_for(server.base_url, "surgelab-tiny", target={"api_key_env": "SURGELAB_TEST_SERVE_TOKEN"})
        result = run_async(run_scenario(scenario, tmp_path / "run", api_key="serve-token-0123456789"))
        assert result.summary["requests"]["ok"] == result.summary["requests"]["scheduled"] > 0

    from surgelab.telemetry.exporter import Exporter

    port = free_port()
    Exporter("guarded").serve(port, "127.0.0.1", token="scrape-token-0123456789")
    assert _get(f"http://127.0.0.1:{port}/metrics") == 401
    assert _get(f"http://127.0.0.1:{port}/metrics", "scrape-token-0123456789") == 200


def test_a_sweep_level_above_the_guard_stops_the_sweep_with_a_clear_error() -> None:
    from surgelab.sweep import SweepConfig, SweepError
    from surgelab.sweep.runner import level_scenario

    base = build_scenario({"target": TARGET, "load": {"rate": 1, "duration": "1s"}})
    config = SweepConfig(mode="rate")
    assert level_scenario(base, config, 1500, 10.0, 1.0, "ok").load.rate.peak == 1500
    with pytest.raises(SweepError, match=r"peak of 2500 req/s is above guards.max_rate"):
        level_scenario(base, config, 2500, 10.0, 1.0, "too-high")
