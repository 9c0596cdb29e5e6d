"""The type gate: mypy (with the pydantic plugin) over src/, clean outside an allow-list that only shrinks.

``pyproject.toml`` lists the modules that still have type errors (``ignore_errors``). mypy runs
once without that list: every error must be in a listed module, and every listed module must
still have one, so fixing a module's last error means taking it off the list.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("mypy")
tomllib = pytest.importorskip("tomllib")  # Python 3.11+: the gate runs there (CI's 3.11)


def _module(line: str) -> str:
    """``src/surgelab/cli/__init__.py:53: error: …`` → ``surgelab.cli``."""
    return re.sub(r"(/__init__)?\.py$", "", line.split(":")[0]).removeprefix("src/").replace("/", ".")


def _allow_list(config: dict) -> set[str]:
    return {m for o in config["tool"]["mypy"].get("overrides", []) if o.get("ignore_errors") for m in o["module"]}


def test_mypy_is_clean_outside_the_allow_list_and_the_list_holds_only_modules_with_errors(tmp_path: Path) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    allowed = _allow_list(config)
    options = {k: v for k, v in config["tool"]["mypy"].items() if k != "overrides"}
    ini = tmp_path / "mypy.ini"
    ini.write_text(
        "[mypy]\n" + "".join(f"{k} = {', '.join(v) if isinstance(v, list) else v}\n" for k, v in options.items())
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ini), "--cache-dir", str(tmp_path / "cache"), "src"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert errors or run.returncode == 0, run.stdout + run.stderr
    failing = {_module(line) for line in errors}
    outside = sorted(line for line in errors if _module(line) not in allowed)
    assert not outside, "type errors outside the allow-list in pyproject.toml:\n" + "\n".join(outside)
    fixed = sorted(allowed - failing)
    assert not fixed, f"clean now, take them off the allow-list in pyproject.toml: {fixed}"
