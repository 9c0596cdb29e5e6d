"""How sure the engine model is: its measured error for the calibrated configuration nearest a profile.

``benchmarks/accuracy_h100.py --write-accuracy`` simulates every real vLLM run of the
calibration set with each model left out of the fit and writes the median absolute errors to
``data/accuracy.yaml``; ``benchmarks/accuracy_heldout.py --write-accuracy`` adds, per family,
the errors on real runs that nothing was fitted on (other models, GPUs). A bar is the larger of
the two. A physics profile (``Deployment``) is matched to the family nearest it (its GPU, dense
or mixture-of-experts). A GPU that no run measured gets the H100 figures *carried over*, and
says so: the data-sheet ratio is a claim, not a measurement. Profiles given
as coefficients (a file, ``surgelab fit``) carry no error bar here: their error is whatever
their fit measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from surgelab.engine.profile import EngineProfile

__all__ = ["ErrorBar", "error_bar", "nearest_error", "LABELS"]

LABELS = {"e2e_mean": "E2E", "e2e_p99": "P99 E2E", "ttft_mean": "TTFT", "ttft_p99": "P99 TTFT", "itl_generated": "ITL",
          "itl_mean": "ITL (output re-tokenised)"}


@dataclass(frozen=True)
class ErrorBar:
    """Median absolute errors (%) of the engine model on real runs of a family of configurations."""

    errors: dict[str, float]
    runs: int
    models: int
    family: str
    """What was measured: ``dense models on H100 SXM, vLLM 0.15.1`` …"""
    carried: str = ""
    """Why the figures are another family's (a GPU no run measured); empty when measured on this one."""
    heldout_runs: int = 0
    """Runs of the family that nothing was fitted on (0: none); ``runs`` are the calibration set's, each model left out."""
    heldout_models: int = 0
    note: str = ""
    """What the held-out figures assume (e.g. load rates a run did not publish)."""

    @property
    def e2e(self) -> float:
        return self.errors.get("e2e_mean", 0.0)

    def describe(self, metrics: tuple[str, ...] = ("e2e_mean", "ttft_mean")) -> str:
        """``E2E ±5.2 %, TTFT ±10.1 % (median error on 9 real runs of 5 models, each model left out of the fit; dense
        models on H100 SXM, vLLM 0.15.1)``; with held-out runs, the larger of the two medians."""
        bars = ", ".join(f"{LABELS[m]} ±{self.errors[m]:.1f} %" for m in metrics if m in self.errors)
        parts = []
        if self.runs:
            parts.append(f"{self.runs} real runs of {_models(self.models)}, each model left out of the fit")
        if self.heldout_runs:
            parts.append(f"{self.heldout_runs} real runs of {_models(self.heldout_models)} never fitted"
                         + (f" ({self.note})" if self.note else ""))  # fmt: skip
        which = "the larger median error of " if len(parts) > 1 else "median error on "
        text = f"{bars} ({which}{', and of '.join(parts)}; {self.family})"
        return text + (f"; {self.carried}" if self.carried else "")

    def to_dict(self) -> dict[str, Any]:
        return {"errors": self.errors, "runs": self.runs, "models": self.models, "family": self.family,
                "carried": self.carried, "heldout_runs": self.heldout_runs, "heldout_models": self.heldout_models,
                "note": self.note, "text": self.describe()}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ErrorBar:
        return cls(dict(data["errors"]), int(data["runs"]), int(data["models"]), str(data["family"]), str(data["carried"]),
                   int(data.get("heldout_runs", 0)), int(data.get("heldout_models", 0)), str(data.get("note", "")))  # fmt: skip

    def pessimistic(self, capacity: float) -> float:
        """A capacity the model predicted, at the model's slow end: what still holds if it is ``e2e`` % optimistic."""
        return capacity / (1 + self.e2e / 100)


@cache
def _families() -> dict[str, Any]:
    text = resources.files("surgelab.engine").joinpath("data/accuracy.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def error_bar(profile: EngineProfile) -> ErrorBar | None:
    """The measured error nearest ``profile`` (None for coefficients that no physics derived)."""
    return nearest_error(profile.gpu, profile.num_experts > 0) if profile.gpu else None


def nearest_error(gpu: str, moe: bool) -> ErrorBar:
    """The measured error of the family nearest a model (dense or MoE) on ``gpu`` (its data-sheet name)."""
    data = _families()
    kind = "moe" if moe else "dense"
    measured = [f for f in data["families"].values() if f["kind"] == kind]
    same_gpu = [f for f in measured if f["gpu"] == gpu]
    family = (same_gpu or measured)[0]
    carried = "" if same_gpu else f"not measured on {gpu}: the {family['gpu']} figures, carried over by data sheet"
    heldout = family.get("heldout", {})
    errors = {k: max(float(part[k]) for part in (family, heldout) if k in part) for k in LABELS
              if k in family or k in heldout}  # fmt: skip
    return ErrorBar(
        errors=errors,
        runs=int(family.get("runs", 0)),
        models=int(family.get("models", 0)),
        family=f"{kind if kind == 'dense' else 'mixture-of-experts'} models on {family['gpu']}, {data['engine']}",
        carried=carried,
        heldout_runs=int(heldout.get("runs", 0)),
        heldout_models=int(heldout.get("models", 0)),
        note=str(heldout.get("note", "")),
    )


def _models(count: int) -> str:
    return f"{count} model" if count == 1 else f"{count} models"
