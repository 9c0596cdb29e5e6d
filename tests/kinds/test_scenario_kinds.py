"""Kind fields in scenarios: raw YAML in, every error at once out; backward-compatible endpoints."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from surgelab.scenario.loader import ScenarioError, build_scenario

HEAD = "target: {url: 'http://127.0.0.1:9/v1', model: m}\nload: {rate: 1, duration: 1s}\n"

ERRORS = [
    ("workload: {kind: chat, images: {count: 2}}", "images applies to kind vision or image_generation, not chat"),
    ("workload: {kind: vision, audio: {seconds: 2}}", "audio applies to kind transcription, not vision"),
    ("workload: {batch_size: 4}", "batch_size applies to kind embeddings, not the target endpoint"),
    ("workload: {kind: embeddings, endpoint: chat}", "kind 'embeddings' and endpoint 'chat' disagree"),
    ("workload: {kind: http}", "kind http needs an http template"),
    ("workload: {kind: http, http: {method: POST}}", "http needs a path (or preset: kserve_v2)"),
    ("workload: {kind: flow}", "kind flow needs flow"),
    ("workload: {kind: flow, flow: [{name: a}, {name: a}]}", "flow step names must be unique"),
    ("workload: {kind: flow, flow: [{name: a, kind: flow, flow: [{name: b}]}]}", "cannot be a flow, a session or an agent"),
    ("workload: {kind: transcription, session: {turns: 3}}", "session applies to chat, completions, vision, responses and messages"),
    ("workload: {kind: messages, session: {turns: 3, previous_response_id: true}}",
     "session.previous_response_id applies to kind responses, not messages"),
    ("workload: {kind: speak}", "kind"),
    ("workload: {kind: vision, images: {format: gif}}", "format"),
    ("workload: {kind: vision, images: {quality: 101}}", "quality"),
    ("workload: {kind: vision, images: {folder: no/such/dir}}", "image folder not found"),
    ("kinds: {telepathy: {slo: {e2e: 1s}}}", "telepathy"),
]


@pytest.mark.parametrize(("snippet", "message"), ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_invalid_kind_fields(snippet, message):
    with pytest.raises(ScenarioError) as info:
        build_scenario(yaml.safe_load(HEAD + snippet), source="s.yaml")
    assert message in str(info.value)


def test_every_error_of_a_class_is_reported_at_once():
    with pytest.raises(ScenarioError) as info:
        build_scenario(yaml.safe_load(HEAD + "workload: {kind: chat, images: {}, audio: {}, batch_size: 2}"), source="s")
    text = str(info.value)
    assert "images applies" in text and "audio applies" in text and "batch_size applies" in text


def test_old_endpoint_scenarios_mean_the_same_kinds():
    data = yaml.safe_load(HEAD + textwrap.dedent("""
        workload:
          mix:
            - {name: e, endpoint: embeddings}
            - {name: c, endpoint: completions}
            - {name: t}
    """))  # fmt: skip
    classes = build_scenario(data, source="s").workload.classes
    assert [c.request_kind for c in classes] == ["embeddings", "completions", None]


def test_per_kind_slo_falls_back_to_the_scenarios():
    data = yaml.safe_load(HEAD + "slo: {ttft: 1s, e2e: 9s}\nkinds: {speech: {slo: {ttft: 200ms}}}")
    scenario = build_scenario(data, source="s")
    assert scenario.slo_of_kind("speech").ttft == 0.2 and scenario.slo_of_kind("speech").e2e == 9
    assert scenario.slo_of_kind("vision").ttft == 1
