"""Every scenario in examples/ passes, briefly, against `surgelab serve` started as its header says.

Each example's header comment names the servers to start (``surgelab serve … --port N &``) and the
run (``surgelab run examples/NAME.yaml …``). The test starts those servers on free loopback ports,
points the run's targets at them, cuts every load to a few seconds (no warm-up, phases a second
apart) and runs the CLI: it must exit 0 — the example's own thresholds, or the default error bound,
hold — with every request in exactly one state.
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from surgelab.metrics.store import RECORDS_FILE
from surgelab.server.process import ServerProcess
from surgelab.units import parse_duration

ROOT = Path(__file__).parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
TRACES = ROOT.parent / "shared" / "data" / "traces"  # where ../../shared/data/traces points from examples/
SECONDS = 3.0  # each load's brief length
CRASH_SECONDS = 6.0  # a run whose header crashes a server: long enough to see the traffic move
START_S = 2.0  # from a server's start to the run's first request (pre-flight included), roughly
SKIPPED = {  # examples that no single `surgelab serve` can pass, and why
    "thousand-qps": "1,000 req/s is the load of the 20-24 replicas it is simulated on; one replica serves about 70",
}
_SERVE = re.compile(r"^#\s+surgelab serve (.*?)\s*&")
_RUN = re.compile(r"^#\s+surgelab run examples/(\S+)\.yaml(.*)$")


def _header(path: Path) -> list[str]:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


def _commands(path: Path) -> tuple[list[list[str]], list[str]]:
    """The header's serve commands (argument lists) and the arguments of its run command."""
    header = _header(path)
    serves = [shlex.split(m[1]) for m in map(_SERVE.match, header) if m]
    runs = [shlex.split(m[2].partition("#")[0]) for m in map(_RUN.match, header) if m and m[1] == path.stem]
    assert serves and runs, f"{path.name}: the header must say how to run it against surgelab serve"
    return serves, _without(runs[0], "--out")


def _without(args: list[str], flag: str) -> list[str]:
    if flag not in args:
        return args
    i = args.index(flag)
    return args[:i] + args[i + 2 :]


def _value(args: list[str], flag: str, default: str) -> str:
    return args[args.index(flag) + 1] if flag in args else default


class Servers:
    """The servers the headers start, shared by examples that start the same one (a crash is never shared)."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, ...], ServerProcess] = {}
        self._once: list[ServerProcess] = []  # started for one example, stopped after it

    def start(self, args: list[str]) -> ServerProcess:
        profile = _value(args, "--profile", "llama3-8b-h100")  # serve's default
        rest = _without(_without(args, "--port"), "--profile")
        profile = str(ROOT / profile) if profile.endswith((".yaml", ".json")) else profile
        key = (profile, *rest)
        shared = not any(a.startswith("--crash") for a in rest)
        if shared and key in self._running:
            return self._running[key]
        server = ServerProcess(rest, profile=profile).__enter__()
        if shared:
            self._running[key] = server
        else:
            self._once.append(server)
        return server

    def __enter__(self) -> Servers:
        return self

    def stop_once(self) -> None:
        while self._once:
            self._once.pop().__exit__(None, None, None)

    def __exit__(self, *exc: object) -> None:
        self.stop_once()
        for server in self._running.values():
            server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with Servers() as pool:
        yield pool


def _brief(data: dict, seconds: float) -> list[str]:
    """``--set`` overrides that cut every load to ``seconds``, phases a second apart.

    Rate thresholds (``goodput > 3.8`` at 4 req/s) are left out: they count the requests that end
    inside the window, and in a few seconds the ones still answering at its end are a large share."""
    sets = []
    if "phases" not in data:
        sets += [f"load.duration={seconds:g}s", "load.warmup=0s"]
    for i, _ in enumerate(data.get("phases", [])):
        sets += [f"phases.{i}.load.duration={seconds:g}s", f"phases.{i}.load.warmup=0s"]
        sets += [f"phases.{i}.start={i}s", f"phases.{i}.jitter=0s"]
    thresholds = data.get("thresholds", [])
    kept = [
        t for t in thresholds if not re.match(r"\s*(goodput|throughput)\b", t["expr"] if isinstance(t, dict) else t)
    ]
    if kept != thresholds:
        sets.append(f"thresholds={json.dumps(kept)}")
    return [arg for s in sets for arg in ("--set", s)]


def _crash_at_the_same_point(serve: list[str], planned_s: float) -> list[str]:
    """A header's ``--crash-after`` moved to the same share of the brief run (it counts from the server's start)."""
    if "--crash-after" not in serve:
        return serve
    i = serve.index("--crash-after") + 1
    share = parse_duration(serve[i]) / planned_s
    return [*serve[:i], f"{START_S + share * CRASH_SECONDS:g}s", *serve[i + 1 :]]


def _targets(data: dict, servers: dict[int, ServerProcess]) -> list[str]:
    """Point each target at the server its header started on that target's port."""

    def url(target: dict) -> str:
        port = urllib.parse.urlsplit(target["url"]).port
        assert port in servers, f"no server of the header listens on {port} for {target['url']}"
        return servers[port].base_url

    if "targets" in data:
        return [arg for i, t in enumerate(data["targets"]) for arg in ("--set", f"targets.{i}.url={url(t)}")]
    return ["--url", url(data["target"])]


def _run_dirs(out: Path, data: dict) -> list[Path]:
    """The run's directories: one, or one per target in compare mode (each on the same schedule)."""
    if data.get("routing", {}).get("mode") == "compare":
        return [out / target["name"] for target in data["targets"]]
    return [out]


def _why(summary: dict) -> dict:
    """What a failing run says about itself, in a few fields."""
    failed = [t for t in summary.get("thresholds", []) if not t["passed"]]
    return {"requests": summary["requests"]["by_state"], "failed thresholds": failed,
            "validity": summary["validity"]["reasons"], "errors": summary.get("errors", [])[:3]}  # fmt: skip


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_passes_against_the_servers_its_header_starts(path: Path, servers, cli, tmp_path) -> None:
    if path.stem in SKIPPED:
        pytest.skip(SKIPPED[path.stem])
    data = yaml.safe_load(path.read_text())
    if "replay" in json.dumps(data.get("load", {})) and not TRACES.is_dir():
        pytest.skip(f"public traces not found at {TRACES}")
    serves, run_args = _commands(path)
    crashes = any("--crash-after" in serve for serve in serves)
    if crashes:
        serves = [_crash_at_the_same_point(serve, parse_duration(data["load"]["duration"])) for serve in serves]
    started = {int(_value(serve, "--port", "8000")): servers.start(serve) for serve in serves}
    brief = _brief(data, CRASH_SECONDS if crashes else SECONDS)
    out = tmp_path / "run"
    try:
        result = cli("run", str(path), *run_args, *_targets(data, started), *brief, "--out", str(out), "-q")
    finally:
        servers.stop_once()
    for run_dir in _run_dirs(out, data):
        assert (run_dir / "summary.json").is_file(), result.stderr
        summary = json.loads((run_dir / "summary.json").read_text())
        assert result.returncode == 0, (result.stderr.splitlines()[-3:], _why(summary))
        requests = summary["requests"]
        assert requests["ok"] > 0
        assert (
            sum(requests["by_state"].values())
            == requests["scheduled"]
            == pq.read_metadata(run_dir / RECORDS_FILE).num_rows
        )
        if "phases" in data:
            assert set(summary["by_phase"]) == {phase["name"] for phase in data["phases"]}
