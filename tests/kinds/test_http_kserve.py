"""The generic http kind against a loopback server speaking the KServe / Triton v2 protocol."""

from __future__ import annotations

import json
import urllib.request

import pytest

from surgelab.client.kinds import KindContext
from surgelab.client.kinds.http import Http
from surgelab.scenario.model import Target
from surgelab.workload.kinds import fill


def _stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/stats", timeout=5) as resp:
        return json.loads(resp.read())


def test_the_kserve_preset_loads_a_v2_server(kserve, scenario_for, run, reconciled, tmp_path):
    before = _stats(kserve)["infer"]
    scenario = scenario_for(
        kserve + "/v1", model="llama", load={"rate": 20, "duration": "1.5s"}, preflight=False,  # counts every infer
        workload={"kind": "http", "http": {"preset": "kserve_v2"}, "prompt_tokens": 12, "output_tokens": 7},
    )  # fmt: skip
    summary = run(scenario, tmp_path).summary
    table = reconciled(summary, tmp_path)
    ok = summary["requests"]["ok"]
    assert ok > 10 and summary["requests"]["failed"] == 0
    assert _stats(kserve)["infer"] - before == ok, "every success is an accepted infer request"
    last = _stats(kserve)["last"]
    text, max_tokens = last["inputs"]
    assert text["datatype"] == "BYTES" and len(text["data"][0].split()) == 12
    assert max_tokens["data"] == [7], "a placeholder alone keeps the value's type"
    block = summary["by_kind"]["http"]
    assert set(block["latency_ms"]) == {"e2e"} and block["latency_ms"]["e2e"]["p50"] >= 20, "the server's 20 ms"
    assert block["throughput"]["response_bytes_per_s"] > 0
    assert set(table["kind"].to_pylist()) == {"http"}


def test_a_wrong_template_is_an_http_error_with_the_servers_reason(kserve, scenario_for, run, tmp_path):
    body = {"inputs": [{"name": "text_input", "shape": [2], "datatype": "BYTES", "data": ["{prompt}"]}]}
    scenario = scenario_for(
        kserve + "/v1", model="llama", load={"rate": 10, "duration": "0.5s"}, preflight=False,
        workload={"kind": "http", "http": {"path": "/v2/models/{model}/infer", "body": body}},
    )  # fmt: skip
    summary = run(scenario, tmp_path).summary
    assert summary["requests"]["ok"] == 0 and summary["requests"]["by_state"]["http_error"] > 0


def test_a_post_without_a_body_is_sent_with_a_zero_length(kserve, scenario_for, run, tmp_path):
    """A template with no body still POSTs (Content-Length: 0): the server answers it (here 400, not
    JSON) instead of the client failing to build the request (it took len() of the missing body)."""
    before = _stats(kserve)["rejected"]
    scenario = scenario_for(
        kserve + "/v1", model="llama", load={"rate": 10, "duration": "0.5s"}, preflight=False,
        workload={"kind": "http", "http": {"path": "/v2/models/{model}/infer"}},
    )  # fmt: skip
    summary = run(scenario, tmp_path).summary
    sent = summary["requests"]["scheduled"]
    assert sent > 0 and summary["requests"]["by_state"]["http_error"] == sent
    assert _stats(kserve)["rejected"] - before == sent, "every request reached the server"


@pytest.mark.parametrize(
    ("template", "values", "expected"),
    [
        ("{prompt}", {"prompt": "a b"}, "a b"),
        ("{max_tokens}", {"max_tokens": 5}, 5),
        ("n={max_tokens}!", {"max_tokens": 5}, "n=5!"),
        ({"a": ["{index}", {"b": "{model}-x"}]}, {"index": 3, "model": "m"}, {"a": [3, {"b": "m-x"}]}),
        ("{unknown}", {"prompt": "p"}, "{unknown}"),
        (7, {}, 7),
    ],
)
def test_placeholders(template, values, expected):
    assert fill(template, values) == expected


def test_paths_are_from_the_origin_or_full_urls():
    http = Http(KindContext(Target(url="http://127.0.0.1:9/v1", model="mm"), lambda: 0, None))  # type: ignore[arg-type]
    from surgelab.workload.request import RequestSpec

    def url(path: str) -> str:
        spec = RequestSpec(prompt="p", prompt_tokens=1, max_tokens=1, payload=("GET", path, None, {}, {}))
        return http.call(spec).url

    assert url("/v2/models/{model}/infer") == "http://127.0.0.1:9/v2/models/mm/infer"
    assert url("http://other:1/x") == "http://other:1/x"
