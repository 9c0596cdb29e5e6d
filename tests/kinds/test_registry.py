"""The kind registry is the only list of kinds: every package reads a kind's properties from its spec.

Three ways to hold that: every hook a spec names resolves, in the layer that owns it; no module
of ``src/surgelab`` but the registry lists kind names or tests a kind by name; and the worked
example of docs/architecture.md — one new module and one registry line — registered in a fresh
interpreter (as the scenario's schema is made on import) runs end to end against ``surgelab serve``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from surgelab.client.kinds import KindContext, build_kinds
from surgelab.kinds import KINDS, KindSpec, Registry
from surgelab.scenario.model import Target
from surgelab.tokenizer import BuiltinTokenizer

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "surgelab"
NAMES = frozenset(KINDS.names)
LAYER_OF_HOOK = {"builder": "surgelab.workload.", "prepare": "surgelab.workload.", "adapter": "surgelab.client.",
                 "cost": "surgelab.engine."}  # fmt: skip


@pytest.mark.parametrize("spec", list(KINDS), ids=KINDS.names)
def test_every_hook_resolves_in_the_layer_that_owns_it(spec):
    for hook, layer in LAYER_OF_HOOK.items():
        path = getattr(spec, hook)
        if path is not None:
            assert path.startswith(layer), f"{spec.name}.{hook} = {path}: it belongs in {layer}"
            assert callable(spec.hook(hook)), f"{spec.name}.{hook} = {path} is not callable"
    assert (spec.adapter is None) == spec.chain, "every kind is sent by an adapter, but a chain of other kinds"
    assert spec.needs is None or spec.block is not None
    assert set(spec.figures) <= {"ttfa", "real_time_factor", "audio_s_per_s", "steps"}  # what analysis/kinds.py draws


def test_the_client_has_an_adapter_for_every_kind_it_sends():
    adapters = build_kinds(KindContext(Target(url="http://127.0.0.1:9/v1"), lambda: 0, BuiltinTokenizer()))
    assert set(adapters) == {spec.name for spec in KINDS if not spec.chain}
    assert all(callable(a.call) and callable(a.read) for a in adapters.values())


def test_a_spec_says_which_objectives_fit_it():
    assert KINDS["chat"].slo_fields(stream=True) == ("ttft", "itl", "tpot", "e2e")
    assert KINDS["chat"].slo_fields(stream=False) == ("ttft", "e2e")  # the whole answer is the first token
    assert KINDS["speech"].slo_fields(stream=True) == ("ttft", "e2e")  # its first audio byte
    assert KINDS["embeddings"].slo_fields(stream=True) == ("e2e",)


def test_a_kind_is_registered_once():
    registry = Registry(KindSpec("a"))
    with pytest.raises(ValueError, match="'a' is registered already"):
        registry.register(KindSpec("a"))


def _constants(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in NAMES}


def kind_lists(tree: ast.AST) -> list[tuple[int, str]]:
    """Where a module keeps kinds of its own: a literal collection of two kind names or more (a tuple,
    list, set, ``Literal[...]`` or a dict's keys), or a comparison of something called kind with a name."""
    found = []
    exports = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign) and "__all__" in map(ast.unparse, n.targets)
    }
    for node in ast.walk(tree):
        if id(node) in exports:  # the names a module exports (its builders are named after their kinds)
            continue
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            names = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in NAMES}
        elif isinstance(node, ast.Dict):
            names = {k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in NAMES}
        elif isinstance(node, ast.Compare) and any(
            "kind" in ast.unparse(side) for side in (node.left, *node.comparators)
        ):
            if set().union(*(_constants(side) for side in (node.left, *node.comparators))):
                found.append((node.lineno, f"tests a kind by name: {ast.unparse(node)}"))
            continue
        else:
            continue
        if len(names) > 1:
            found.append((node.lineno, f"lists kinds {', '.join(sorted(names))}"))
    return found


def test_no_module_but_the_registry_keeps_a_list_of_kinds():
    problems = [
        f"{path.relative_to(SRC)}:{line}: {what}"
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "kinds.py"
        for line, what in kind_lists(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not problems, "read these from surgelab.kinds.KINDS instead:\n" + "\n".join(problems)


@pytest.mark.parametrize("code, found", [
    ('STREAMING = ("chat", "completions", "vision")', [(1, "lists kinds chat, completions, vision")]),
    ('endpoint: Literal["chat", "embeddings"] = "chat"', [(1, "lists kinds chat, embeddings")]),
    ('UNITS = {"rerank": 1, "speech": 2}', [(1, "lists kinds rerank, speech")]),
    ('if spec.kind == "flow":\n    pass', [(1, 'tests a kind by name: spec.kind == \'flow\'')]),
    ('ok = request_kind not in ("transcription",)', [(1, "tests a kind by name: request_kind not in ('transcription',)")]),
    ('if api == "chat" or event_kind == "error":\n    pass', []),  # a wire dialect, an event type: not kinds
    ('cost = KINDS["speech"].hook("cost")', []),  # one kind looked up in the registry
    ('__all__ = ["vision", "rerank"]', []),  # functions named after their kinds
])  # fmt: skip
def test_the_scan_finds_a_list_of_kinds(code, found):
    assert kind_lists(ast.parse(code)) == found


def test_docs_kinds_has_a_row_for_every_kind():
    table = (ROOT / "docs" / "kinds.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    assert rows == NAMES


def _example() -> tuple[str, str]:
    """The worked example of docs/architecture.md: the new module, and the registry line."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Adding a request kind: a worked example", 1)[1]
    module, line = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:2]
    assert module.startswith("# src/surgelab/client/kinds/tokenize.py\n")
    return module, line.strip().rstrip(",")


RUN = """
import json, sys
import surgelab.kinds as registry

line, folder, url, run_dir = sys.argv[1:]
registry.KINDS.register(eval(line, vars(registry)))  # before anything reads the registry, as the schema does on import

import surgelab.client.kinds as adapters
adapters.__path__.append(folder)  # the page's module, as if it were src/surgelab/client/kinds/tokenize.py

from surgelab.aio import run_async
from surgelab.runner import run_scenario
from surgelab.scenario.loader import ScenarioError, build_scenario
from surgelab.scenario.model import Scenario
from surgelab.metrics.store import read_records

data = {"target": {"url": url, "model": "surgelab-tiny"}, "load": {"rate": 8, "duration": "1s"},
        "workload": {"kind": "tokenize", "prompt_tokens": 40}, "kinds": {"tokenize": {"slo": {"ttft": "1ms", "e2e": "5s"}}}}
try:
    build_scenario({**data, "workload": {"kind": "tokenize", "images": {"count": 1}}}, source="test")
except ScenarioError as exc:
    refused = str(exc)
summary = run_async(run_scenario(build_scenario(data, source="test"), run_dir)).summary
records = read_records(run_dir).select(["kind", "prompt_tokens", "usage_source"]).to_pylist()
kinds = Scenario.model_json_schema()["$defs"]["RequestClass"]["properties"]["kind"]
print(json.dumps({"summary": summary, "records": records, "refused": refused, "schema": kinds}, default=str))
"""


def test_the_worked_example_is_one_module_and_one_line(embedded, tmp_path):
    module, line = _example()
    (tmp_path / "tokenize.py").write_text(module, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", RUN, line, str(tmp_path), embedded, str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    summary, records = out["summary"], out["records"]
    assert summary["requests"]["ok"] > 0 and summary["requests"]["failed"] == 0, summary["requests"]["by_state"]
    assert {r["kind"] for r in records} == {"tokenize"}
    assert all(r["usage_source"] == "server" and r["prompt_tokens"] > 0 for r in records)
    block = summary["by_kind"]["tokenize"]
    assert block["throughput"]["input_tokens_per_s"] > 0 and "output_tokens_per_s" not in block["throughput"]
    assert set(block["latency_ms"]) == {"e2e"}  # no first token, no stream
    assert block["goodput"]["slo_ms"] == {"ttft": None, "itl": None, "tpot": None, "e2e": 5000.0}
    assert block["goodput"]["fraction"] == 1.0  # a 1 ms TTFT objective does not fit it, so it misses nothing
    assert "images applies to kind vision or image_generation, not tokenize" in out["refused"]
    assert "tokenize" in str(out["schema"])
