"""``surgelab serve --profile`` takes a deployment file: the model is the config's, the limits vLLM's."""

from __future__ import annotations

import json
import urllib.request

from surgelab.server.process import ServerProcess


def test_serve_a_deployment_file(tmp_path):
    path = tmp_path / "qwen.yaml"
    path.write_text("model: Qwen/Qwen2.5-7B-Instruct\ngpu: h100\nmax_num_seqs: 64\nmax_model_len: 4096\n")
    with (
        ServerProcess([], profile=str(path)) as server,
        urllib.request.urlopen(server.base_url + "/models", timeout=5) as reply,
    ):
        models = json.loads(reply.read())["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [("Qwen/Qwen2.5-7B-Instruct", 4096)]
