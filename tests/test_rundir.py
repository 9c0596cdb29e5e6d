"""The run directory: the resolved scenario without secrets, and never two runs mixed."""

from __future__ import annotations

import pytest
import yaml

from surgelab.metrics.rundir import REDACTED, RunDirError, prepare_run_dir, read_json, redact, write_json
from surgelab.scenario.loader import build_scenario


def _scenario(**target):
    return build_scenario(
        {
            "target": {"url": "http://127.0.0.1:1/v1", "model": "m", **target},
            "load": {"rate": 5, "duration": "3s"},
            "workload": {"prompt_tokens": 300, "output_tokens": {"dist": "uniform", "min": 10, "max": 20}},
        }
    )


def test_resolved_scenario_redacts_credential_like_headers_and_fields(tmp_path):
    scenario = _scenario(
        api_key_env="MY_KEY_VAR",
        headers={
            "Authorization": "Bearer sk-secret-1",
            "X-Api-Key": "secret-2",
            "api-key": "secret-3",
            "Cookie": "session=secret-4",
            "X-Auth-Token": "secret-5",
            "X-Trace": "visible-trace",
        },
        extra_body={"user": "visible-user", "client_secret": "secret-6", "nested": {"password": "secret-7"}},
    )
    run_dir = prepare_run_dir(tmp_path / "run", scenario)
    text = (run_dir / "scenario.yaml").read_text()
    for n in range(1, 8):
        assert f"secret-{n}" not in text
    saved = yaml.safe_load(text)
    headers = saved["target"]["headers"]
    assert headers["Authorization"] == headers["X-Api-Key"] == headers["Cookie"] == REDACTED
    assert headers["X-Trace"] == "visible-trace"
    assert saved["target"]["extra_body"] == {
        "user": "visible-user",
        "client_secret": REDACTED,
        "nested": {"password": REDACTED},
    }
    assert saved["target"]["api_key_env"] == "MY_KEY_VAR"  # the name, which is not a secret


def test_resolved_scenario_keeps_every_setting_and_reloads_to_the_same_scenario(tmp_path):
    """Token counts and timeouts have 'token' in their names but are settings, not secrets."""
    scenario = _scenario()
    run_dir = prepare_run_dir(tmp_path / "run", scenario)
    saved = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    assert REDACTED not in (run_dir / "scenario.yaml").read_text()
    assert saved["workload"]["prompt_tokens"] == {"dist": "fixed", "value": 300.0}
    assert saved["target"]["timeouts"]["first_token"] == 60.0
    assert build_scenario(saved) == scenario


def test_a_setting_named_tokens_survives_and_the_stored_vision_scenario_validates(tmp_path):
    """``images.tokens: qwen2vl`` (the image-token formula) was stored as ``<redacted>``: its name contains
    ``token``. The stored scenario no longer validated and the report lost its target line and SLO."""
    scenario = build_scenario({
        "target": {"url": "http://127.0.0.1:1/v1", "model": "m", "headers": {"X-Trace": "Bearer abcdef0123456789"}},
        "load": {"rate": 5, "duration": "3s"}, "slo": {"ttft": "1s"},
        "workload": {"kind": "vision", "prompt_tokens": 20, "output_tokens": 4,
                     "images": {"count": 1, "width": 64, "height": 64, "tokens": "qwen2vl"}},
    })  # fmt: skip
    run_dir = prepare_run_dir(tmp_path / "run", scenario)
    saved = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    assert saved["workload"]["images"]["tokens"] == "qwen2vl"
    # a credential is redacted because it is one, whatever the header is called
    assert saved["target"]["headers"]["X-Trace"] == REDACTED
    del saved["target"]["headers"]
    scenario.target.headers.clear()
    assert build_scenario(saved) == scenario


@pytest.mark.parametrize("key", ["token", "access_token", "X-Auth-Token", "apiKey", "api-key", "hf_token", "Authorization"])
def test_credential_names_are_redacted_word_by_word(key):
    assert redact({key: "plain-value"}) == {key: REDACTED}


@pytest.mark.parametrize("key", ["tokens", "max_tokens", "tokenizer", "author", "keyword", "prompt_tokens"])
def test_settings_that_merely_contain_a_credential_word_are_kept(key):
    assert redact({key: "openai"}) == {key: "openai"}


def test_redact_recurses_into_lists():
    assert redact([{"token": "t"}, {"name": "n"}]) == [{"token": REDACTED}, {"name": "n"}]


@pytest.mark.parametrize("leftover", ["records.parquet", "records.parts", "summary.json"])
def test_refuses_to_overwrite_an_existing_run(tmp_path, leftover):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    target = run_dir / leftover
    target.mkdir() if leftover == "records.parts" else target.write_text("{}")
    with pytest.raises(RunDirError, match="already holds a run"):
        prepare_run_dir(run_dir, _scenario())
    assert not (run_dir / "scenario.yaml").exists()


def test_an_existing_empty_directory_is_fine(tmp_path):
    (tmp_path / "run").mkdir()
    assert (prepare_run_dir(tmp_path / "run", _scenario()) / "scenario.yaml").is_file()


def test_cannot_create_is_a_run_dir_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="cannot create run directory"):
        prepare_run_dir(tmp_path / "file" / "run", _scenario())


def test_json_round_trip(tmp_path):
    write_json(tmp_path / "x.json", {"a": [1, 2.5, None]})
    assert read_json(tmp_path / "x.json") == {"a": [1, 2.5, None]}
    assert not (tmp_path / "x.json.tmp").exists()
