"""Credentials written into a URL (``https://user:pass@host/v1``) are used, never shown or stored (issue 20)."""

from __future__ import annotations

import base64
import secrets

import pyarrow.parquet as pq
import pytest

from surgelab.aio import run_async
from surgelab.process import free_port
from surgelab.redact import REDACTED, redact_text, redact_tree, redact_url, url_credentials
from surgelab.runner.preflight import PreflightFailed, preflight
from surgelab.scenario.loader import ScenarioError, build_scenario


def test_redaction_of_urls_and_text() -> None:
    assert redact_url("https://al%40ice:p%3Ass@host:8443/v1") == f"https://{REDACTED}@host:8443/v1"
    assert url_credentials("https://al%40ice:p%3Ass@host:8443/v1") == ("al@ice", "p:ss")
    assert url_credentials("https://host/v1") is None
    assert redact_url("https://host/v1?api_key=abc&x=1") == f"https://host/v1?api_key={REDACTED}&x=1"
    said = "cannot reach http://u:p@10.0.0.1:8000/v1 (refused); see https://example.com/docs"
    assert redact_text(said) == f"cannot reach http://{REDACTED}@10.0.0.1:8000/v1 (refused); see https://example.com/docs"
    assert redact_tree({"a": ["http://u:p@h/x", 3, None]}) == {"a": [f"http://{REDACTED}@h/x", 3, None]}
    # a redacted URL is still a URL: the saved scenario loads again
    assert build_scenario({"target": {"url": redact_url("http://u:p@h:1/v1"), "model": "m"},
                           "load": {"rate": 1, "duration": "1s"}}).target.url.host == "h"  # fmt: skip


def test_url_credentials_are_sent_as_basic_auth_and_absent_from_every_output(zero_server, cli, tmp_path) -> None:
    user, password = f"user-{secrets.token_hex(4)}", f"pw-{secrets.token_hex(12)}"
    url = zero_server.url.replace("http://", f"http://{user}:{password}@")
    out = tmp_path / "run"
    result = cli("run", "--url", url, "--rate", "5", "--arrival", "constant", "--duration", "1s", "--prompt-tokens", "16",
                 "--max-tokens", "4", "--out", str(out), "--set", "validity.max_lag_p99=1s", timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    assert zero_server.stats()["authorization"] == expected, "the server got the credentials, as HTTP Basic"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"scenario.yaml", "run.json", "summary.json", "records.parquet", "report.html"}
    for secret in (user, password):
        for path in files:
            assert secret.encode() not in path.read_bytes(), path
        assert secret not in repr(pq.read_table(out / "records.parquet").to_pylist())
        assert secret not in result.stdout + result.stderr
    assert f"http://{REDACTED}@127.0.0.1" in (out / "scenario.yaml").read_text()
    # a target that fails its pre-flight does not say them either
    dead = f"http://{user}:{password}@127.0.0.1:{free_port()}/v1"
    with pytest.raises(PreflightFailed) as refused:
        run_async(preflight(build_scenario({"target": {"url": dead, "model": "m"}, "load": {"rate": 1, "duration": "1s"}})))
    assert str(refused.value).startswith(f"http://{REDACTED}@127.0.0.1:")
    assert user not in str(refused.value) and password not in str(refused.value)


def test_a_scenario_error_does_not_repeat_a_url_credential() -> None:
    try:
        build_scenario({"target": {"url": "http://bob:hunter2secret@host:99999/v1", "model": "m"},
                        "load": {"rate": 1, "duration": "1s"}}, source="s.yaml")  # fmt: skip
    except ScenarioError as exc:
        assert "target.url" in str(exc) and "hunter2secret" not in str(exc) and "bob" not in str(exc)
    else:
        raise AssertionError("port 99999 is not a port")
