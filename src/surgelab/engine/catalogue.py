"""Models by name: the shapes in ``data/models.yaml``, or any Hugging Face ``config.json``.

``find_model("Qwen/Qwen2.5-7B-Instruct")``, ``find_model("qwen2.5-7b")`` (an alias) and
``find_model("path/to/config.json")`` (or the folder holding it) all give an ``Architecture``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

import yaml

from surgelab.engine.architecture import Architecture, ArchitectureError, read_config_json

__all__ = ["find_model", "model_names", "models"]


@cache
def models() -> dict[str, Architecture]:
    """Every catalogued model by Hugging Face id (read once)."""
    text = resources.files("surgelab.engine").joinpath("data/models.yaml").read_text(encoding="utf-8")
    return {
        name: Architecture.from_config(entry["config"], name=name, source=entry.get("source", ""))
        for name, entry in yaml.safe_load(text).items()
    }


@cache
def _aliases() -> dict[str, str]:
    text = resources.files("surgelab.engine").joinpath("data/models.yaml").read_text(encoding="utf-8")
    names: dict[str, str] = {}
    for name, entry in yaml.safe_load(text).items():
        for key in (name, *entry.get("aliases", ())):
            names[key.lower()] = name
    return names


def model_names() -> list[str]:
    """The catalogued Hugging Face ids."""
    return sorted(models())


def find_model(spec: str | Path, base_dir: Path | None = None) -> Architecture:
    """A catalogued model (id or alias, any case) or a ``config.json`` (file, or the folder holding one)."""
    key = str(spec).lower()
    if isinstance(spec, str) and key in _aliases():
        return models()[_aliases()[key]]
    path = Path(spec)
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.exists():
        return read_config_json(path)
    raise ArchitectureError(
        f"unknown model {str(spec)!r}: give a Hugging Face config.json (file or folder) or one of "
        + ", ".join(sorted({a for a in _aliases() if "/" not in a}))
    )
