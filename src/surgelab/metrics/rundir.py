"""The run directory's format, for measured and simulated runs alike; nothing secret in it.

scenario.yaml     the resolved scenario (credential-like headers and fields redacted)
run.json          when and how the run started, the context it ran in, and how it ended
records.parquet   one row per scheduled request (records.parts/ while running or after a crash)
summary.json      the documented summary contract (docs/summary.md), with the run's context
                  from run.json beside the figures

Everything that writes or reads these files goes through here: ``surgelab run`` (every worker
layout), ``surgelab simulate`` (which adds ``fleet.parquet`` and ``fleet.json``) and
``surgelab summarize``. The run's context (``host_cpu``, the client's calibration, routing) is
recorded in run.json while the run happens and copied into the summary, never looked up again
where the summary is computed, so a run summarises the same on any machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml

from surgelab import __version__
from surgelab.files import os_error_line, write_atomic
from surgelab.metrics.store import PARTS_DIR, RECORDS_FILE
from surgelab.redact import redact_text, redact_tree
from surgelab.scenario.model import Scenario
from surgelab.units import SECOND

__all__ = [
    "RUN_FILE", "SCENARIO_FILE", "SUMMARY_FILE", "RunDirError", "prepare_run_dir", "redact", "run_info",
    "write_run_info", "read_run", "add_run_context", "write_summary_file", "write_json", "read_json", "records_not_written",
]  # fmt: skip

RUN_FILE = "run.json"
SCENARIO_FILE = "scenario.yaml"
SUMMARY_FILE = "summary.json"
CONTEXT = ("host_cpu", "client", "routing", "inputs")  # what the summary reports from run.json, in this order

_SECRET_WORDS = {"auth", "authorization", "authentication", "oauth", "token", "secret", "password", "passwd", "pwd",
                 "cookie", "credential", "credentials", "signature", "apikey", "bearer"}  # fmt: skip
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("session", "id")}
_SECRET_VALUE = re.compile(
    r"^(?:(?:Bearer|Basic|Token)\s+\S{6,}|sk-[\w-]{12,}|hf_\w{20,}|gh[pousr]_\w{20,}|xox[abpr]-[\w-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,})$"
)
REDACTED = "<redacted>"


class RunDirError(Exception):
    pass


def _words(key: str) -> list[str]:
    """``X-Auth-Token`` → x, auth, token; ``apiKey`` → api, key; ``max_tokens`` → max, tokens."""
    return re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key).lower().replace("-", " ").replace("_", " ").replace(".", " ").split()


def _secret(key: Any, value: Any) -> bool:
    """Text under a credential's name (a word of it: ``token``, ``api_key``, ``Authorization``), or a value that is
    one (``Bearer …``, ``sk-…``, a JWT) — never because a setting's name merely contains such a word:
    ``images.tokens: openai``, ``prompt_tokens``, ``tokenizer: builtin`` and ``api_key_env`` are settings."""
    if not isinstance(value, str) or key == "api_key_env":
        return False
    words = _words(str(key))
    if any(w in _SECRET_WORDS for w in words) or any(pair in _SECRET_PAIRS for pair in zip(words, words[1:])):
        return True
    return bool(_SECRET_VALUE.match(value.strip()))


def redact(value: Any) -> Any:
    """Replace the values of credential-like keys, and the credentials written into URLs, recursively."""
    if isinstance(value, dict):
        return {k: (REDACTED if _secret(k, v) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return redact_text(value) if isinstance(value, str) else value


def prepare_run_dir(path: Path, scenario: Scenario) -> Path:
    """Create the run directory (refusing to mix two runs) and save the resolved scenario."""
    path = Path(path)
    if path.exists() and any((path / name).exists() for name in (RECORDS_FILE, PARTS_DIR, SUMMARY_FILE)):
        raise RunDirError(f"{path} already holds a run; choose another --out")
    resolved = redact(scenario.model_dump(mode="json", by_alias=True))
    try:
        path.mkdir(parents=True, exist_ok=True)
        write_atomic(path / SCENARIO_FILE, yaml.safe_dump(resolved, sort_keys=False))
    except OSError as exc:
        raise RunDirError(f"cannot create run directory: {os_error_line(exc, 'or give --out another directory', path)}") from None
    return path


class _Phase(Protocol):
    @property
    def name(self) -> str: ...  # read-only: a scenario's Phase is frozen


class PlannedPhase(Protocol):
    """What run.json records of a phase's plan (``PhasePlan`` has it)."""

    @property
    def phase(self) -> _Phase: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def warmup_end_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...


def run_info(plans: Sequence[PlannedPhase], *, fleet: str | None = None) -> dict[str, Any]:
    """run.json's opening facts: version, start, the process (or the simulated ``fleet``), the planned phases.

    The caller adds what it knows at the start (the CPU counters, the client's calibration) and,
    at the end, how the run ended (``stop_reason``, ``stopped_at_s``, ``wall_s``).
    """
    info: dict[str, Any] = {"surgelab_version": __version__, "started_at": datetime.now(timezone.utc).isoformat()}
    info.update({"simulated": True, "fleet": fleet} if fleet is not None else {"pid": os.getpid()})
    info.update(
        planned_duration_s=max(p.end_ns for p in plans) / SECOND,
        window_start_s=min(p.warmup_end_ns for p in plans) / SECOND,
        phases=[
            {
                "name": p.phase.name,
                "start_s": p.start_ns / SECOND,
                "warmup_end_s": p.warmup_end_ns / SECOND,
                "end_s": p.end_ns / SECOND,
            }
            for p in plans
        ],
    )
    return info


def write_run_info(run_dir: Path, info: dict[str, Any]) -> None:
    write_json(Path(run_dir) / RUN_FILE, redact_tree(info))


def read_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The saved scenario's data and run.json; OSError, ValueError or yaml.YAMLError when it is not a run directory."""
    run_dir = Path(run_dir)
    data = yaml.safe_load((run_dir / SCENARIO_FILE).read_text(encoding="utf-8"))
    return data, read_json(run_dir / RUN_FILE)


def add_run_context(summary: dict[str, Any], info: dict[str, Any]) -> None:
    """Put what run.json recorded during the run beside the summary's figures: the CPU use
    (``host_cpu``), the client's calibrated headroom (``client``), the routing report and the
    files rows were read from (``inputs``, with the rows each skipped)."""
    cpu = {k: v for k, v in info["cpu"].items() if k != "rss_mb"} if info.get("cpu") else None  # the samples stay in run.json
    context = {"host_cpu": cpu, "client": info.get("client"), "routing": info.get("routing"), "inputs": info.get("inputs")}
    summary.update({key: context[key] for key in CONTEXT if context[key]})


def write_summary_file(run_dir: Path, summary: dict[str, Any]) -> None:
    write_json(Path(run_dir) / SUMMARY_FILE, redact_tree(summary))


def write_json(path: Path, data: Any) -> None:
    """Whole or absent (no ``.tmp`` left on a full disk); an OSError names ``path``."""
    write_atomic(path, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def records_not_written(exc: OSError, run_dir: Path) -> str:
    """One line for a run whose records, summary or run.json could not be written (a full disk)."""
    run_dir = Path(run_dir)
    parts = sorted((run_dir / PARTS_DIR).glob("*part-*.parquet")) if (run_dir / PARTS_DIR).is_dir() else []
    kept = f"the {len(parts)} record part(s) already written are kept in {run_dir / PARTS_DIR}"
    if not parts:
        kept = f"no records had been written yet in {run_dir}"
    if (run_dir / RECORDS_FILE).is_file():
        kept = f"the records are kept in {run_dir / RECORDS_FILE}"
    return f"{os_error_line(exc)}; {kept} — once there is room, `surgelab summarize {run_dir}` rebuilds the summary"


def read_json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())
