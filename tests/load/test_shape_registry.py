"""Every shape plans itself, and the registry is the only list of shapes.

Three ways to hold that: every registered shape answers the protocol of ``BaseShape`` in a way
its own level bears out (its send times integrate its level, a constant shape's level is the
same everywhere, a breakpoint's named step levels are the levels it held); no module outside
``scenario/shapes/`` tests which shape it was given; and the worked example of
docs/architecture.md — one new module and one registry line, written into a copy of the
source — is accepted by the scenario, and sent live and simulated at the times it planned.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from surgelab.load.arrivals import SeededArrivals
from surgelab.scenario.load import Arrival
from surgelab.scenario.loader import ScenarioError, build_scenario
from surgelab.scenario.shapes import SHAPES, BaseShape, ShapeRegistry, Steady
from surgelab.units import SECOND

SRC = Path(__file__).resolve().parents[2] / "src" / "surgelab"
TARGET = {"url": "http://127.0.0.1:9/v1", "model": "m"}
DURATION = 6.0

EXAMPLES = {
    "steady": {"type": "steady", "level": 4},
    "step": {"type": "step", "start": 1, "step": 2, "hold": "2s", "max": 5},
    "ramp": {"type": "ramp", "start": 0, "end": 8, "over": "4s"},
    "spike": {"type": "spike", "base": 2, "peak": 10, "at": 1, "rise": 1, "hold": 1, "decay": 1, "after": 2},
    "wave": {"type": "wave", "mean": 5, "amplitude": 3, "period": "4s"},
    "stages": {"type": "stages", "stages": [{"duration": 3, "target": 6}, {"duration": 3, "target": 2}]},
    "breakpoint": {"type": "breakpoint", "start": 2, "step": 2, "hold": "2s", "max": 6},
    "replay": {"type": "replay", "format": "azure"},  # its trace is written by the fixture
}
"""One of each registered shape, as a scenario writes it; a new shape adds its own."""


@pytest.fixture
def example(request, tmp_path):
    data = dict(EXAMPLES[request.param])
    if data["type"] == "replay":
        lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
        for k, t in enumerate([0.0, 0.25, 0.4, 1.5, 1.6, 1.7, 3.2, 5.9]):
            lines.append(f"2023-11-16 18:17:0{int(t)}.{round((t % 1) * 1e6):06d}0,{10 + k},{1 + k % 3}")
        (tmp_path / "azure.csv").write_text("\n".join(lines))
        data["trace"] = str(tmp_path / "azure.csv")
    return data


def _scenario(**load) -> object:
    return build_scenario({"name": "shape", "target": dict(TARGET), "load": {"duration": DURATION, **load},
                           "workload": {"prompt_tokens": 8, "output_tokens": 1}})  # fmt: skip


def test_every_registered_shape_has_an_example():
    assert set(EXAMPLES) == set(SHAPES.names)


@pytest.mark.parametrize("example", SHAPES.names, indirect=True)
def test_every_registered_shape_answers_the_protocol(example):
    shape = _scenario(rate=example).load.shape
    cls = SHAPES[example["type"]]
    assert type(shape) is cls and shape.type == example["type"] and SHAPES.of(example) is cls
    assert isinstance(shape.describe(), str) and shape.describe()

    t = np.linspace(0.0, DURATION, 60_001)[:-1]
    level = shape.level(t)
    assert level.shape == t.shape and np.all(np.isfinite(level)) and np.all(level >= 0)
    assert np.isclose(level.max(), shape.peak, rtol=1e-3), "peak is the highest level"
    assert cls.constant == (np.ptp(level) == 0), "constant says whether the level ever changes"
    if cls.climbs:
        assert level[0] < shape.peak, "a climbing shape starts below its peak"

    # its send times follow its level: as many as the level integrates to, all inside the duration
    offsets = shape.offsets_ns(DURATION, SeededArrivals(Arrival.CONSTANT, np.random.default_rng(0)))
    assert offsets.dtype == np.int64 and np.all(np.diff(offsets) >= 0)
    assert offsets.size and offsets[0] >= 0 and offsets[-1] < DURATION * SECOND
    expected = float(level.mean() * DURATION)
    assert abs(offsets.size - expected) <= max(1.5, 0.02 * expected), (offsets.size, expected)

    starts = [shape.user_start_ns(u, 4, ramp_up=2.0) for u in range(4)]
    assert starts[0] == 0 and starts[-1] < 2 * SECOND
    if cls.constant:  # spread evenly over the ramp-up
        assert len(set(np.diff(starts).tolist())) == 1 and starts[1] > 0
    else:
        assert set(starts) == {0}, "users of a changing level start at once: the level gates them"

    steps = shape.stop_steps
    if steps is not None:  # the level a stop reason names is the one held over that step
        assert steps.hold > 0 and steps.conditions
        for k in range(int(DURATION // steps.hold)):
            held = shape.level(np.array([k * steps.hold, (k + 1) * steps.hold - 1e-6]))
            assert held.tolist() == [steps.level(k)] * 2
    recorded = shape.recorded()
    if recorded is not None:  # the lengths it replays belong to the requests it sends
        assert len(recorded.plan.rows) == offsets.size
        assert np.array_equal(recorded.plan.offsets_ns, offsets)


@pytest.mark.parametrize("example", SHAPES.names, indirect=True)
def test_a_shape_says_whether_it_can_be_users_and_be_ramped(example):
    cls = SHAPES[example["type"]]
    if cls.sets_arrivals:
        with pytest.raises(ScenarioError, match=f"a {cls.__name__.lower()} sets arrival times: use it as rate"):
            _scenario(concurrency=example)
        return
    assert _scenario(concurrency=example).load.mode == "closed"
    if cls.constant:
        assert _scenario(concurrency=example, ramp_up="2s").load.ramp_up == 2.0
    else:
        with pytest.raises(ScenarioError, match="a concurrency shape sets when its users start"):
            _scenario(concurrency=example, ramp_up="2s")


def test_the_registry_refuses_a_shape_twice_or_a_shape_without_a_name():
    with pytest.raises(ValueError, match="'steady' is registered already"):
        ShapeRegistry(Steady, Steady)

    class Nameless(BaseShape):
        pass

    with pytest.raises(TypeError, match="Nameless needs a field type: Literal"):
        ShapeRegistry(Nameless)


def test_an_unknown_type_names_every_registered_shape():
    with pytest.raises(ScenarioError) as info:
        _scenario(rate="fast")
    assert f"one of {', '.join(SHAPES.names)}" in str(info.value)


# -- nobody else tests which shape it has ----------------------------------------------------

CLASSES = frozenset(cls.__name__ for cls in SHAPES)
NAMES = frozenset(SHAPES.names)
OWN_FILES = {
    "load/inputs.py": "a replay is one of the scenario's file readers, beside datasets and empirical distributions",
}


def shape_tests(tree: ast.AST) -> list[tuple[int, str]]:
    """Where a module tells shapes apart: ``isinstance`` with a shape class, a literal collection of
    two shape names or more, or a comparison of something's ``type`` with a shape's name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance" and len(node.args) == 2:
            named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} & CLASSES
            if named:
                found.append((node.lineno, f"tests a shape's class: {ast.unparse(node)}"))
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            names = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in NAMES}
            if len(names) > 1:
                found.append((node.lineno, f"lists shapes {', '.join(sorted(names))}"))
        elif isinstance(node, ast.Compare) and any(
            ast.unparse(side).endswith(".type") for side in (node.left, *node.comparators)
        ):
            constants = {n.value for side in (node.left, *node.comparators) for n in ast.walk(side)
                         if isinstance(n, ast.Constant)}  # fmt: skip
            if constants & NAMES:
                found.append((node.lineno, f"tests a shape by name: {ast.unparse(node)}"))
    return found


def test_no_module_outside_the_shapes_tells_shapes_apart():
    problems = [
        f"{path.relative_to(SRC)}:{line}: {what}"
        for path in sorted(SRC.rglob("*.py"))
        if "scenario/shapes" not in path.as_posix() and path.relative_to(SRC).as_posix() not in OWN_FILES
        for line, what in shape_tests(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not problems, "ask the shape (surgelab.scenario.shapes.BaseShape) instead:\n" + "\n".join(problems)


@pytest.mark.parametrize("code, found", [
    ("steady = isinstance(load.shape, Steady)", [(1, "tests a shape's class: isinstance(load.shape, Steady)")]),
    ("ok = isinstance(s, (Replay, Dataset))", [(1, "tests a shape's class: isinstance(s, (Replay, Dataset))")]),
    ('CLIMBING = ("ramp", "step", "stages")', [(1, "lists shapes ramp, stages, step")]),
    ('if load.concurrency.type == "replay":\n    pass', [(1, "tests a shape by name: load.concurrency.type == 'replay'")]),
    ("constant = load.shape.constant", []),  # the shape asked
    ('unit = "req/s" if mode == "open" else "users"', []),
    ('phases = ("warmup", "steady")', []),  # one name among other words: not a list of shapes
])  # fmt: skip
def test_the_scan_finds_a_shape_told_apart(code, found):
    assert shape_tests(ast.parse(code)) == found


# -- the worked example: one module and one registry line -------------------------------------

REGISTRY_LINE = re.compile(r"^SHAPES = ShapeRegistry\((.*)\)$", flags=re.M)


RUN = """
import json, sys
from pathlib import Path

import numpy as np

from surgelab.aio import run_async
from surgelab.load.phases import open_loop_offsets
from surgelab.metrics.store import read_records
from surgelab.runner import run_scenario
from surgelab.scenario.loader import ScenarioError, build_scenario
from surgelab.scenario.reference import markdown
from surgelab.sim import build_fleet, simulate

url, out = sys.argv[1], Path(sys.argv[2])
pulse = {"type": "pulse", "base": 2, "high": 24, "every": "1s", "width": "0.25s"}
data = {"name": "pulse", "seed": 5, "target": {"url": url, "model": "ok"},
        "load": {"rate": pulse, "duration": "2s", "arrival": "constant"},
        "workload": {"prompt_tokens": 8, "output_tokens": 2}}
scenario = build_scenario(data, source="test")
fleet = build_fleet({"pools": [{"profile": "tiny", "replicas": 1}]})
live = run_async(run_scenario(scenario, out / "live"))
simulate(scenario, fleet, out / "sim")
users = build_scenario({**data, "load": {"concurrency": {**pulse, "base": 1, "high": 3}, "duration": "2s"}})
simulate(users, fleet, out / "users")
try:
    build_scenario({**data, "load": {"rate": {"type": "pulsar"}}}, source="test")
except ScenarioError as exc:
    unknown = str(exc)
times = lambda run: sorted(read_records(out / run).column("intended_ns").to_pylist())
print(json.dumps({
    "planned": open_loop_offsets(scenario).tolist(), "live": times("live"), "sim": times("sim"),
    "live_failed": live.summary["requests"]["failed"], "described": scenario.load.describe(),
    "users": [(r["user"], bool(users.load.shape.level(np.array([r["intended_ns"] / 1e9]))[0] > r["user"]))
              for r in read_records(out / "users").select(["user", "intended_ns"]).to_pylist()],
    "unknown": unknown, "documented": "type: pulse" in markdown(),
}))
"""


def test_the_worked_example_is_one_module_and_one_registry_line(embedded, tmp_path, worked_example):
    heading = "Adding a load shape: a worked example"
    module, registry = worked_example(heading, "src/surgelab/scenario/shapes/pulse.py")
    src = tmp_path / "src"
    shutil.copytree(SRC, src / "surgelab", ignore=shutil.ignore_patterns("__pycache__"))
    (src / "surgelab/scenario/shapes/pulse.py").write_text(module, encoding="utf-8")
    init = src / "surgelab/scenario/shapes/__init__.py"
    text = init.read_text(encoding="utf-8")
    [listed] = REGISTRY_LINE.findall(text)
    [added] = REGISTRY_LINE.findall(registry)
    assert added == listed + ", Pulse", "the page's registry line is the source's with the new shape"
    init.write_text(REGISTRY_LINE.sub(lambda _: registry.strip(), text), encoding="utf-8")

    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, "-c", RUN, embedded.base_url, str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    planned = out["planned"]
    # 2 s of 2 req/s, with a quarter of each second at 24: 15 requests, 2 × 24 × 0.25 = 12 of them in the bursts
    assert len(planned) == 15 and sum(t % SECOND < SECOND // 4 for t in planned) == 12
    assert out["live"] == planned and out["sim"] == planned, "run and simulate send at the times planned"
    assert out["live_failed"] == 0
    assert out["described"] == "2, 24 for 0.25s every 1s req/s"
    # 1 user, 3 during the bursts: users 1 and 2 send only while the level is above them
    assert {user for user, _ in out["users"]} == {0, 1, 2}
    assert all(active for _, active in out["users"]), [u for u in out["users"] if not u[1]][:3]
    assert "pulse" in out["unknown"] and out["documented"]
