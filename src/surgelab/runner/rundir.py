"""The run directory: what a run leaves behind, and nothing secret in it.

scenario.yaml     the resolved scenario (credential-like headers and fields redacted)
run.json          when and how the run started, and how it ended
records.parquet   one row per scheduled request (records.parts/ while running or after a crash)
summary.json      the documented summary contract (docs/summary.md)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import yaml

from surgelab.scenario.model import Scenario

__all__ = ["prepare_run_dir", "redact", "write_json", "read_json", "RunDirError"]

_SECRET_NAME = re.compile(r"auth|api[-_]?key|token(?!i[sz]e)|secret|password|passwd|cookie|credential|signature", re.I)
REDACTED = "<redacted>"


class RunDirError(Exception):
    pass


def _secret(key: Any, value: Any) -> bool:
    """Text under a credential-like name; numbers, ``prompt_tokens`` or ``tokenizer: builtin`` are not secrets."""
    return isinstance(value, str) and key != "api_key_env" and bool(_SECRET_NAME.search(str(key)))


def redact(value: Any) -> Any:
    """Replace the values of credential-like keys, recursively."""
    if isinstance(value, dict):
        return {k: (REDACTED if _secret(k, v) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def prepare_run_dir(path: Path, scenario: Scenario) -> Path:
    """Create the run directory (refusing to mix two runs) and save the resolved scenario."""
    path = Path(path)
    if path.exists() and any((path / name).exists() for name in ("records.parquet", "records.parts", "summary.json")):
        raise RunDirError(f"{path} already holds a run; choose another --out")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot create run directory {path}: {exc.strerror or exc}") from None
    resolved = redact(scenario.model_dump(mode="json", by_alias=True))
    (path / "scenario.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False), encoding="utf-8")
    return path


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    tmp.replace(path)


def read_json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())
