"""Files named in a scenario: relative paths are relative to the scenario file, as in k6 or Compose."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationInfo

__all__ = ["scenario_path"]


def scenario_path(value: str, info: ValidationInfo | None, what: str = "file") -> str:
    """The absolute path for ``value``; raises ValueError (a validation error) when it does not exist."""
    path = Path(value).expanduser()
    base = (info.context or {}).get("base_dir") if info is not None else None
    if base is not None and not path.is_absolute():
        path = Path(base) / path
    if not path.exists():
        raise ValueError(f"{what} not found: {path}")
    return str(path)
