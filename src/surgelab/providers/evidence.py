"""What is known about each target, gathered from run dirs, compare dirs, probes, history and declared facts.

Scoring judges *evidence*, not files: every value keeps where it came from and how it was
obtained, so a failed requirement can be explained with its measurement. Targets are named by
compare-mode sub-directories, route-mode ``by_target`` blocks, the probe's ``target`` field,
or the run directory's name; ``NAME=PATH`` on the command line overrides that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surgelab.providers.declared import DeclaredError, declared_measurements, load_declared
from surgelab.providers.history import History
from surgelab.providers.measured import Measured
from surgelab.providers.trends import history_metrics

__all__ = ["Measured", "TargetEvidence", "collect", "EvidenceError"]


class EvidenceError(ValueError):
    """An input that is neither a run dir, a compare dir, a probe file nor a history database."""


@dataclass
class TargetEvidence:
    name: str
    summaries: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (source, summary block)
    values: dict[str, list[Measured]] = field(default_factory=dict)  # provider metric -> measurements

    def add(self, metric: str, measured: Measured) -> None:
        self.values.setdefault(metric, []).append(measured)

    def run_metric(self, key: str) -> list[Measured]:
        """``p90(e2e)``, ``error_rate`` … from every summary of this target (seconds / fractions / per s)."""
        out = []
        for source, block in self.summaries:
            value = _from_summary(block, key)
            n = (block.get("requests") or {}).get("measured")
            out.append(Measured(value, source, f"summary.json {_path_of(key)} over {n} measured requests"))
        return out


def _path_of(key: str) -> str:
    if "(" in key:
        agg, metric = key.rstrip(")").split("(")
        return f"latency_ms.{metric}.{agg}"
    return {"error_rate": "requests.error_rate", "drop_rate": "requests.drop_rate",
            "throughput": "throughput.requests_per_s", "output_tokens_per_s": "throughput.output_tokens_per_s",
            "goodput": "goodput.requests_per_s"}.get(key, key)  # fmt: skip


def _from_summary(block: dict[str, Any], key: str) -> float | None:
    node: Any = block
    for part in _path_of(key).split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return None
    return float(node) / 1000.0 if "(" in key else float(node)


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise EvidenceError(f"{path}: expected a JSON object")
    return data


def _add_run(found: dict[str, TargetEvidence], run_dir: Path, name: str | None) -> None:
    summary = _load_json(run_dir / "summary.json")
    by_target = summary.get("by_target") or {}
    if by_target and name is None:  # route mode: one block per target of the same run
        for target, block in by_target.items():
            _get(found, target).summaries.append((f"{run_dir} (by_target.{target})", block))
        return
    _get(found, name or run_dir.name).summaries.append((str(run_dir), summary))


def _add_probe(found: dict[str, TargetEvidence], path: Path, data: dict[str, Any], name: str | None) -> None:
    target = _get(found, name or str(data.get("target") or path.stem))
    for metric, result in (data.get("metrics") or {}).items():
        if isinstance(result, dict):
            value = result.get("value")
            how = result.get("how", "") if value is not None else f"the probe found: {result.get('found', '')}"
            items = tuple(result["items"]) if isinstance(result.get("items"), list) else None
            target.add(metric, Measured(value, str(path), str(how), items if value is not None else None))


def _get(found: dict[str, TargetEvidence], name: str) -> TargetEvidence:
    return found.setdefault(name, TargetEvidence(name))


def collect(
    inputs: list[str], history: Path | None = None, history_options: dict[str, Any] | None = None,
    zone_required: bool = False,
) -> dict[str, TargetEvidence]:
    """Evidence per target from ``[NAME=]PATH`` inputs (and a history database, read with ``history_options``).

    A history's peak hours are read in ``history_options["tz"]``; without one they are UTC's, and
    when ``zone_required`` (a requirement judges ``peak_p90``) that is an error: the machine's
    own zone would make the verdict depend on where it was scored."""  # fmt: skip
    found: dict[str, TargetEvidence] = {}
    for spec in inputs:
        name, _, raw = spec.rpartition("=") if "=" in spec and not Path(spec).exists() else ("", "", spec)
        path = Path(raw)
        if path.is_dir() and (path / "compare-index.json").exists():
            if name:
                raise EvidenceError(f"{spec}: a compare directory names its targets itself; drop {name}=")
            index = _load_json(path / "compare-index.json")
            for target in index.get("runs") or index.get("targets") or []:
                if (path / target / "summary.json").exists():
                    _add_run(found, path / target, target)
        elif path.is_dir() and (path / "summary.json").exists():
            _add_run(found, path, name or None)
        elif path.is_file() and path.suffix == ".json":
            data = _load_json(path)
            if data.get("kind") != "surgelab-probe":
                raise EvidenceError(f"{path}: not a probe result (`surgelab probe --out`)")
            _add_probe(found, path, data, name or None)
        elif path.is_file() and path.suffix in (".sqlite", ".db"):
            history = path
        elif path.is_file() and path.suffix in (".yaml", ".yml"):
            try:
                facts = load_declared(path)
            except DeclaredError as exc:
                raise EvidenceError(exc.messages[0]) from None
            target = _get(found, name or facts.target)
            for metric, measured in declared_measurements(facts, path).items():
                target.add(metric, measured)
        else:
            raise EvidenceError(
                f"{spec}: not a run directory, compare directory, probe .json, declared-facts .yaml or history .sqlite"
            )
    if history is not None:
        options = dict(history_options or {})
        if options.get("tz") is None:
            if zone_required:
                raise EvidenceError(
                    f"{history}: peak_p90 is judged at the users' peak hours: give their time zone in the requirement "
                    "profile (peak: {tz: Asia/Shanghai, hours: 9-11}) or with --tz"
                )
            options["tz"] = "UTC"
        with History(history, create=False) as db:
            for target, metrics in history_metrics(db, **options).items():
                for metric, measured in metrics.items():
                    _get(found, target).add(metric, measured)
    return found
